/// The members of one loaded to-many relationship, by registry key, in order, and the committed
/// list for computing what a save adds and removes.
///
/// Past 32 members a set answers membership (small relationships are cheaper to scan than to
/// hash). A removal searches the list and shifts the rest, as an insert at a position or a move
/// does; but once more than 32 removals in a row have searched a large list, a map of the
/// members' slots is made, and from then on a removal marks its member's slot vacant instead
/// (the list is compacted once half of it is vacant). Anything that shifts the slots (an insert
/// at a position, a move, a compaction) drops the map. So appends and runs of removals cost
/// constant amortized time however large the relationship, and the other edits cost one shift
/// of the list — a map kept up to date there would be rebuilt at every one of them.
struct RelationshipMembers {
    /// Members in order; ``vacant`` marks the slot of a member taken out through the map since the
    /// last compaction (there are none without the map).
    private var slots: [Int]
    private var vacantCount = 0
    /// The members, once there are more than ``threshold``.
    private var index: Set<Int>?
    /// Each member's slot, while no edit has shifted the slots since it was made.
    private var slotByKey: [Int: Int]?
    /// Removals that searched the slots since they last shifted.
    private var searches = 0
    var committed: [Int]

    private static let vacant = Int.min
    private static let threshold = 32

    init(_ keys: [Int], committed: [Int]? = nil) {
        slots = keys
        index = keys.count > Self.threshold ? Set(keys) : nil
        self.committed = committed ?? keys
    }

    /// The members, in order. Filtered out of the slots while some are vacant: read it once, or
    /// ``compact()`` first, where a loop would read it again and again.
    var ordered: [Int] {
        vacantCount == 0 ? slots : slots.filter { $0 != Self.vacant }
    }

    private var count: Int { slots.count - vacantCount }

    func contains(_ key: Int) -> Bool {
        index?.contains(key) ?? (key != Self.vacant && slots.contains(key))
    }

    /// Adds `key` at `position` of ``ordered`` (at the end when nil or past it); false when it is a member already.
    mutating func insert(_ key: Int, at position: Int? = nil) -> Bool {
        guard !contains(key) else { return false }
        if let position, position >= 0, position < count {
            compact()
            slots.insert(key, at: position)
            slotsShifted()
        } else {
            slots.append(key)
            slotByKey?[key] = slots.count - 1
        }
        if index != nil {
            index?.insert(key)
        } else if count > Self.threshold {
            index = Set(ordered)
        }
        return true
    }

    /// Takes `key` out; false when it is not a member.
    mutating func remove(_ key: Int) -> Bool {
        guard contains(key) else { return false }
        index?.remove(key)
        guard let slotByKey else {
            // Searched: shifting the rest costs no more than the search did.
            if let slot = slots.lastIndex(of: key) { slots.remove(at: slot) }
            searches += 1
            if index != nil && searches > Self.threshold { mapSlots() }
            return true
        }
        guard let slot = slotByKey[key] else { return true }
        self.slotByKey?[key] = nil
        if slot == slots.count - 1 {
            slots.removeLast()
        } else {
            slots[slot] = Self.vacant
            vacantCount += 1
            if vacantCount > Self.threshold && vacantCount * 2 > slots.count { compact() }
        }
        return true
    }

    /// Moves a member to `position` (clamped), keeping the others in order.
    mutating func move(_ key: Int, to position: Int) {
        compact()
        guard let from = slots.firstIndex(of: key) else { return }
        slots.remove(at: from)
        slots.insert(key, at: min(max(position, 0), slots.count))
        slotsShifted()
    }

    /// Drops the vacant slots (the members keep their order).
    mutating func compact() {
        guard vacantCount > 0 else { return }
        slots.removeAll { $0 == Self.vacant }
        vacantCount = 0
        slotsShifted()
    }

    /// Maps each member to its slot, for a run of removals.
    private mutating func mapSlots() {
        var map: [Int: Int] = [:]
        map.reserveCapacity(count)
        for (slot, member) in slots.enumerated() where member != Self.vacant { map[member] = slot }
        slotByKey = map
    }

    private mutating func slotsShifted() {
        slotByKey = nil
        searches = 0
    }
}
