/// A set of property indexes: a bit mask for the first 64 properties, a
/// `Set` beyond. Change tracking touches it on every property write.
struct PropertyIndexSet: Sequence, Equatable {
    private var low: UInt64 = 0
    private var high: Set<Int> = []

    var isEmpty: Bool { low == 0 && high.isEmpty }

    func contains(_ index: Int) -> Bool {
        index < 64 ? low & (1 << UInt64(index)) != 0 : high.contains(index)
    }

    mutating func insert(_ index: Int) {
        if index < 64 { low |= 1 << UInt64(index) } else { high.insert(index) }
    }

    mutating func remove(_ index: Int) {
        if index < 64 { low &= ~(1 << UInt64(index)) } else { high.remove(index) }
    }

    mutating func removeAll() {
        low = 0
        if !high.isEmpty { high.removeAll() }
    }

    func makeIterator() -> IndexingIterator<[Int]> {
        var indexes: [Int] = []
        var bits = low
        while bits != 0 {
            let index = bits.trailingZeroBitCount
            indexes.append(index)
            bits &= bits - 1
        }
        return (indexes + high.sorted()).makeIterator()
    }
}
