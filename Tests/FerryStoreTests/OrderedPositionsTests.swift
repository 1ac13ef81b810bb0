import Testing
@testable import FerryStore

/// Position keys of ordered to-many members (docs/SYNC.md, "Ordered relationships").
@Suite("Ordered positions")
struct OrderedPositionsTests {
    static func less(_ a: String, _ b: String) -> Bool { a.utf8.lexicographicallyPrecedes(b.utf8) }

    @Test("A key between two keys sorts strictly between them and is well formed")
    func between() {
        var random = SystemRandomNumberGenerator()
        var keys = [OrderedPositions.key(between: nil, and: nil)]
        for _ in 0..<2_000 {
            let index = Int.random(in: 0...keys.count, using: &random)
            let lower = index > 0 ? keys[index - 1] : nil
            let upper = index < keys.count ? keys[index] : nil
            let key = OrderedPositions.key(between: lower, and: upper)
            #expect(OrderedPositions.isValid(key), "\(key)")
            if let lower { #expect(Self.less(lower, key), "\(lower) < \(key)") }
            if let upper { #expect(Self.less(key, upper), "\(key) < \(upper)") }
            keys.insert(key, at: index)
        }
        #expect(keys == keys.sorted(by: Self.less))
    }

    @Test("Appends and prepends keep keys short")
    func shortKeys() {
        var last: String?
        for _ in 0..<600 { last = OrderedPositions.key(between: last, and: nil) }
        #expect(last?.count == 4, "\(last ?? "")")
        var first: String?
        for _ in 0..<200 { first = OrderedPositions.key(between: nil, and: first) }
        #expect(first?.count == 4 && OrderedPositions.isValid(first ?? ""), "\(first ?? "")")
    }

    @Test("Only moved and new members get keys, and keys rise along the new order")
    func assign() {
        let existing = ["a": "1", "b": "2", "c": "3", "d": "4"]
        // d moves to the front; e is new at the end.
        let order = ["d", "a", "b", "c", "e"]
        let assigned = OrderedPositions.assign(order: order, existing: existing)
        #expect(Set(assigned.keys) == ["d", "e"])
        let keys = order.map { assigned[$0] ?? existing[$0] ?? "" }
        #expect(zip(keys, keys.dropFirst()).allSatisfy { Self.less($0, $1) }, "\(keys)")
        #expect(OrderedPositions.sorted(order.shuffled(), keys: existing.merging(assigned) { _, new in new }) == order)
    }

    @Test("Equal keys from two replicas order by member URI, and a later local order still gets rising keys")
    func ties() {
        let keys = ["x-coredata://B/T/p1": "V", "x-coredata://A/T/p1": "V", "x-coredata://A/T/p2": "k"]
        let sorted = OrderedPositions.sorted(Array(keys.keys), keys: keys)
        #expect(sorted == ["x-coredata://A/T/p1", "x-coredata://B/T/p1", "x-coredata://A/T/p2"])
        let assigned = OrderedPositions.assign(order: sorted, existing: keys)
        let after = sorted.map { assigned[$0] ?? keys[$0] ?? "" }
        #expect(zip(after, after.dropFirst()).allSatisfy { Self.less($0, $1) }, "\(after)")
    }

    @Test("Malformed keys are refused", arguments: ["", "V0", "a-b", String(repeating: "V", count: 257), "é"])
    func invalid(key: String) {
        #expect(!OrderedPositions.isValid(key))
    }
}
