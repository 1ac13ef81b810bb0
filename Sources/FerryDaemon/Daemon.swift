import Foundation
import Hummingbird
import HummingbirdCore
import HummingbirdTLS
import NIOCore
import NIOPosix
import Logging
import Metrics
import Prometheus
import ServiceLifecycle
import Synchronization
import UnixSignals
import FerryModel
import FerryStore
import FerrySigning
import FerrySQLite
import FerrySync
import FerryServer

/// Why the daemon cannot start.
public struct DaemonError: FerryError, Sendable {
    /// The kinds of fault that keep the daemon from starting.
    public enum Code: String, Hashable, Sendable {
        /// The store cannot be used as configured (`store.path`, `store.signing_key`): not a Ferry store,
        /// a model it cannot migrate to, a signing key that cannot be read.
        case store
        /// The model (`store.model`) cannot be read.
        case model
        /// A tokens file cannot be used: the server's (`server.tokens_file`) or a peer's (`token_file`).
        case tokens
        /// A certificate, key or CA file cannot be used (`server.tls`, a peer's `ca_file`).
        case tls
        /// The store could not be replaced by the one started from a peer's snapshot.
        case bootstrap
        /// The daemon stopped before its store opened.
        case stopped
    }

    /// The kind of fault.
    public let code: Code
    /// What is wrong, for a person to fix.
    public let description: String
    /// The error met, when there was one.
    public let cause: (any Error)?

    /// A fault of kind `code` saying `description`; `cause` is the error met, when there was one.
    init(_ code: Code, description: String, cause: (any Error)? = nil) {
        self.code = code
        self.description = description
        self.cause = cause
    }
}

/// `ferry run`: the HTTP API, the sync loop and systemd notification in one
/// `ServiceGroup`, stopped gracefully by SIGTERM or SIGINT.
public enum Daemon {
    /// Everything the daemon and `ferry sync-now` need, opened from a configuration.
    public struct Parts: Sendable {
        public let configuration: Configuration
        public let endpoint: ReplicationEndpoint
        public let coordinator: SyncCoordinator
        public let tokens: AccessTokens
        /// The store itself, for closing it when the daemon stops (``StoreClosing``).
        let store: SQLiteStore

        /// Closes the store (``SQLiteStore/close()``), leaving it as one file. What a one-shot
        /// command that opened these parts does when it is done: its process may end before the
        /// parts are released, and a store still open at the end leaves its log beside the file.
        public func close() throws(StoreError) {
            try store.close()
        }
    }

    /// What the daemon reads besides the store: the model, the server's tokens, and each peer's token.
    struct Settings: Sendable {
        let configuration: Configuration
        /// The model's current version.
        let model: ManagedObjectModel
        /// The other versions of its bundle: a store made with one of them migrates to `model`.
        let earlierModels: [ManagedObjectModel]
        let tokens: AccessTokens
        let peers: [(name: String, urls: [URL], token: String, trust: PeerTrust)]
        /// Where a peer's 410 goes when the daemon bootstraps by itself (`sync.bootstrap`).
        var bootstrap: BootstrapRequest?
    }

    /// Opens the store and reads the tokens and peers of `configuration`.
    public static func open(_ configuration: Configuration, logger: Logger) throws(DaemonError) -> Parts {
        let settings = try readSettings(configuration)
        do {
            return try openStore(settings, logger: logger)
        } catch {
            throw DaemonError(.store, description: "store.path \(configuration.store.path): \(error)", cause: error)
        }
    }

    /// A running daemon commits for as long as it runs: its store's log is given its working size
    /// at once, so that its commits (and those of every process on the file) overwrite the log
    /// instead of appending to it. A one-shot command (`sync-now`, `status`) would write the zeros
    /// only for its log to be deleted when it closes the store, so it does not.
    private static func preallocateLog(of store: SQLiteStore, logger: Logger) {
        do {
            let added = try store.preallocateLog()
            if added > 0 { logger.debug("gave the write-ahead log its working size", metadata: ["bytes_added": .stringConvertible(added)]) }
        } catch {
            logger.warning("could not give the write-ahead log its working size; commits append to it until it has grown (each sync a little slower)",
                           metadata: ["why": .string(error.description)])
        }
    }

    /// Reads the model, the tokens file and the peers' token files.
    static func readSettings(_ configuration: Configuration) throws(DaemonError) -> Settings {
        let versions: ModelVersions
        do {
            versions = try XcodeModelReader.readVersions(at: configuration.store.model)
        } catch {
            throw DaemonError(.model, description: "store.model: \(error)", cause: error)
        }
        let tokens: AccessTokens
        do {
            tokens = try AccessTokens(file: configuration.server.tokensFile)
        } catch {
            throw DaemonError(.tokens, description: "server.tokens_file: \(error)", cause: error)
        }
        var peers: [(name: String, urls: [URL], token: String, trust: PeerTrust)] = []
        for peer in configuration.peers {
            let token: String
            do {
                token = try PeerClient.token(inFile: peer.tokenFile)
            } catch {
                if case .unreadable = error {
                    throw DaemonError(.tokens, description: "peer \(peer.name): cannot read token_file \(peer.tokenFile)", cause: error)
                }
                throw DaemonError(.tokens, description: "peer \(peer.name): token_file \(peer.tokenFile) must hold one token", cause: error)
            }
            var trust = PeerTrust.systemStore
            if let caFile = peer.caFile {
                do {
                    trust = .certificateAuthority(try CertificateAuthority(file: caFile))
                } catch {
                    throw DaemonError(.tls, description: "peer \(peer.name): ca_file: \(error)", cause: error)
                }
            }
            peers.append((peer.name, peer.urls, token, trust))
        }
        return Settings(configuration: configuration, model: versions.current, earlierModels: versions.earlier, tokens: tokens, peers: peers)
    }

    /// Opens (or creates) the store and sets up its endpoint and the peers' coordinator.
    /// `forRunning`: for a daemon that runs on (not a one-shot command), whose store's log is then
    /// given its working size (``SQLiteStore/preallocateLog()``).
    /// - Throws: ``StoreError/unavailable(path:reason:cause:)`` when the store's surroundings keep it
    ///   shut for now; any other error when it cannot be used as configured.
    static func openStore(_ settings: Settings, forRunning: Bool = false, logger: Logger) throws -> Parts {
        let configuration = settings.configuration
        let directory = URL(fileURLWithPath: configuration.store.path).deletingLastPathComponent().path
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        } catch {
            throw StoreError.unavailable(path: configuration.store.path, reason: folderProblem(directory, error), cause: error)
        }
        let (key, created) = try StoreSigningKey.loadOrCreate(at: configuration.store.signingKey)
        if created {
            logger.notice("made the store's signing key (it had none)",
                          metadata: ["file": .string(configuration.store.signingKey), "public_key": .string(key.publicKey)])
        }
        let store = try SQLiteStore(path: configuration.store.path, model: settings.model, options: .init(
            earlierModels: settings.earlierModels,
            migrationProgress: { step, number, total in logger.info("migrating the store: step \(number) of \(total), \(step)") },
            signingKey: key))
        if let migration = store.migration {
            logger.notice("store migrated to the model's current version", metadata: [
                "from": .string(migration.fromVersionHash), "to": .string(migration.toVersionHash),
                "changes": .string(migration.changes.joined(separator: "; ")), "ms": .string(String(format: "%.1f", migration.seconds * 1000)),
            ])
        }
        if forRunning { preallocateLog(of: store, logger: logger) }
        let trust = try OriginTrust(store: store, policy: configuration.trust)
        let endpoint = try ReplicationEndpoint(store: store, maximumOrigins: configuration.sync.maxOrigins,
                                               trust: trust, observer: trustObserver(logger))
        let coordinator = SyncCoordinator(endpoint: endpoint, peers: settings.peers, batchSize: configuration.sync.batchSize,
                                          requestTimeout: configuration.sync.requestTimeout,
                                          retries: RetrySchedule(maximum: configuration.sync.maxBackoff), logger: logger,
                                          onGone: goneHandler(settings.bootstrap))
        endpoint.askForKeys(from: coordinator.peerClients)
        return Parts(configuration: configuration, endpoint: endpoint, coordinator: coordinator, tokens: settings.tokens, store: store)
    }

    /// Counts and logs refused change sets (never their bodies) and the keys learned or refused.
    private static func trustObserver(_ logger: Logger) -> TrustObserver {
        TrustObserver(refused: { refusal, via in
            Counter(label: "ferry_changesets_refused_total", dimensions: [("reason", refusal.reason.rawValue), ("via", via)]).increment()
            logger.warning("refused a change set that does not prove its origin; nothing of its batch was applied", metadata: [
                "origin": .string(refusal.origin.uuidString), "seq": .string(String(refusal.sequence)),
                "reason": .string(refusal.reason.rawValue), "via": .string(via), "why": .string(refusal.detail),
            ])
        }, keyEvent: { event in
            switch event {
            case .learned(let key, let peer):
                logger.notice("trusting a key", metadata: ["origin": .string(key.origin.uuidString), "public_key": .string(key.publicKey),
                                                           "from": .string(String(key.firstSequence)), "how": .string(key.source.rawValue),
                                                           "peer": .string(peer)])
            case .conflict:
                Counter(label: "ferry_key_conflicts_total").increment()
                logger.error("\(event.description)")
            }
        }, couldNotLearnKeys: { peer, error in
            // (A peer that cannot be reached now is tried again at the next key it could teach.)
            let level: Logger.Level = error is PeerError ? .debug : .warning
            logger.log(level: level, "could not learn the keys of peer \(peer): \(error)")
        })
    }

    /// What a peer's 410 does: hand it to `request`, off the sync round (nothing when there is none).
    private static func goneHandler(_ request: BootstrapRequest?) -> SyncCoordinator.GoneHandler? {
        guard let request else { return nil }
        return { peer, client, reason in
            Task { await request.peerAnsweredGone(peer, client: client, reason: reason) }
        }
    }

    /// Why `folder` could not be created, naming the part of the path in the way.
    private static func folderProblem(_ folder: String, _ error: Error) -> String {
        var existing = URL(fileURLWithPath: folder)
        var isFolder: ObjCBool = false
        while !FileManager.default.fileExists(atPath: existing.path, isDirectory: &isFolder), existing.path != "/" {
            existing.deleteLastPathComponent()
        }
        if !isFolder.boolValue {
            return "cannot create the folder \(folder): \(existing.path) is a file, not a folder — move it or change store.path"
        }
        if access(existing.path, W_OK) != 0 {
            let cause = errno == EROFS ? "is on a read-only file system" : "is not writable by this user"
            return "cannot create the folder \(folder): \(existing.path) \(cause)"
        }
        return "cannot create the folder \(folder): \(error.localizedDescription)"
    }

    /// Connections with no traffic either way for this long are closed (a stalled or vanished peer).
    static let idleTimeout: TimeAmount = .seconds(60)

    /// Plain HTTP/1.1, or HTTPS with the configured certificate and key (TLS 1.2 or later).
    static func serverBuilder(_ tls: Configuration.TLS?) throws(DaemonError) -> HTTPServerBuilder {
        let http = HTTP1Server.builder(idleTimeout: idleTimeout)
        guard let tls else { return http }
        do {
            let chain = try NIOSSLCertificate.fromPEMFile(tls.certificate)
            guard !chain.isEmpty else { throw DaemonError(.tls, description: "server.tls.certificate \(tls.certificate): no certificate in the file") }
            let key = try NIOSSLPrivateKey(file: tls.key, format: .pem)
            var configuration = TLSConfiguration.makeServerConfiguration(certificateChain: chain.map { .certificate($0) }, privateKey: .privateKey(key))
            configuration.minimumTLSVersion = .tlsv12
            return try .tls(http, tlsConfiguration: configuration)
        } catch let error as DaemonError {
            throw error
        } catch {
            throw DaemonError(.tls, description: "server.tls: cannot use \(tls.certificate) and \(tls.key) (PEM certificate chain and private key): \(error)",
                              cause: error)
        }
    }

    /// How long a stop (SIGTERM, SIGINT) may take, so that the daemon always ends well inside
    /// systemd's `TimeoutStopSec=30`: open requests and the sync round in progress get
    /// ``graceful`` to finish (a round is cut between change sets, so nothing is half-applied);
    /// then whatever still runs is cancelled, and if that takes longer than ``cancellation``
    /// the process ends with a message naming the timeout (a stuck connection, say, must not
    /// keep a stopped daemon alive).
    public enum ShutdownBounds {
        /// Time for open requests and a sync round to finish after SIGTERM.
        public static let graceful: Duration = .seconds(10)
        /// Time for cancelled work to end after that.
        public static let cancellation: Duration = .seconds(5)
    }

    /// Runs until SIGTERM or SIGINT. `onListening` hears the bound port once the server accepts connections.
    /// `metrics` is the registry the process bootstrapped `MetricsSystem` with (the command does that,
    /// once per process; a library must not): it is served at `/metrics`, which is absent without one.
    ///
    /// A store that cannot be opened because of its surroundings (read-only or full file
    /// system, permissions) does not stop the daemon: it serves health, status and metrics,
    /// answers the store's routes with 503 and the reason, and keeps trying to open the
    /// store with backoff; once it opens, syncing starts by itself. Any other error ends it.
    ///
    /// With `sync.bootstrap`, a peer answering 410 makes the daemon take its snapshot, stop its
    /// services, start the store again from the snapshot (carrying over what the old store
    /// held that the snapshot lacks: ``Bootstrap``) and start its services again. At most one
    /// bootstrap an hour: a store that keeps being answered 410 right after one needs an operator.
    public static func run(_ configuration: Configuration, logger: Logger, metrics registry: PrometheusCollectorRegistry? = nil,
                           onListening: @escaping @Sendable (Int) -> Void = { _ in }) async throws {
        var lastBootstrap: Date?
        // Whether SIGTERM or SIGINT came: a stop asked for then is a stop, even if a snapshot was
        // ready to start the store again at the same moment.
        let stopAsked = Mutex(false)
        let listener = Task {
            for await _ in await UnixSignalsSequence(trapping: .sigterm, .sigint) { stopAsked.withLock { $0 = true } }
        }
        defer { listener.cancel() }
        var settings = try readSettings(configuration)
        let model = settings.model
        while true {
            let allowed = configuration.sync.bootstrap && (lastBootstrap.map { Date().timeIntervalSince($0) > 3600 } ?? true)
            settings.bootstrap = allowed ? BootstrapRequest(storePath: configuration.store.path, model: model,
                                                            earlierModels: settings.earlierModels, logger: logger) : nil
            let request = settings.bootstrap
            let group = try await assemble(settings, logger: logger, metrics: registry, stopsOnSignals: true, onListening: onListening)
            await request?.whenReady { await group.triggerGracefulShutdown() }
            try await group.run()
            guard let prepared = await request?.take() else { break }
            if stopAsked.withLock({ $0 }) {
                SQLiteStore.removeFiles(at: prepared.path)
                logger.notice("stopping as asked: the snapshot of \(prepared.peer) prepared meanwhile is discarded, the store stays as it was")
                break
            }
            lastBootstrap = Date()
            do {
                let (storePath, earlierModels) = (configuration.store.path, settings.earlierModels)
                let report = try await NIOThreadPool.singleton.runIfActive {
                    try Bootstrap.complete(prepared, storePath: storePath, model: model, earlierModels: earlierModels, logger: logger)
                }
                Counter(label: "ferry_bootstraps_total", dimensions: [("result", "ok")]).increment()
                logger.notice("\(report)")
            } catch {
                Counter(label: "ferry_bootstraps_total", dimensions: [("result", "failed")]).increment()
                SQLiteStore.removeFiles(at: prepared.path)
                logger.error("could not start the store again from the snapshot of \(prepared.peer): \(error); it stays as it was")
            }
        }
        logger.info("stopped")
    }

    /// The daemon's services — the HTTP server and the sync loop — assembled from `configuration`
    /// into one `ServiceGroup`, not yet running: what ``run(_:logger:metrics:onListening:)`` runs,
    /// and what a test or an application runs inside its own process. With `stopsOnSignals`,
    /// SIGTERM and SIGINT stop it gracefully (what `ferry run` wants); without, the caller ends
    /// it with `triggerGracefulShutdown()`. Opens the store (or starts waiting for it).
    /// Descriptors kept free for everything but clients' connections: the store's files and
    /// connections, the commit watcher, the listening socket, logs, and a few per peer.
    static let reservedDescriptors = 48

    /// `server.max_connections`, lowered when the process may not open that many descriptors
    /// besides the ones it needs itself (`LimitNOFILE`): running out of descriptors must end
    /// in connections left waiting, never in a failure inside the process.
    static func connectionCap(_ configuration: Configuration, peers: Int, logger: Logger) -> Int {
        let configured = configuration.server.maxConnections
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < rlim_t(Int32.max) else { return configured }
        let available = Int(clamping: limit.rlim_cur) - reservedDescriptors - 4 * peers
        let cap = max(2, min(configured, available))
        if cap < configured {
            let message = "server.max_connections lowered from \(configured) to \(cap): " +
                "this process may open only \(limit.rlim_cur) file descriptors; raise LimitNOFILE or lower server.max_connections"
            logger.warning("\(message)")
        }
        return cap
    }

    public static func assemble(_ configuration: Configuration, logger: Logger, metrics registry: PrometheusCollectorRegistry? = nil,
                                stopsOnSignals: Bool = false, onListening: @escaping @Sendable (Int) -> Void = { _ in }) async throws -> ServiceGroup {
        try await assemble(try readSettings(configuration), logger: logger, metrics: registry, stopsOnSignals: stopsOnSignals, onListening: onListening)
    }

    /// ``assemble(_:logger:metrics:stopsOnSignals:onListening:)`` from settings already read.
    static func assemble(_ settings: Settings, logger: Logger, metrics registry: PrometheusCollectorRegistry?,
                         stopsOnSignals: Bool, onListening: @escaping @Sendable (Int) -> Void) async throws -> ServiceGroup {
        let configuration = settings.configuration
        for warning in AccessTokens.warnings(forFile: configuration.server.tokensFile) { logger.warning("server.tokens_file: \(warning)") }
        let notifier = SystemdNotifier()
        let opening = StoreOpening(settings: settings, notifier: notifier, logger: logger)
        let gate = try await opening.openAtStart()
        let connections = ConnectionGauge(maximum: connectionCap(configuration, peers: settings.peers.count, logger: logger))
        let api = FerryAPI(gate: gate, tokens: settings.tokens, maxBodyBytes: configuration.server.maxBodyBytes,
                           maxConcurrentBodies: configuration.server.maxConcurrentBodies, connections: connections,
                           control: opening, metrics: registry)
        let app = Application(
            router: api.router(),
            server: try serverBuilder(configuration.server.tls),
            // Past server.max_connections the server stops accepting (new connections wait in the kernel's
            // queue): idle connections must not use up the descriptors the daemon needs for its store.
            configuration: .init(address: .hostname(configuration.server.host, port: configuration.server.port), serverName: "ferry",
                                 availableConnectionsDelegate: connections),
            onServerRunning: { channel in
                let port = channel.localAddress?.port ?? configuration.server.port
                logger.info("listening on \(configuration.server.host):\(port)")
                if let unavailable = await opening.unavailability {
                    notifier.ready(status: "serving on port \(port); waiting for the store: \(unavailable.reason)")
                } else {
                    notifier.ready(status: "serving on port \(port)")
                }
                onListening(port)
            },
            logger: logger
        )
        var sync = SyncLoop(parts: .afterOpening(opening), pullInterval: configuration.sync.pullInterval, history: configuration.history,
                            notifier: notifier, logger: logger)
        for peer in configuration.peers { sync.snapshotUploads[peer.name] = peer.snapshotUploadInterval }
        // (A graceful shutdown stops the services in the reverse of this order: the store closes last.)
        var groupConfiguration = ServiceGroupConfiguration(services: [.init(service: StoreClosing(opening: opening, logger: logger)),
                                                                      .init(service: app), .init(service: sync)],
                                                           gracefulShutdownSignals: stopsOnSignals ? [.sigterm, .sigint] : [], logger: logger)
        groupConfiguration.maximumGracefulShutdownDuration = ShutdownBounds.graceful
        groupConfiguration.maximumCancellationDuration = ShutdownBounds.cancellation
        return ServiceGroup(configuration: groupConfiguration)
    }
}
