import Foundation
import Hummingbird
import HummingbirdCore
import HummingbirdTLS
import Logging
import NIOCore
import NIOSSL
import PostgresNIO
import Prometheus
import ServiceLifecycle
import FerryStore
import FerrySync
import FerryServer

/// `ferry relay`: the replication API over change sets kept in PostgreSQL (docs/FLEET.md).
///
/// A relay needs no model and applies nothing: it checks each pushed change set's envelope and
/// signature, stores it once (whichever relay took it first), and serves what each peer lacks in
/// causal order, holding a long poll open until something new arrives. Relays keep no state of their
/// own, so several serve one database and peers fail over between them.
public enum Relay {
    /// The relay's services — the PostgreSQL client, the listener that wakes long polls, the
    /// purge schedule and the HTTP server — in one `ServiceGroup`, not yet running. With
    /// `stopsOnSignals`, SIGTERM and SIGINT stop it gracefully. `onListening` hears the port.
    public static func assemble(_ configuration: RelayConfiguration, logger: Logger, metrics: PrometheusCollectorRegistry? = nil,
                                stopsOnSignals: Bool = false, onListening: @escaping @Sendable (Int) -> Void = { _ in }) async throws -> ServiceGroup {
        let tokens: AccessTokens
        do {
            tokens = try AccessTokens(file: configuration.server.tokensFile)
        } catch {
            throw RelayError(.tokens, "server.tokens_file: \(error)", cause: error)
        }
        for warning in AccessTokens.warnings(forFile: configuration.server.tokensFile) { logger.warning("server.tokens_file: \(warning)") }
        let client = PostgresClient(configuration: try clientConfiguration(configuration.database), backgroundLogger: logger)
        let database = RelayDatabase(client: client, logger: logger,
                                     place: "\(configuration.database.host):\(configuration.database.port)/\(configuration.database.name)")
        let signal = ChangeSignal()
        let relay = RelayService(configuration: configuration, database: database, tokens: tokens, signal: signal, purges: PurgeRecord(),
                                 pulls: PullRecord(), metrics: metrics, logger: logger, onListening: onListening)
        var groupConfiguration = ServiceGroupConfiguration(
            services: [.init(service: client), .init(service: relay)],
            gracefulShutdownSignals: stopsOnSignals ? [.sigterm, .sigint] : [], logger: logger)
        groupConfiguration.maximumGracefulShutdownDuration = .seconds(10)
        groupConfiguration.maximumCancellationDuration = .seconds(5)
        return ServiceGroup(configuration: groupConfiguration)
    }

    /// Runs a relay until SIGTERM or SIGINT.
    public static func run(_ configuration: RelayConfiguration, logger: Logger, metrics: PrometheusCollectorRegistry? = nil,
                           onListening: @escaping @Sendable (Int) -> Void = { _ in }) async throws {
        let group = try await assemble(configuration, logger: logger, metrics: metrics, stopsOnSignals: true, onListening: onListening)
        try await group.run()
    }

    /// HTTP/1, in TLS when the configuration has a certificate and key.
    static func serverBuilder(_ tls: RelayConfiguration.TLS?) throws -> HTTPServerBuilder {
        guard let tls else { return .http1() }
        do {
            let chain = try NIOSSLCertificate.fromPEMFile(tls.certificate)
            guard !chain.isEmpty else { throw RelayError(.tls, "server.tls.certificate \(tls.certificate): no certificate in the file") }
            let key = try NIOSSLPrivateKey(file: tls.key, format: .pem)
            var configuration = TLSConfiguration.makeServerConfiguration(certificateChain: chain.map { .certificate($0) }, privateKey: .privateKey(key))
            configuration.minimumTLSVersion = .tlsv12
            return try .tls(.http1(), tlsConfiguration: configuration)
        } catch let error as RelayError {
            throw error
        } catch {
            throw RelayError(.tls, "server.tls: cannot use \(tls.certificate) and \(tls.key) (PEM certificate chain and private key): \(error)", cause: error)
        }
    }

    static func clientConfiguration(_ database: RelayConfiguration.Database) throws -> PostgresClient.Configuration {
        var password: String?
        if let file = database.passwordFile {
            let text: String
            do {
                text = try String(contentsOfFile: file, encoding: .utf8)
            } catch {
                throw RelayError(.passwordFile, "database.password_file: cannot read \(file)", cause: error)
            }
            password = text.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        let tls: PostgresClient.Configuration.TLS
        switch database.tls {
        case .disable: tls = .disable
        case .prefer: tls = .prefer(.makeClientConfiguration())
        case .require: tls = .require(.makeClientConfiguration())
        }
        var configuration = PostgresClient.Configuration(host: database.host, port: database.port, username: database.user,
                                                         password: password, database: database.name, tls: tls)
        configuration.options.maximumConnections = database.connections + 1
        configuration.options.connectTimeout = .seconds(5)
        return configuration
    }
}

/// The relay's own work once the PostgreSQL client runs: prepare the tables, then listen for new
/// change sets, purge on schedule and serve HTTP, until shutdown.
struct RelayService: Service {
    let configuration: RelayConfiguration
    let database: RelayDatabase
    let tokens: AccessTokens
    let signal: ChangeSignal
    let purges: PurgeRecord
    let pulls: PullRecord
    let metrics: PrometheusCollectorRegistry?
    let logger: Logger
    let onListening: @Sendable (Int) -> Void

    func run() async throws {
        let fleet = try await prepareWithRetries()
        logger.info("relay of database \(database.place), whose change sets are known to peers as store \(fleet.uuidString)")
        let trust = RelayTrust(policy: configuration.trust)
        try await trust.reload(from: database)
        let api = RelayAPI(database: database, fleet: fleet, tokens: tokens, trust: trust, signal: signal,
                           maxBodyBytes: configuration.server.maxBodyBytes,
                           bodySlots: BodySlots(capacity: configuration.server.maxConcurrentBodies),
                           oversize: OversizeBodies(maxBytes: configuration.server.maxChangeSetBytes),
                           metrics: metrics, purges: purges,
                           pulls: pulls)
        let server = configuration.server
        let logger = self.logger
        let onListening = self.onListening
        let app = Application(
            router: api.router(),
            server: try Relay.serverBuilder(server.tls),
            configuration: .init(address: .hostname(server.host, port: server.port), serverName: "ferry-relay"),
            onServerRunning: { channel in
                let port = channel.localAddress?.port ?? server.port
                logger.info("relay listening on \(server.host):\(port)")
                onListening(port)
            },
            logger: logger
        )
        try await withGracefulShutdownHandler {
            try await serve(app, trust: trust)
        } onGracefulShutdown: {
            signal.close()
        }
    }

    /// The HTTP server, the listener, the pulls' record and the purge schedule, until one ends.
    private func serve(_ app: some ApplicationProtocol, trust: RelayTrust) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await app.runService() }
            group.addTask { await listen(trust) }
            group.addTask { await recordPulls() }
            if configuration.retention.interval > 0 {
                group.addTask { await purgeOnSchedule() }
            }
            try await group.next()
            group.cancelAll()
        }
    }

    /// The tables, waiting for the database while it cannot be reached (a relay started before its
    /// database, or during a failover, comes up by itself).
    private func prepareWithRetries() async throws -> UUID {
        var delay: Duration = .milliseconds(250)
        while true {
            do {
                return try await cancelWhenGracefulShutdown { try await database.prepare() }
            } catch let error where RelayDatabase.withinTransaction(error) is RelayError {
                // (A refusal, such as a database of a newer schema: trying again cannot help.)
                throw RelayDatabase.withinTransaction(error)
            } catch is CancellationError {
                throw CancellationError()
            } catch {
                logger.warning("cannot prepare the relay's tables in \(database.place) yet: \(String(reflecting: error).prefix(400)); trying again")
                try await Task.sleep(for: delay)
                delay = min(delay * 2, .seconds(5))
            }
        }
    }

    /// `LISTEN ferry_changesets` on a connection of its own: every notification (from any relay on the
    /// database) wakes the long polls; a lost connection is opened again, and the polls woken so that
    /// none misses what came meanwhile.
    private func listen(_ trust: RelayTrust) async {
        while !Task.isCancelled {
            do {
                try await database.client.withConnection { connection in
                    try await connection.listen(on: RelayDatabase.channel) { notifications in
                        signal.bump()
                        try? await trust.reload(from: database)
                        for try await notification in notifications {
                            if notification.payload == RelayDatabase.keysPayload {
                                // Another relay (or this one) took a rotation: check with it from now on.
                                do { try await trust.reload(from: database) } catch { logger.warning("could not read the relay's keys again: \(error)") }
                            } else {
                                signal.bump()
                            }
                        }
                    }
                }
            } catch {
                if Task.isCancelled { return }
                logger.warning("listening for new change sets failed: \(String(reflecting: error).prefix(300)); listening again in a second")
            }
            signal.bump()
            try? await Task.sleep(for: .seconds(1))
        }
    }

    /// How often the vectors stores pulled with are written down for retention.
    static let pullRecordInterval: Duration = .seconds(2)

    /// Writes down, every ``pullRecordInterval``, the vectors stores pulled with (``PullRecord``).
    private func recordPulls() async {
        while !Task.isCancelled {
            try? await Task.sleep(for: Self.pullRecordInterval)
            let noted = pulls.take()
            do {
                try await database.recordPulls(noted)
            } catch {
                // Noted again at the stores' next pulls; retention only waits longer meanwhile.
                logger.warning("could not note the stores' pulls for retention: \(String(reflecting: error).prefix(300))")
            }
        }
    }

    /// Drops, every `retention.interval`, the change sets every peer that pulled lately has, made
    /// more than `retention.keep` ago (docs/FLEET.md, "Retention").
    private func purgeOnSchedule() async {
        let retention = configuration.retention
        while !Task.isCancelled {
            try? await Task.sleep(for: .seconds(retention.interval))
            if Task.isCancelled { return }
            do {
                let count = try await purgeOnce(database: database, retention: retention)
                purges.note(count)
                if count > 0 { logger.info("purged \(count) change sets every recent peer has") }
            } catch {
                logger.warning("purge failed: \(String(reflecting: error).prefix(300))")
            }
        }
    }
}

/// One purge by `retention`: per origin, up to what every peer seen within `peerExpiry` has.
func purgeOnce(database: RelayDatabase, retention: RelayConfiguration.Retention) async throws -> Int {
    let peers = try await database.activePeers(expiry: retention.peerExpiry)
    guard let first = peers.first else { return 0 }
    let held = try await database.vector()
    var common: VersionVector = [:]
    for (origin, last) in held {
        var through = min(last, first.vector[origin, default: 0])
        for peer in peers.dropFirst() { through = min(through, peer.vector[origin, default: 0]) }
        if through > 0 { common[origin] = through }
    }
    return try await database.purge(through: common, keep: retention.keep)
}
