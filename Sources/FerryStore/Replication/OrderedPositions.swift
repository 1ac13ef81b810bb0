/// Positions of the members of ordered to-many relationships, as replicas keep them.
///
/// Each member of an ordered relationship carries a **position key**: a string of
/// base-62 digits (`0-9A-Za-z`) compared byte by byte, read as a fraction after
/// the point (`"V"` is a bit under one half). A member moved or added between two
/// others gets a key strictly between theirs, so only the members that moved get
/// new keys. The order every replica shows is the members sorted by
/// (key, member origin URI); a member without a key sorts as the empty key (first).
/// Keys merge per member by last writer wins, like any property (docs/SYNC.md).
package enum OrderedPositions {
    /// The digits of a key, in byte order.
    static let digits: [UInt8] = Array("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz".utf8)
    /// Longest key a change set may carry (keys grow by about one digit per 6 inserts at one spot).
    package static let maximumKeyLength = 256

    /// Whether `key` is a well-formed position key: 1…256 base-62 digits, not ending in `0`
    /// (a trailing zero would make two spellings of one fraction).
    package static func isValid(_ key: String) -> Bool {
        let bytes = Array(key.utf8)
        guard !bytes.isEmpty, bytes.count <= maximumKeyLength, bytes.last != digits[0] else { return false }
        return bytes.allSatisfy { digitValue($0) != nil }
    }

    private static func digitValue(_ byte: UInt8) -> Int? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): Int(byte - UInt8(ascii: "0"))
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): Int(byte - UInt8(ascii: "A")) + 10
        case UInt8(ascii: "a")...UInt8(ascii: "z"): Int(byte - UInt8(ascii: "a")) + 36
        default: nil
        }
    }

    /// The key of the first member of a list: in the middle, with room for millions of
    /// appends and prepends at its length (they count up or down from it).
    static let firstKey = "V001"

    /// A key strictly between `lower` and `upper` (nil: the start or the end of the list);
    /// requires `lower < upper` when both are given. Appends and prepends count up or down
    /// in the last digits, so their keys stay as long as the key they follow; inserts
    /// between two keys take the midpoint, about one digit longer per six inserts at one spot.
    package static func key(between lower: String?, and upper: String?) -> String {
        switch (lower, upper) {
        case (nil, nil):
            return firstKey
        case (let lower?, nil):
            if let next = step(lower, by: 1) { return next }
            return lower + "V"  // every digit was the highest
        case (nil, let upper?):
            if let previous = step(upper, by: -1) { return previous }
            return midpoint(nil, upper)
        case (let lower?, let upper?):
            return midpoint(lower, upper)
        }
    }

    /// `key` counted up or down by one in its last digit (with carry), skipping results that
    /// end in `0`; nil when it runs past the highest or lowest key of its length.
    private static func step(_ key: String, by delta: Int) -> String? {
        var values = Array(key.utf8).map { digitValue($0) ?? 0 }
        repeat {
            var index = values.count - 1
            while index >= 0 {
                let next = values[index] + delta
                if next >= 0 && next < 62 {
                    values[index] = next
                    break
                }
                values[index] = delta > 0 ? 0 : 61
                index -= 1
            }
            if index < 0 { return nil }
        } while values.last == 0
        return String(decoding: values.map { digits[$0] }, as: UTF8.self)
    }

    /// A key strictly between `lower` (nil: zero) and `upper`, by halving the digits where they differ.
    private static func midpoint(_ lower: String?, _ upper: String) -> String {
        let low = (lower.map { Array($0.utf8) } ?? []).map { digitValue($0) ?? 0 }
        let high = Array(upper.utf8).map { digitValue($0) ?? 0 }
        var result: [Int] = []
        var index = 0
        var bounded = true  // whether the upper bound still constrains this digit
        while index <= maximumKeyLength * 2 {
            let lowDigit = index < low.count ? low[index] : 0
            let highDigit = bounded ? (index < high.count ? high[index] : 0) : 62
            if highDigit - lowDigit > 1 {
                result.append(bounded ? (lowDigit + highDigit) / 2 : min(lowDigit + 31, 61))
                break
            }
            result.append(lowDigit)
            if highDigit > lowDigit { bounded = false }  // below the upper bound now: anything above `low` fits
            index += 1
        }
        while result.count > 1, result.last == 0 { result.removeLast() }
        return String(decoding: result.map { digits[$0] }, as: UTF8.self)
    }

    /// Whether member `a` sorts before member `b`: by key (missing = empty), then by origin URI.
    package static func precedes(_ a: (key: String?, uri: String), _ b: (key: String?, uri: String)) -> Bool {
        let keyA = Array((a.key ?? "").utf8), keyB = Array((b.key ?? "").utf8)
        if keyA != keyB { return keyA.lexicographicallyPrecedes(keyB) }
        return a.uri.utf8.lexicographicallyPrecedes(b.uri.utf8)
    }

    /// The members (origin URIs) sorted as every replica shows them, given their keys.
    package static func sorted(_ members: [String], keys: [String: String]) -> [String] {
        members.sorted { precedes((keys[$0], $0), (keys[$1], $1)) }
    }

    /// New keys for a list now in `order`, given the keys its members had: the members that
    /// keep their place (a longest run of keys already rising, in the list's order) keep
    /// their keys; the others get keys between their neighbours'. Returns only new or changed
    /// keys; afterwards the keys rise strictly along `order`.
    package static func assign(order: [String], existing: [String: String]) -> [String: String] {
        let kept = longestRisingRun(order.map { existing[$0] })
        var assigned: [String: String] = [:]
        var previous: String?
        for (index, member) in order.enumerated() {
            if kept.contains(index), let key = existing[member], previous.map({ lessThan($0, key) }) ?? true {
                previous = key
                continue
            }
            // The next kept key above `previous`, if any, bounds the new key.
            var upper: String?
            for next in order.indices.dropFirst(index + 1) where kept.contains(next) {
                if let key = existing[order[next]], previous.map({ lessThan($0, key) }) ?? true { upper = key }
                break
            }
            let key = key(between: previous, and: upper)
            assigned[member] = key
            previous = key
        }
        return assigned
    }

    private static func lessThan(_ a: String, _ b: String) -> Bool { a.utf8.lexicographicallyPrecedes(b.utf8) }

    /// The indexes of a longest strictly rising subsequence of the keys present (O(n log n)).
    private static func longestRisingRun(_ keys: [String?]) -> Set<Int> {
        var tails: [Int] = []  // indexes of the smallest tail of each run length
        var previous = [Int](repeating: -1, count: keys.count)
        for (index, key) in keys.enumerated() {
            guard let key else { continue }
            var low = 0, high = tails.count
            while low < high {
                let middle = (low + high) / 2
                if let tail = keys[tails[middle]], lessThan(tail, key) { low = middle + 1 } else { high = middle }
            }
            if low > 0 { previous[index] = tails[low - 1] }
            if low == tails.count { tails.append(index) } else { tails[low] = index }
        }
        var result = Set<Int>()
        var cursor = tails.last ?? -1
        while cursor >= 0 {
            result.insert(cursor)
            cursor = previous[cursor]
        }
        return result
    }
}
