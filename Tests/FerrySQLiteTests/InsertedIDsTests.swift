import Foundation
import Testing
@testable import FerryStore
@testable import FerrySQLite

/// How a save finds the permanent ID of a new object from its temporary ID (``InsertedIDs``):
/// by position when the inserts carry one context's consecutive counters, by a map otherwise.
@Suite("A save's new objects, found by their temporary IDs")
struct InsertedIDsTests {
    let namespace = UUID()
    let store = UUID()

    func insert(_ entity: String, _ counter: Int, namespace: UUID? = nil) -> SaveRequest.Insert {
        SaveRequest.Insert(objectID: .temporary(entityName: entity, namespace: namespace ?? self.namespace, counter: counter),
                           attributes: [], toOne: [])
    }

    func permanent(_ entity: String, _ key: Int64) -> ObjectID {
        .permanent(entityName: entity, store: store, primaryKey: key)
    }

    @Test("Consecutive counters, any first: IDs find their rows; none for other entity's same counter, neighbours, other context's, nil; permanent ID: itself")
    func consecutiveCounters() {
        let entities = ["Person", "Boss", "Person", "Person", "Boss"]
        let inserts = entities.indices.map { insert(entities[$0], 40 + $0) }
        let rows = entities.indices.map { permanent(entities[$0], Int64(100 + $0)) }
        let ids = InsertedIDs(inserts, permanentIDs: rows)
        for index in inserts.indices {
            #expect(ids[inserts[index].objectID] == rows[index])
            #expect(ids.resolve(inserts[index].objectID) == rows[index])
        }
        #expect(ids[.temporary(entityName: "Boss", namespace: namespace, counter: 40)] == nil)  // counter 40 is a Person
        #expect(ids[.temporary(entityName: "Person", namespace: namespace, counter: 39)] == nil)
        #expect(ids[.temporary(entityName: "Boss", namespace: namespace, counter: 45)] == nil)
        #expect(ids[.temporary(entityName: "Person", namespace: UUID(), counter: 40)] == nil)
        #expect(ids.resolve(nil) == nil)
        let existing = permanent("Person", 7)
        #expect(ids.resolve(existing) == existing)
    }

    @Test("Counters with a gap, out of order or from two contexts: every ID still finds its own row, and no other")
    func otherCounters() {
        let cases: [[SaveRequest.Insert]] = [
            [insert("Person", 0), insert("Person", 2), insert("Person", 3)],  // a gap (an object deleted before the save)
            [insert("Person", 3), insert("Person", 2), insert("Person", 1)],  // out of order
            [insert("Person", 0), insert("Person", 1, namespace: UUID()), insert("Person", 2)],  // two contexts
        ]
        for inserts in cases {
            let rows = inserts.indices.map { permanent("Person", Int64(200 + $0)) }
            let ids = InsertedIDs(inserts, permanentIDs: rows)
            for index in inserts.indices { #expect(ids[inserts[index].objectID] == rows[index]) }
            #expect(ids[.temporary(entityName: "Person", namespace: namespace, counter: 9)] == nil)
        }
    }

    @Test("A save with no inserts finds nothing")
    func noInserts() {
        let ids = InsertedIDs([], permanentIDs: [])
        #expect(ids[.temporary(entityName: "Person", namespace: namespace, counter: 0)] == nil)
    }
}
