import Foundation
import Logging
import ServiceLifecycle
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
        do {
            try await cancelWhenGracefulShutdown {
                try await loop()
            }
        } catch is CancellationError {
            // Shutdown: a round cut off here resumes on the next start.
        }
        notifier.stopping()
    }

    private func loop() async throws {
        var lastVector = try await endpoint.state().vector
        var nextPull = Date()  // pull from everyone at start
        var lastWatchdog = ContinuousClock.now
        while !Task.isCancelled {
            let now = Date()
            if now >= nextPull {
                _ = await coordinator.round()
                nextPull = Date().addingTimeInterval(pullInterval * Double.random(in: 0.9...1.1))
                lastVector = try await endpoint.state().vector
            } else {
                for peer in await coordinator.failedPeersDue() { _ = await coordinator.round(peer: peer) }
            }
            let vector = try await endpoint.state().vector
            if vector != lastVector {
                lastVector = vector
                // Only peers not in backoff: a down peer is retried on its own schedule.
                for peer in await coordinator.peersDue() { _ = await coordinator.round(peer: peer, pull: false) }
            }
            if let interval = notifier.watchdogInterval, ContinuousClock.now - lastWatchdog >= interval {
                notifier.watchdog()
                lastWatchdog = .now
            }
            try await Task.sleep(for: Self.pollInterval)
        }
    }
}
