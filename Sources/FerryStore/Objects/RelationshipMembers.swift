/// The members of one loaded to-many relationship, by registry key, in order, and the committed
/// list for computing what a save adds and removes.
///
/// Every edit costs the same however large the relationship: past 32 members a map gives each
/// member's slot (small relationships are cheaper to scan than to hash); a removal marks its slot
/// empty instead of shifting the list, and the list is compacted once half of it is empty, so
/// taking members out one at a time costs constant amortized time (it was a search and a shift of
/// the whole list each time). An insert at a position and a move shift the list, as they must.
struct RelationshipMembers {
    /// Members in order; ``vacant`` marks the slot of a member taken out since the last compaction.
    private var slots: [Int]
    private var vacantCount = 0
    /// The slot of each member, once the relationship grows past ``mapThreshold``.
    private var slotByKey: [Int: Int]?
    var committed: [Int]

    private static let vacant = Int.min
    private static let mapThreshold = 32

    init(_ keys: [Int], committed: [Int]? = nil) {
        slots = keys
        self.committed = committed ?? keys
        if keys.count > Self.mapThreshold { rebuildMap() }
    }

    /// The members, in order. Filtered out of the slots while some are vacant: read it once, or
    /// ``compact()`` first, where a loop would read it again and again.
    var ordered: [Int] {
        vacantCount == 0 ? slots : slots.filter { $0 != Self.vacant }
    }

    func contains(_ key: Int) -> Bool {
        if let slotByKey { return slotByKey[key] != nil }
        return key != Self.vacant && slots.contains(key)
    }

    /// Adds `key` at `position` of ``ordered`` (at the end when nil or past it); false when it is a member already.
    mutating func insert(_ key: Int, at position: Int? = nil) -> Bool {
        guard !contains(key) else { return false }
        if let position, position >= 0, position < slots.count - vacantCount {
            compact()
            slots.insert(key, at: position)
            if slotByKey != nil { rebuildMap() }
        } else {
            slots.append(key)
            slotByKey?[key] = slots.count - 1
        }
        if slotByKey == nil && slots.count - vacantCount > Self.mapThreshold { rebuildMap() }
        return true
    }

    /// Takes `key` out; false when it is not a member.
    mutating func remove(_ key: Int) -> Bool {
        let found: Int? = if let slotByKey { slotByKey[key] } else if key == Self.vacant { nil } else { slots.lastIndex(of: key) }
        guard let slot = found else { return false }
        slotByKey?[key] = nil
        if slot == slots.count - 1 {
            slots.removeLast()
        } else {
            slots[slot] = Self.vacant
            vacantCount += 1
            if vacantCount > Self.mapThreshold && vacantCount * 2 > slots.count { compact() }
        }
        return true
    }

    /// Moves a member to `position` (clamped), keeping the others in order.
    mutating func move(_ key: Int, to position: Int) {
        compact()
        guard let from = slots.firstIndex(of: key) else { return }
        slots.remove(at: from)
        slots.insert(key, at: min(max(position, 0), slots.count))
        if slotByKey != nil { rebuildMap() }
    }

    /// Drops the vacant slots (the members keep their order).
    mutating func compact() {
        guard vacantCount > 0 else { return }
        slots.removeAll { $0 == Self.vacant }
        vacantCount = 0
        if slotByKey != nil { rebuildMap() }
    }

    private mutating func rebuildMap() {
        var map: [Int: Int] = [:]
        map.reserveCapacity(slots.count - vacantCount)
        for (slot, key) in slots.enumerated() where key != Self.vacant { map[key] = slot }
        slotByKey = map
    }
}
