import Foundation

/// The time a sync schedule reads and waits on: the wall clock in a daemon, a
/// clock a test moves by hand (`ManualClock` in FerryTesting), so that
/// pull intervals and backoffs are tested without waiting.
public protocol PeerClock: Sendable {
    /// The current time.
    func now() -> Date
    /// Returns at `deadline` (at once if it has passed); throws `CancellationError` when the task is cancelled.
    func sleep(until deadline: Date) async throws
}

/// The wall clock.
public struct SystemPeerClock: PeerClock {
    public init() {}

    public func now() -> Date { Date() }

    public func sleep(until deadline: Date) async throws {
        let seconds = deadline.timeIntervalSinceNow
        guard seconds > 0 else { return }
        try await Task.sleep(for: .milliseconds(Int64((seconds * 1000).rounded(.up))))
    }
}
