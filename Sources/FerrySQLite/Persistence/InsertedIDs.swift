import Foundation
import FerryStore

/// The permanent ID a save gave each object it inserts, found from the object's temporary ID (a
/// reference between two new objects of the save names the other by its temporary ID).
///
/// The inserts of a replayed change set (``PersistentContainer/directInsertDraft(for:annotation:)``)
/// carry one namespace's consecutive counters in their order, as do a context's when it registered no
/// other object between its inserts: the ID is then found by its position, with no map. A map from every temporary ID to its permanent
/// one cost some 250 bytes per object (two IDs per entry, at the dictionary's load factor): 25 MB
/// of the 159 MB of heap a replay of 100,000 new objects held at its peak (docs/PERFORMANCE.md).
struct InsertedIDs: Sendable {
    /// The permanent IDs, in the request's insert order.
    let permanentIDs: [ObjectID]
    /// The request's inserts (shared with it, not copied): what a position is checked against.
    private let inserts: [SaveRequest.Insert]
    /// When the inserts' temporary IDs are one namespace's counters from `first` on, in order.
    private let run: (namespace: UUID, first: Int)?
    /// Otherwise: each temporary ID's permanent one.
    private let map: [ObjectID: ObjectID]

    /// The IDs of `inserts`, whose permanent IDs are `permanentIDs` (in the same order).
    init(_ inserts: [SaveRequest.Insert], permanentIDs: [ObjectID]) {
        self.permanentIDs = permanentIDs
        self.inserts = inserts
        if let run = Self.consecutiveRun(inserts) {
            self.run = run
            map = [:]
        } else {
            run = nil
            var map: [ObjectID: ObjectID] = [:]
            map.reserveCapacity(permanentIDs.count)
            // (By index: a `for … in` over the inserts copies each one, retaining its IDs and arrays.)
            for index in permanentIDs.indices where index < inserts.count { map[inserts[index].objectID] = permanentIDs[index] }
            self.map = map
        }
    }

    /// The permanent ID of the new object `temporary` names; nil when no insert of the save has that ID.
    subscript(temporary: ObjectID) -> ObjectID? {
        guard let run else { return map[temporary] }
        guard let parts = temporary.temporaryCounter, parts.namespace == run.namespace else { return nil }
        let position = parts.counter - run.first
        guard position >= 0, position < permanentIDs.count, inserts[position].objectID == temporary else { return nil }
        return permanentIDs[position]
    }

    /// `id` itself when permanent, else the permanent ID of the new object it names; nil for nil.
    func resolve(_ id: ObjectID?) -> ObjectID? {
        guard let id else { return nil }
        return id.isTemporaryID ? self[id] : id
    }

    /// The namespace and first counter when every insert's ID is that namespace's next counter.
    private static func consecutiveRun(_ inserts: [SaveRequest.Insert]) -> (namespace: UUID, first: Int)? {
        guard let first = inserts.first?.objectID.temporaryCounter else { return nil }
        for index in inserts.indices {
            guard let parts = inserts[index].objectID.temporaryCounter, parts.namespace == first.namespace,
                  parts.counter == first.counter + index else { return nil }
        }
        return (first.namespace, first.counter)
    }
}
