import Foundation
import Logging
import Metrics
import NIOPosix
import ServiceLifecycle
import FerryStore
import FerrySQLite
import FerrySync
import FerryServer

/// Opens the daemon's store: at start, or — when the store's surroundings keep
/// it shut (a read-only or full file system, missing permissions) — again and
/// again with backoff until it opens. Meanwhile the daemon serves what needs no
/// store, and `/v1/status`, `/healthz` and the metrics say what is wrong; on a
/// read-only file system it also serves reads (state, pulls) from a read-only
/// view of the store, so peers still get the change sets only this store has.
///
/// Metrics: `ferry_store_errors_total{operation="open"}` counts failed attempts,
/// `ferry_store_open` is 1 once the store is open and 0 before.
actor StoreOpening: DaemonControl {
    private let settings: Daemon.Settings
    private let notifier: SystemdNotifier
    private let logger: Logger
    /// What the HTTP API sees of the store.
    let gate = StoreGate(unavailable: "the daemon is starting")
    /// The store, its endpoint and the peers' coordinator, once open.
    private(set) var parts: Daemon.Parts?
    /// Why the store is not open, while it is not.
    private(set) var unavailability: StoreUnavailable?
    /// A read-only view of the store serving reads while it cannot be opened for writing.
    private var readOnlyView: ReplicationEndpoint?
    private let openGauge = Gauge(label: "ferry_store_open")
    /// Set by ``closeStore()``: a store that opens after it is closed at once.
    private var isClosed = false

    init(settings: Daemon.Settings, notifier: SystemdNotifier, logger: Logger) {
        self.settings = settings
        self.notifier = notifier
        self.logger = logger
    }

    /// The peers' coordinator, once the store is open.
    var coordinator: SyncCoordinator? { parts?.coordinator }

    /// Tries once to open the store; returns the gate for the HTTP API, open or not.
    /// - Throws: ``DaemonError`` when the store cannot be used as configured (not a Ferry
    ///   store, an incompatible model, …): waiting would not help.
    func openAtStart() async throws(DaemonError) -> StoreGate {
        if case .unavailable(let reason) = try await attempt() {
            let serving = readOnlyView == nil ? "health, status and metrics" : "health, status, metrics and pulls (from a read-only view of the store)"
            logger.error("""
                \(reason); serving \(serving) meanwhile, and trying again \
                (backoff up to \(Int(settings.configuration.sync.maxBackoff)) s)
                """)
        }
        return gate
    }

    /// Waits until the store opens (at once when it already is), trying again with
    /// backoff and pinging systemd's watchdog meanwhile; cancelled by shutdown.
    func waitUntilOpen() async throws -> Daemon.Parts {
        var retries = RetrySchedule(maximum: settings.configuration.sync.maxBackoff)
        var random = SystemRandomNumberGenerator()
        let started = Date()
        while true {
            if let parts { return parts }
            let delay = retries.recordFailure(at: Date(), using: &random)
            try await sleep(seconds: delay)
            let previous = unavailability?.reason
            let hadView = readOnlyView != nil
            switch try await attempt() {
            case .opened(let parts):
                let waited = Int(Date().timeIntervalSince(started).rounded())
                logger.notice("store \(settings.configuration.store.path) opened after \(waited) s of waiting; syncing starts")
                notifier.status("serving; store open")
                return parts
            case .unavailable(let reason):
                if readOnlyView != nil && !hadView {
                    logger.notice("serving pulls from a read-only view of the store meanwhile")
                }
                if reason != previous {
                    logger.error("\(reason); still trying")
                } else {
                    logger.debug("store still unavailable; next try in up to \(Int(settings.configuration.sync.maxBackoff)) s")
                }
            }
        }
    }

    /// The status document: the coordinator's once the store is open; before, the
    /// store's problem and the configured peers.
    func status() async -> StatusDocument {
        if let coordinator { return await coordinator.status() }
        var since = Date()
        if case .unavailable(_, let date, _) = await gate.state { since = date }
        let problem = StatusDocument.StoreProblem(message: unavailability?.description ?? "the store is not open yet",
                                                  since: since, readOnlyView: readOnlyView != nil)
        return StatusDocument(storeError: problem, peers: settings.peers.map { peer in
            var status = StatusDocument.Peer(name: peer.name, url: peer.urls[0].absoluteString, state: "waiting for the store")
            if peer.urls.count > 1 { status.urls = peer.urls.map(\.absoluteString) }
            return status
        })
    }

    /// A sync round now (`POST /v1/sync`), once the store is open.
    func sync(peer: String?) async -> SyncNowOutcome {
        guard let coordinator else {
            return .unavailable(unavailability?.description ?? "the daemon is starting; try again in a moment")
        }
        if let peer, await !coordinator.peerNames.contains(peer) { return .unknownPeer(peer) }
        return .ran(SyncNowAnswer(await coordinator.round(peer: peer)))
    }

    private enum Attempt {
        case opened(Daemon.Parts)
        case unavailable(String)
    }

    /// One try at opening the store, and the gate set to match; when that fails for its
    /// surroundings, also a try at a read-only view (serving reads until the next try).
    private func attempt() async throws(DaemonError) -> Attempt {
        do {
            // On NIO's thread pool, not Swift's shared one: an open syncs (the log's working size, a
            // new store's schema) and may migrate a large store for minutes.
            let (settings, logger) = (self.settings, self.logger)
            let opened = try await NIOThreadPool.singleton.runIfActive { try Daemon.openStore(settings, forRunning: true, logger: logger) }
            if isClosed {
                // Stopped while it opened (the open is not cut short): closed as ``closeStore()`` would have.
                await Self.close(opened, logger: logger)
                throw DaemonError(.stopped, description: "the daemon stopped while its store was opening")
            }
            parts = opened
            unavailability = nil
            readOnlyView = nil
            openGauge.record(1)
            await gate.open(opened.endpoint)
            return .opened(opened)
        } catch StoreError.unavailable(let path, let reason, _) {
            let problem = StoreUnavailable(reason: "cannot open store \(path): \(reason)")
            unavailability = problem
            Counter(label: "ferry_store_errors_total", dimensions: [("operation", "open")]).increment()
            openGauge.record(0)
            // A fresh view each time: an older one stops reading once its file system turns writable.
            readOnlyView = await openReadOnlyView()
            await gate.stillUnavailable(problem.reason, readOnlyView: readOnlyView)
            return .unavailable(problem.reason)
        } catch {
            throw DaemonError(.store, description: "store.path \(settings.configuration.store.path): \(error)", cause: error)
        }
    }

    /// A read-only view of the store, when one can be opened (an existing store made with
    /// this model); nil otherwise. Its reads stop by themselves if the file system turns
    /// writable (``SQLiteStore/Options/readOnly``).
    private func openReadOnlyView() async -> ReplicationEndpoint? {
        let (path, model) = (settings.configuration.store.path, settings.model)
        do {
            let store = try await NIOThreadPool.singleton.runIfActive {
                try SQLiteStore(path: path, model: model, options: .init(createIfMissing: false, readOnly: true))
            }
            // (Said once, as the first view opens: a fresh one is opened at every try.)
            if let limitation = store.readOnlyViewLimitation, readOnlyView == nil {
                logger.warning("the read-only view of the store \(limitation)")
            }
            return try ReplicationEndpoint(store: store)
        } catch {
            // (`readOnlyView` is still the previous try's: losing it refuses pulls from now on, which is worth a warning.)
            if readOnlyView != nil {
                logger.warning("the read-only view of the store could not be opened again (\(error)); pulls are refused until it or the store opens")
            } else {
                logger.debug("no read-only view of the store either: \(error)")
            }
            return nil
        }
    }

    /// Closes the store, if it is open (``SQLiteStore/close()``: its write-ahead log copied into
    /// the file and removed); requests and rounds after it fail. Called once the services using it
    /// have stopped.
    func closeStore() async {
        isClosed = true
        guard let parts else { return }
        await Self.close(parts, logger: logger)
    }

    /// Closes `parts`' store on NIO's thread pool, as it was opened: closing waits for the store's
    /// other connections, and for its writer's last checkpoint and sync, which Swift's shared pool
    /// must not. (Cancelled before it starts, it does nothing: the log stays, and the next open reads it.)
    private static func close(_ parts: Daemon.Parts, logger: Logger) async {
        _ = try? await NIOThreadPool.singleton.runIfActive {
            do {
                try parts.close()
                logger.debug("store \(parts.configuration.store.path) closed")
            } catch {
                logger.warning("\(error); its write-ahead log stays beside it and is read when it opens again")
            }
        }
    }

    /// Sleeps `seconds`, pinging the watchdog on its interval meanwhile (waiting is not a hang).
    private func sleep(seconds: TimeInterval) async throws {
        var left = Duration.milliseconds(Int64(seconds * 1000))
        while left > .zero {
            let step = min(left, notifier.watchdogInterval ?? left)
            try await Task.sleep(for: step)
            left -= step
            notifier.watchdog()
        }
    }
}
