import Foundation
import FerryStore

/// What a store's version vector will be once it has taken in a batch of
/// change-set lines, read from the lines without decoding them.
///
/// A pull asks for the next batch while it applies this one, and the request
/// needs the vector the store will have then. The forecast is only a guess —
/// a line may wait for a predecessor, or a peer may send keys out of order — so
/// the caller compares it with the vector the store reports after applying,
/// and asks again when they differ.
enum VectorForecast {
    /// `vector` raised by the origin and sequence number of every line (nil when a line does not show them).
    static func vector(_ vector: VersionVector, takingIn lines: [String]) -> VersionVector? {
        var result = vector
        for line in lines {
            guard let (origin, sequence) = originAndSequence(of: line) else { return nil }
            result[origin] = max(result[origin, default: 0], sequence)
        }
        return result
    }

    private static let originKey = Array(#""origin":""#.utf8)
    private static let sequenceKey = Array(#""seq":"#.utf8)

    /// The top-level `origin` and `seq` of a canonical line: its keys are sorted, so both come after
    /// `changes` and are the last occurrences of those keys in the line.
    static func originAndSequence(of line: String) -> (UUID, Int64)? {
        var text = line
        return text.withUTF8 { bytes -> (UUID, Int64)? in
            guard let origin = lastEnd(of: originKey, in: bytes), origin + 36 <= bytes.count,
                  let uuid = ObjectURIComponents.uuid(String(decoding: UnsafeBufferPointer(rebasing: bytes[origin..<(origin + 36)]), as: UTF8.self)),
                  var position = lastEnd(of: sequenceKey, in: bytes) else { return nil }
            var sequence: Int64 = 0
            var digits = 0
            while position < bytes.count, bytes[position] >= UInt8(ascii: "0"), bytes[position] <= UInt8(ascii: "9"), digits < 18 {
                sequence = sequence * 10 + Int64(bytes[position] - UInt8(ascii: "0"))
                position += 1
                digits += 1
            }
            return digits > 0 ? (uuid, sequence) : nil
        }
    }

    /// The position just after the last occurrence of `key` in `bytes`.
    private static func lastEnd(of key: [UInt8], in bytes: UnsafeBufferPointer<UInt8>) -> Int? {
        var start = bytes.count - key.count
        while start >= 0 {
            if bytes[start] == key[0], bytes[start..<(start + key.count)].elementsEqual(key) { return start + key.count }
            start -= 1
        }
        return nil
    }
}
