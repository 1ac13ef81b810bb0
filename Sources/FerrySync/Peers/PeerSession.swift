import Foundation

/// The state of syncing with one peer, as a state machine driven by events
/// with the time passed in (so it is tested step by step without waiting):
///
/// ```
///            start                   finish(error: nil)
///   idle ───────────▶ syncing ─────────────────────────▶ idle
///    ▲                   │
///    │ (time passes)     │ finish(error: e)
///    │                   ▼
///   due ◀──────── backingOff(until: now + backoff)
/// ```
///
/// A backoff that has run out reads as ``Phase/idle`` again. A forced start
/// (`ferry sync-now`) may begin a round during a backoff; nothing starts a
/// second round while one runs.
public struct PeerSession: Sendable, Equatable {
    /// What the session is doing.
    public enum Phase: Sendable, Equatable {
        /// Nothing runs; a round may start.
        case idle
        /// A round runs, started at `since`.
        case syncing(since: Date)
        /// The last round failed; the next automatic round waits until `until`.
        case backingOff(until: Date)

        /// The name `ferry status` shows.
        public var name: String {
            switch self {
            case .idle: "idle"
            case .syncing: "syncing"
            case .backingOff: "backing_off"
            }
        }
    }

    /// Why an event was refused.
    public enum Refusal: Error, Sendable, Equatable {
        /// A round already runs.
        case alreadySyncing
        /// The backoff runs until this time (and the start was not forced).
        case backingOff(until: Date)
        /// `finish` without a running round.
        case notSyncing
    }

    private var current: Phase = .idle
    private var retries: RetrySchedule
    /// When the last round started.
    public private(set) var lastAttempt: Date?
    /// When the last successful round ended.
    public private(set) var lastSuccess: Date?
    /// Why the last round failed; nil after a success.
    public private(set) var lastError: PeerError?

    /// A session that backs off on `retries` after failures.
    public init(retries: RetrySchedule = RetrySchedule()) {
        self.retries = retries
    }

    /// The phase at `now` (a backoff that has run out is idle).
    public func phase(at now: Date) -> Phase {
        if case .backingOff(let until) = current, until <= now { return .idle }
        return current
    }

    /// Failures since the last success.
    public var consecutiveFailures: Int { retries.consecutiveFailures }

    /// When the next automatic round is due after a failure; nil when none failed.
    public var retryAt: Date? { retries.retryAt }

    /// Whether a round may start at `now` (`force`: even during a backoff).
    public func canStart(at now: Date, force: Bool = false) -> Bool {
        switch phase(at: now) {
        case .idle: true
        case .syncing: false
        case .backingOff: force
        }
    }

    /// Event: a round starts at `now`.
    public mutating func start(at now: Date, force: Bool = false) throws(Refusal) {
        switch phase(at: now) {
        case .syncing: throw .alreadySyncing
        case .backingOff(let until) where !force: throw .backingOff(until: until)
        default: break
        }
        current = .syncing(since: now)
        lastAttempt = now
    }

    /// Event: the running round ended at `now`, failed with `error` or not. Returns the backoff
    /// chosen after a failure (nil after a success).
    @discardableResult
    public mutating func finish(error: PeerError?, at now: Date, using random: inout some RandomNumberGenerator) throws(Refusal) -> TimeInterval? {
        guard case .syncing = current else { throw .notSyncing }
        if let error {
            let delay = retries.recordFailure(at: now, using: &random)
            lastError = error
            current = .backingOff(until: now.addingTimeInterval(delay))
            return delay
        }
        retries.recordSuccess()
        lastError = nil
        lastSuccess = now
        current = .idle
        return nil
    }
}
