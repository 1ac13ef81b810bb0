import Foundation

/// A hybrid-logical-clock timestamp: milliseconds since 1970 in the high 48
/// bits and a counter in the low 16, so timestamps order by wall time and
/// still increase when the wall clock stalls or steps back.
///
/// A store ticks its clock for every save (``next(after:now:)``) and takes in
/// every timestamp it replays (``max(_:_:)`` with the remote one), so anything
/// it writes later is ordered after everything it has seen.
public struct HybridTimestamp: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// The packed value (the wire form).
    public let rawValue: Int64

    /// Wraps a packed value.
    public init(rawValue: Int64) { self.rawValue = rawValue }

    /// The wall-clock part, in milliseconds since 1970.
    public var milliseconds: Int64 { rawValue >> 16 }
    /// The logical counter.
    public var counter: Int64 { rawValue & 0xFFFF }

    /// How far ahead of a store's wall clock a received change set's clock may be: five
    /// minutes. A change set further ahead waits (held, with the reason) until the store's
    /// clock catches up, so that no peer can move a store's clock further than this (a
    /// clock pinned at the maximum would stop every later save).
    public static let maximumSkew: TimeInterval = 300

    /// The timestamp of the wall clock at `now` (counter 0), within the representable range.
    public static func wall(_ now: Date) -> HybridTimestamp {
        let milliseconds = (now.timeIntervalSince1970 * 1000).rounded(.down)
        // 47 bits of milliseconds keep the packed value positive (until the year 6429).
        let bounded = Swift.min(Swift.max(milliseconds, 0), Double(Int64.max >> 17))
        return HybridTimestamp(rawValue: Int64(bounded) << 16)
    }

    /// The latest clock a store takes in at `now`: its wall clock plus ``maximumSkew``.
    public static func latestAccepted(at now: Date = Date()) -> HybridTimestamp {
        wall(now.addingTimeInterval(maximumSkew))
    }

    /// The timestamp for a new event: the wall clock if it is ahead of `last`,
    /// else `last` with its counter increased (never past the largest value: a
    /// clock there stays there rather than overflow).
    public static func next(after last: HybridTimestamp, now: Date = Date()) -> HybridTimestamp {
        let (following, overflow) = last.rawValue.addingReportingOverflow(1)
        return HybridTimestamp(rawValue: Swift.max(wall(now).rawValue, overflow ? Int64.max : following))
    }

    /// A store's clock after it takes in `received` at `now`: the later of the two, but
    /// never past ``latestAccepted(at:)`` (replay holds such change sets back; this is the
    /// last line, for every path that takes in a clock).
    public static func taking(in received: HybridTimestamp, after last: HybridTimestamp, now: Date = Date()) -> HybridTimestamp {
        Swift.max(last, Swift.min(received, latestAccepted(at: now)))
    }

    /// The zero timestamp, before every event.
    public static let zero = HybridTimestamp(rawValue: 0)

    public static func < (lhs: HybridTimestamp, rhs: HybridTimestamp) -> Bool { lhs.rawValue < rhs.rawValue }

    /// The wall-clock time of the timestamp (its milliseconds).
    public var date: Date { Date(timeIntervalSince1970: Double(milliseconds) / 1000) }

    public var description: String {
        "\(ISO8601.format(date))+\(counter)"
    }
}
