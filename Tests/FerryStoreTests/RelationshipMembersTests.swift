import Testing
@testable import FerryStore
import FerryTestSupport

/// The to-many member list against a plain array doing the same edits: inserts at a position and
/// at the end, removals (searched, or through the map of slots in long runs, leaving vacant slots
/// until the list is compacted) and moves, across the 32 members past which a set answers membership.
@Suite("To-many member lists")
struct RelationshipMembersTests {
    @Test("Random edits keep the members, their order and membership as a plain array does", arguments: [1, 2, 3, 4, 5])
    func randomEdits(seed: UInt64) {
        var random = SeededGenerator(seed: seed)
        let initial = Array(0..<Int.random(in: 0...80, using: &random))
        var members = RelationshipMembers(initial)
        var expected = initial
        let keys = 0..<240
        for step in 0..<4_000 {
            let key = Int.random(in: keys, using: &random)
            // In each thousand steps, a stretch of removals and appends only: long runs of removals
            // with nothing shifting the list between them, which take members out through the map.
            let removalsAndAppendsOnly = (300..<600).contains(step % 1_000)
            switch Int.random(in: 0..<10, using: &random) {
            case 0..<4:
                let position: Int? = Bool.random(using: &random) || removalsAndAppendsOnly ? nil : Int.random(in: -1...(expected.count + 1), using: &random)
                let inserted = members.insert(key, at: position)
                #expect(inserted == !expected.contains(key), "step \(step)")
                if !expected.contains(key) {
                    if let position, position >= 0, position < expected.count { expected.insert(key, at: position) } else { expected.append(key) }
                }
            case let roll where roll < 9 || removalsAndAppendsOnly:  // (4..<9, and 9 when only removals and appends are made)
                // Removals outnumber inserts, then the other way round.
                let target = step % 1_000 < 600 ? (expected.randomElement(using: &random) ?? key) : key
                let removed = members.remove(target)
                #expect(removed == expected.contains(target), "step \(step)")
                expected.removeAll { $0 == target }
            default:
                let position = Int.random(in: -2...(expected.count + 2), using: &random)
                members.move(key, to: position)
                if let from = expected.firstIndex(of: key) {
                    expected.remove(at: from)
                    expected.insert(key, at: min(max(position, 0), expected.count))
                }
            }
            #expect(members.ordered == expected, "step \(step)")
            if step % 50 == 0 {
                for probe in keys { #expect(members.contains(probe) == expected.contains(probe), "step \(step), key \(probe)") }
            }
        }
        #expect(members.committed == initial, "edits leave the committed list alone")
    }

    @Test("Taking out every member, oldest first, then adding again")
    func emptyAndRefill() {
        var members = RelationshipMembers(Array(0..<1_000))
        for key in 0..<1_000 {
            let removed = members.remove(key)
            #expect(removed)
        }
        #expect(members.ordered.isEmpty && !members.contains(0) && !members.contains(999))
        let absent = members.remove(5)
        #expect(!absent)
        let added = [members.insert(7), members.insert(3, at: 0), members.insert(9, at: 1)]
        #expect(added == [true, true, true])
        #expect(members.ordered == [3, 9, 7])
    }
}
