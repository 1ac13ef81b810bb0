import ArgumentParser
import Foundation
import Logging
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
            throw CLIError(.configuration, error.description, cause: error)
        }
        let registry = bootstrapServiceLogsAndMetrics()
        do {
            try await Relay.run(configuration, logger: Logger(label: "ferry-relay"), metrics: registry) { port in
                FileHandle.standardOutput.write(Data("ferry relay: listening on \(configuration.server.host):\(port)\n".utf8))
            }
        } catch let error as RelayError {
            throw CLIError(.relay, error.description, cause: error)
        }
    }
}
