import Foundation

/// When to try a failing peer again: exponential backoff with jitter. After
/// the n-th failure in a row the next attempt waits `base × 2^(n-1)`, at most
/// `maximum`, times a random factor from `jitter` (so peers that failed
/// together do not all come back at once). A success resets it.
///
/// A value type with the time passed in, so it is tested without waiting.
public struct RetrySchedule: Sendable, Equatable {
    /// The first delay, in seconds.
    public var base: TimeInterval
    /// The longest delay before jitter, in seconds.
    public var maximum: TimeInterval
    /// The random factor applied to each delay.
    public var jitter: ClosedRange<Double>
    /// Failures since the last success.
    public private(set) var consecutiveFailures = 0
    /// When the next attempt is due; nil when the last attempt succeeded.
    public private(set) var retryAt: Date?

    /// A schedule (by default 1 s, 2 s, 4 s … up to 60 s, each ×0.5–1.5).
    public init(base: TimeInterval = 1, maximum: TimeInterval = 60, jitter: ClosedRange<Double> = 0.5...1.5) {
        self.base = base
        self.maximum = maximum
        self.jitter = jitter
    }

    /// Records a failure at `now`; returns the delay chosen.
    @discardableResult
    public mutating func recordFailure(at now: Date, using random: inout some RandomNumberGenerator) -> TimeInterval {
        consecutiveFailures += 1
        let exponent = Double(min(consecutiveFailures - 1, 30))
        let delay = min(maximum, base * pow(2, exponent)) * Double.random(in: jitter, using: &random)
        retryAt = now.addingTimeInterval(delay)
        return delay
    }

    /// Records a success: no more waiting.
    public mutating func recordSuccess() {
        consecutiveFailures = 0
        retryAt = nil
    }

    /// Whether an attempt may be made at `now`.
    public func isDue(at now: Date) -> Bool {
        (retryAt ?? .distantPast) <= now
    }
}
