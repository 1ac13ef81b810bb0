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

    /// The timestamp for a new event: the wall clock if it is ahead of `last`,
    /// else `last` with its counter increased.
    public static func next(after last: HybridTimestamp, now: Date = Date()) -> HybridTimestamp {
        let wall = Int64((now.timeIntervalSince1970 * 1000).rounded(.down)) << 16
        return HybridTimestamp(rawValue: Swift.max(wall, last.rawValue + 1))
    }

    /// The zero timestamp, before every event.
    public static let zero = HybridTimestamp(rawValue: 0)

    public static func < (lhs: HybridTimestamp, rhs: HybridTimestamp) -> Bool { lhs.rawValue < rhs.rawValue }

    public var description: String {
        "\(ISO8601.format(Date(timeIntervalSince1970: Double(milliseconds) / 1000)))+\(counter)"
    }
}
