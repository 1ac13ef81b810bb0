import Foundation
import Logging
import ServiceLifecycle
import Synchronization
import FerryStore
import FerrySync

/// The daemon's sync loop, as a service: pushes soon after every new local
/// change set (saves by this process, by any other process on the same file,
/// and change sets received from other peers, which are forwarded), pulls from
/// every peer on the interval with jitter, and retries failed peers with backoff.
struct SyncLoop: Service {
    let coordinator: SyncCoordinator
    let endpoint: ReplicationEndpoint
    let pullInterval: TimeInterval
    let notifier: SystemdNotifier
    let logger: Logger
    /// How often the store is checked for new change sets.
    static let pollInterval: Duration = .milliseconds(20)

    func run() async throws {
        let heartbeat = Heartbeat()
        do {
            try await cancelWhenGracefulShutdown {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask { try await loop(heartbeat) }
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

    private func loop(_ heartbeat: Heartbeat) async throws {
        var lastVector: VersionVector?
        var nextPull = Date()  // pull from everyone at start
        let beat: @Sendable (String) -> Void = { _ in heartbeat.beat() }
        while !Task.isCancelled {
            heartbeat.beat()
            do {
                let now = Date()
                if now >= nextPull {
                    _ = await coordinator.round(progress: beat)
                    nextPull = Date().addingTimeInterval(pullInterval * Double.random(in: 0.9...1.1))
                    lastVector = try await endpoint.state().vector
                } else {
                    for peer in await coordinator.failedPeersDue() { _ = await coordinator.round(peer: peer, progress: beat) }
                }
                let vector = try await endpoint.state().vector
                if vector != lastVector {
                    // (The first pass only learns the vector.)
                    if lastVector != nil {
                        // Only peers not in backoff: a down peer is retried on its own schedule.
                        for peer in await coordinator.peersDue() { _ = await coordinator.round(peer: peer, pull: false, progress: beat) }
                    }
                    lastVector = vector
                }
                try await Task.sleep(for: Self.pollInterval)
            } catch is CancellationError {
                throw CancellationError()
            } catch {
                // The store could not be read (busy beyond its timeout, disk trouble): say so and try again;
                // if it lasts, the silent heartbeat lets systemd's watchdog restart the daemon.
                logger.error("sync loop: \(error); retrying in 1 s")
                try await Task.sleep(for: .seconds(1))
            }
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
