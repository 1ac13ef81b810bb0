import Foundation
import Logging
import ServiceLifecycle
import Synchronization
import FerryStore
import FerrySync

/// The daemon's sync loop, as a service: pushes as soon as the store has a new
/// change set (a save by this process or by any other process on the same file,
/// or change sets received from other peers, which are forwarded), woken by the
/// store's commits rather than by polling it; pulls from every peer on the
/// interval with jitter; and retries failed peers when their backoff runs out.
///
/// The daemon starts it before its store is open (`ferry run` serves HTTP at once, and
/// waits for a store that is missing or on a read-only file system): the loop then waits
/// for ``StoreOpening`` first.
struct SyncLoop: Service {
    /// Where the loop's coordinator and store come from.
    enum Parts {
        /// Ready (tests build them directly).
        case ready(SyncCoordinator, ReplicationEndpoint)
        /// Once the daemon's store opens.
        case afterOpening(StoreOpening)
    }

    let parts: Parts
    let pullInterval: TimeInterval
    /// How long history is kept, and how often it is purged (`history.purge_interval` 0: never).
    let history: Configuration.History
    let notifier: SystemdNotifier
    let logger: Logger
    /// Per peer (a relay), seconds between uploads of this store's snapshot to it.
    var snapshotUploads: [String: TimeInterval] = [:]
    /// The longest the pull schedule sleeps between looks at its clock (it also beats the heartbeat).
    static let longestNap: TimeInterval = 1

    init(coordinator: SyncCoordinator, endpoint: ReplicationEndpoint, pullInterval: TimeInterval,
         history: Configuration.History = Configuration.History(), notifier: SystemdNotifier, logger: Logger) {
        self.init(parts: .ready(coordinator, endpoint), pullInterval: pullInterval, history: history, notifier: notifier, logger: logger)
    }

    init(parts: Parts, pullInterval: TimeInterval, history: Configuration.History = Configuration.History(),
         notifier: SystemdNotifier, logger: Logger) {
        self.parts = parts
        self.pullInterval = pullInterval
        self.history = history
        self.notifier = notifier
        self.logger = logger
    }

    func run() async throws {
        let coordinator: SyncCoordinator, endpoint: ReplicationEndpoint
        switch parts {
        case .ready(let ready, let readyEndpoint):
            (coordinator, endpoint) = (ready, readyEndpoint)
        case .afterOpening(let opening):
            do {
                let opened = try await cancelWhenGracefulShutdown { try await opening.waitUntilOpen() }
                (coordinator, endpoint) = (opened.coordinator, opened.endpoint)
            } catch is CancellationError {
                notifier.stopping()
                return
            }
        }
        let heartbeat = Heartbeat()
        do {
            try await cancelWhenGracefulShutdown {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask { try await loop(coordinator, endpoint, heartbeat) }
                    if let interval = notifier.watchdogInterval {
                        group.addTask { try await watchdog(every: interval, heartbeat) }
                    }
                    try await group.next()
                    group.cancelAll()
                }
            }
        } catch is CancellationError {
            // Shutdown: a round cut off here resumes on the next start.
        }
        // (Said so that a slow shutdown's log shows which part of the daemon was still busy.)
        logger.info("sync loop ended")
        notifier.stopping()
    }

    /// Pings systemd's watchdog while the loop shows signs of life: an iteration,
    /// or a batch of a long round (a catch-up of millions of objects is not a hang).
    /// A loop silent for `Heartbeat.limit` stops the pings, and systemd restarts the daemon.
    private func watchdog(every interval: Duration, _ heartbeat: Heartbeat) async throws {
        while !Task.isCancelled {
            if heartbeat.isRecent { notifier.watchdog() }
            try await Task.sleep(for: interval)
        }
    }

    private func loop(_ coordinator: SyncCoordinator, _ endpoint: ReplicationEndpoint, _ heartbeat: Heartbeat) async throws {
        // Subscribed before the first round, so that no commit made meanwhile is missed.
        let commits = endpoint.commits()
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await pullOnSchedule(coordinator, heartbeat) }
            group.addTask { try await pushOnCommits(commits, coordinator, heartbeat) }
            group.addTask { try await followRelays(coordinator, endpoint) }
            if history.purgeInterval > 0 {
                group.addTask { try await purgeOnSchedule(coordinator) }
            }
            for (peer, interval) in snapshotUploads {
                group.addTask { try await uploadSnapshots(to: peer, every: interval, coordinator, endpoint) }
            }
            try await group.next()
            group.cancelAll()
        }
    }

    /// The pull interval and the clock, as events for the peers' sessions: ``PeerEvent/pullDue`` at
    /// start and then every pull interval (a full round with every peer); in between, a
    /// ``PeerEvent/tick`` at each look at the clock (a round with each failed peer whose backoff has run out).
    private func pullOnSchedule(_ coordinator: SyncCoordinator, _ heartbeat: Heartbeat) async throws {
        let beat: @Sendable (String) -> Void = { _ in heartbeat.beat() }
        let clock = coordinator.clock  // the coordinator's backoffs are reckoned on it too
        var nextPull = clock.now()  // pull from everyone at start
        while !Task.isCancelled {
            heartbeat.beat()
            if clock.now() >= nextPull {
                // Keys changed by `ferry trust` on the store's file are taken on the pull schedule.
                do { try coordinator.endpoint.trust.reload() } catch { logger.warning("could not read the store's keys again: \(error)") }
                _ = await coordinator.handle(.pullDue, progress: beat)
                nextPull = clock.now().addingTimeInterval(pullInterval * Double.random(in: 0.9...1.1))
            } else {
                _ = await coordinator.handle(.tick, progress: beat)
            }
            let wake = min(nextPull, await coordinator.nextWake() ?? nextPull, clock.now().addingTimeInterval(Self.longestNap))
            // (At least a millisecond: a failed peer's round may still be running when its retry is due.)
            try await clock.sleep(until: max(wake, clock.now().addingTimeInterval(0.001)))
        }
    }

    /// A purge of the history every `history.purge_interval` seconds, the first one interval after
    /// the start (by then every reachable peer has had a round, and acknowledged what it has).
    private func purgeOnSchedule(_ coordinator: SyncCoordinator) async throws {
        let clock = coordinator.clock
        while !Task.isCancelled {
            try await clock.sleep(until: clock.now().addingTimeInterval(history.purgeInterval))
            await coordinator.purge(retention: history.retention, horizon: history.tombstoneHorizon)
        }
    }

    /// Long-polls every peer that is a relay (known once a round has read its state): a pull round
    /// with it as soon as it holds change sets this store lacks, so that a save anywhere in a fleet
    /// reaches this store without waiting for the pull interval (docs/FLEET.md).
    private func followRelays(_ coordinator: SyncCoordinator, _ endpoint: ReplicationEndpoint) async throws {
        var following: Set<String> = []
        try await withThrowingTaskGroup(of: Void.self) { group in
            while !Task.isCancelled {
                for relay in await coordinator.relays() where following.insert(relay.name).inserted {
                    logger.info("following relay \(relay.name): new change sets there are pulled as they arrive")
                    group.addTask { try await follow(relay.name, relay.client, batchSize: relay.batchSize, coordinator, endpoint) }
                }
                // (Real time, not the coordinator's clock: tests that step a manual clock count its sleepers.)
                try await Task.sleep(for: .seconds(Self.longestNap))
            }
            group.cancelAll()
        }
    }

    /// One relay's long poll: waits at the relay for change sets this store's vector lacks, then
    /// pulls them in a round. When the change set offered is still not taken in after the round (held
    /// here: another model version, a missing predecessor), the next poll waits for the pull interval,
    /// and after a failed poll or round for a second, so that neither spins; the pull schedule and the
    /// backoffs stay as they are.
    private func follow(_ name: String, _ client: PeerClient, batchSize: Int, _ coordinator: SyncCoordinator,
                        _ endpoint: ReplicationEndpoint) async throws {
        // Below the request timeout, so that a quiet relay's answer is never taken for a dead one.
        let wait = max(0.5, min(Self.relayWait, coordinator.requestTimeout / 2))
        while !Task.isCancelled {
            var pause: TimeInterval = 0
            do {
                let vector = try await endpoint.vector()
                let lines = try await client.waitForChangeSets(after: vector, limit: batchSize, wait: wait, store: endpoint.storeIdentifier)
                if let first = lines.first {
                    // The answer is the pull's first batch: applied without asking the relay again.
                    let results = await coordinator.round(peer: name, push: false, prefetched: lines)
                    if results.contains(where: { $0.error != nil }) {
                        pause = 1
                    } else if let offered = try? ChangeSetEnvelope(line: first),
                              try await endpoint.vector()[offered.origin, default: 0] < offered.sequence {
                        // Still not taken in (held here: another model version, a missing predecessor).
                        pause = pullInterval
                    }
                }
            } catch is CancellationError {
                return
            } catch {
                logger.debug("long poll of relay \(name) failed: \(error)")
                pause = 1
            }
            if pause > 0 { try await Task.sleep(for: .seconds(pause)) }
        }
    }

    /// Uploads a snapshot of the store to `peer` (a relay) every `interval` seconds, the first one
    /// interval after the start: what stores joining through the relay start from (docs/FLEET.md).
    /// A failed upload is logged and tried again at the next interval.
    private func uploadSnapshots(to peer: String, every interval: TimeInterval, _ coordinator: SyncCoordinator,
                                 _ endpoint: ReplicationEndpoint) async throws {
        while !Task.isCancelled {
            try await Task.sleep(for: .seconds(interval))
            guard let client = await coordinator.client(of: peer) else { return }
            do {
                let snapshot = try await endpoint.writeSnapshot()
                defer { try? snapshot.handle.close() }
                try await client.uploadSnapshot(snapshot, of: endpoint.storeIdentifier)
                logger.info("uploaded a snapshot of the store (\(snapshot.size) bytes) to \(peer)")
            } catch is CancellationError {
                return
            } catch {
                logger.warning("could not upload a snapshot of the store to \(peer): \(error); trying again in \(Int(interval)) s")
            }
        }
    }

    /// How long a long poll waits at a relay for new change sets (less when the request timeout is short).
    static let relayWait: TimeInterval = 20

    /// Each commit to the store, as an event for the peers' sessions (``PeerEvent/localCommit``): a
    /// push round with every peer not in backoff (a down peer is retried on its own schedule), after
    /// the round running with it when there is one. The round reads what each peer lacks itself, so
    /// a commit that added no change set (a held one, a purge) costs one read and no request;
    /// nothing else is read first, since every read here is latency on the path of a save.
    private func pushOnCommits(_ commits: AsyncStream<Void>, _ coordinator: SyncCoordinator, _ heartbeat: Heartbeat) async throws {
        let beat: @Sendable (String) -> Void = { _ in heartbeat.beat() }
        for await _ in commits {
            if Task.isCancelled { break }
            _ = await coordinator.handle(.localCommit, progress: beat)
        }
    }
}

/// When the sync loop last showed it is alive.
final class Heartbeat: Sendable {
    /// How long the loop may be silent before the watchdog stops pinging.
    static let limit: Duration = .seconds(120)
    private let last = Atomic<Int64>(Int64(DispatchTime.now().uptimeNanoseconds))

    func beat() { last.store(Int64(DispatchTime.now().uptimeNanoseconds), ordering: .relaxed) }

    var isRecent: Bool {
        let age = Int64(DispatchTime.now().uptimeNanoseconds) - last.load(ordering: .relaxed)
        return age < Self.limit.components.seconds * 1_000_000_000
    }
}
