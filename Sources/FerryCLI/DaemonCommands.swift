import ArgumentParser
import Foundation
import Logging
import Metrics
import Prometheus
import FerryStore
import FerrySQLite
import FerrySync
import FerryServer
import FerryDaemon

/// Reads `--config`, turning its error into a one-line CLI error.
func loadConfiguration(_ path: String) throws -> Configuration {
    do {
        return try Configuration.load(path: path)
    } catch {
        throw CLIError(.configuration, error.description, cause: error)
    }
}

/// A client for the daemon this configuration describes, with its admin token; an HTTPS
/// daemon is verified against `server.tls.ca_file` when given, else the system trust store.
func localDaemonClient(_ configuration: Configuration) throws -> PeerClient {
    let tokens: AccessTokens
    do {
        tokens = try AccessTokens(file: configuration.server.tokensFile)
    } catch {
        throw CLIError(.configuration, "server.tokens_file: \(error)", cause: error)
    }
    guard let token = tokens.adminToken else {
        throw CLIError(.configuration, "\(configuration.server.tokensFile) has no admin token; " +
                       "add a line 'admin TOKEN' so ferry sync-now and status can talk to the daemon")
    }
    let host = ["0.0.0.0", "::", "[::]"].contains(configuration.server.host) ? "127.0.0.1" : configuration.server.host
    let scheme = configuration.server.tls == nil ? "http" : "https"
    guard let url = URL(string: "\(scheme)://\(host.contains(":") ? "[\(host)]" : host):\(configuration.server.port)") else {
        throw CLIError(.configuration, "server.host and server.port do not make a URL")
    }
    var trust = PeerTrust.systemStore
    if let caFile = configuration.server.tls?.caFile {
        do {
            trust = .certificateAuthority(try CertificateAuthority(file: caFile))
        } catch {
            throw CLIError(.configuration, "server.tls.ca_file: \(error)", cause: error)
        }
    }
    return PeerClient(baseURL: url, token: token, timeout: 3600, trust: trust)
}

/// The store, tokens and peers of a configuration, for work done in this process when no daemon runs.
func openInProcess(_ configuration: Configuration, label: String) throws -> Daemon.Parts {
    do {
        return try Daemon.open(configuration, logger: Logger(label: label))
    } catch {
        throw CLIError(.daemon, error.description, cause: error)
    }
}

/// Closes what ``openInProcess(_:label:)`` opened, leaving the store as one file.
func closeInProcess(_ parts: Daemon.Parts) throws {
    do {
        try parts.close()
    } catch {
        throw CLIError(.store, error.description, cause: error)
    }
}

/// What a long-running command (`ferry run`, `ferry relay`) does first: logs to standard error at
/// `LOG_LEVEL` (default info), and the process's metrics into one Prometheus registry, served at /metrics.
func bootstrapServiceLogsAndMetrics() -> PrometheusCollectorRegistry {
    LoggingSystem.bootstrap { label in
        var handler = StreamLogHandler.standardError(label: label)
        handler.logLevel = ProcessInfo.processInfo.environment["LOG_LEVEL"].flatMap(Logger.Level.init(rawValue:)) ?? .info
        return handler
    }
    let registry = PrometheusCollectorRegistry()
    MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))
    return registry
}

struct RunCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Run the sync daemon in the foreground (what systemd runs).",
        discussion: "Serves the HTTP API, pushes new change sets to every peer soon after each save, pulls on sync.pull_interval, and stops cleanly on SIGTERM."
    )

    @Option(name: .long, help: "The configuration file (YAML; see config/ferry.yaml).")
    var config: String

    func run() async throws {
        let configuration = try loadConfiguration(config)
        let registry = bootstrapServiceLogsAndMetrics()
        let logger = Logger(label: "ferry")
        do {
            try await Daemon.run(configuration, logger: logger, metrics: registry) { port in
                // Written straight to the file descriptor: scripts and tests wait for this line.
                FileHandle.standardOutput.write(Data("ferry: listening on \(configuration.server.host):\(port)\n".utf8))
            }
        } catch let error as DaemonError {
            throw CLIError(.daemon, error.description, cause: error)
        }
    }
}

struct SyncNowCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync-now",
        abstract: "Sync with the peers now: through the running daemon, or in this process when none runs.",
        discussion: "Prints one summary line per peer. Exit status 1 when any peer failed."
    )

    @Option(name: .long, help: "The configuration file (YAML).")
    var config: String

    @Option(name: .long, help: "Sync with this peer only (its name in the configuration).")
    var peer: String?

    func run() async throws {
        let configuration = try loadConfiguration(config)
        if let peer, !configuration.peers.contains(where: { $0.name == peer }) {
            throw CLIError(.argument, "no peer named '\(peer)' in \(config); peers: \(configuration.peers.map(\.name).joined(separator: ", "))")
        }
        let client = try localDaemonClient(configuration)
        do {
            let answer = try await withProgress(from: client) { try await client.requestSync(peer: peer) }
            try report(daemonAnswer: answer)
            return
        } catch PeerError.notListening {
            StandardError.write("ferry: no daemon answers on \(client.baseURL.absoluteString); syncing in this process")
        } catch PeerError.failed(let status, let message) where status == 503 {
            // The daemon runs but cannot sync (its store is not open): say why, do not go around it.
            throw CLIError(.daemon, "the daemon on \(client.baseURL.absoluteString) cannot sync now: \(message)",
                           cause: PeerError.failed(status: status, message: message))
        } catch let error as PeerError {
            throw CLIError(.daemon, "the daemon on \(client.baseURL.absoluteString) did not answer: \(error)", cause: error)
        }
        let parts = try openInProcess(configuration, label: "ferry-sync-now")
        let showProgress = isatty(STDERR_FILENO) == 1
        let results = await parts.coordinator.round(peer: peer) { line in
            if showProgress { StandardError.write(line) }
        }
        for result in results { print(result.summary) }
        try closeInProcess(parts)
        if results.contains(where: { $0.error != nil }) { throw ExitCode(1) }
    }

    /// Runs `body` (a request the daemon may take long to answer); on a terminal,
    /// prints every two seconds how many change sets the store has taken in meanwhile.
    private func withProgress<T: Sendable>(from client: PeerClient, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
        guard isatty(STDERR_FILENO) == 1 else { return try await body() }
        let work = Task { try await body() }
        let progress = Task {
            let start = (try? await client.state())?.vector.values.reduce(0, +) ?? 0
            while !Task.isCancelled {
                try await Task.sleep(for: .seconds(2))
                if let now = try? await client.state() {
                    StandardError.write("ferry: syncing… \(now.vector.values.reduce(0, +) - start) change sets taken in so far")
                }
            }
        }
        defer { progress.cancel() }
        return try await work.value
    }

    /// Prints the daemon's per-peer answer; exit status 1 when a peer failed.
    private func report(daemonAnswer answer: SyncNowAnswer) throws {
        for peer in answer.peers { print(peer.summary) }
        if !answer.succeeded { throw ExitCode(1) }
    }
}

struct StatusCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show the daemon's peers, last successful syncs, lag, and waiting and quarantined change sets.",
        discussion: "Prints the daemon's status document (JSON). When no daemon runs, prints the store's own state with \"daemon\": \"not running\"."
    )

    @Option(name: .long, help: "The configuration file (YAML).")
    var config: String

    func run() async throws {
        let configuration = try loadConfiguration(config)
        let client = try localDaemonClient(configuration)
        do {
            print(try await client.status().json)
        } catch PeerError.notListening {
            let parts = try openInProcess(configuration, label: "ferry-status")
            var local = await parts.coordinator.status()
            local.daemon = "not running"
            try closeInProcess(parts)
            print(local.json)
        } catch {
            // Something listens but does not answer as the daemon should (e.g. its certificate is not trusted here).
            throw CLIError(.daemon, "the daemon on \(client.baseURL.absoluteString) did not answer: \(error)", cause: error)
        }
    }
}
