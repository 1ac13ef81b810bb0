import ArgumentParser
import Foundation
import Logging
import Metrics
import Prometheus
import FerryRelay

struct RelayCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "relay",
        abstract: "Run a relay: the replication API over change sets kept in PostgreSQL, for fleets (docs/FLEET.md).",
        discussion: "Several relays may serve one database; peers list them all (urls:) and fail over. Stops cleanly on SIGTERM."
    )

    @Option(name: .long, help: "The relay's configuration file (YAML; see config/relay.yaml).")
    var config: String

    func run() async throws {
        let configuration: RelayConfiguration
        do {
            configuration = try RelayConfiguration.load(path: config)
        } catch {
            throw CLIError(error.description)
        }
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = ProcessInfo.processInfo.environment["LOG_LEVEL"].flatMap(Logger.Level.init(rawValue:)) ?? .info
            return handler
        }
        let registry = PrometheusCollectorRegistry()
        MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))
        do {
            try await Relay.run(configuration, logger: Logger(label: "ferry-relay"), metrics: registry) { port in
                FileHandle.standardOutput.write(Data("ferry relay: listening on \(configuration.server.host):\(port)\n".utf8))
            }
        } catch let error as RelayError {
            throw CLIError(error.description)
        }
    }
}
