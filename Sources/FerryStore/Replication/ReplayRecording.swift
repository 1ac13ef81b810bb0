import Foundation
import FerryModel

/// One object's change as a store records it in a change set, with the
/// properties whose clocks the change sets.
package struct RecordedChange {
    package var id: ObjectID
    /// The change; for a store that writes an insert's values apart (see ``insertValues``), without them.
    package var change: ObjectChange
    /// The properties (membership facts, existence) whose clocks the change sets.
    package var clocked: [String]
    /// An insert's values, sorted by name, without nils, when kept apart from ``change``.
    package var insertValues: [(String, ChangeValue)]

    package init(id: ObjectID, change: ObjectChange, clocked: [String], insertValues: [(String, ChangeValue)] = []) {
        self.id = id
        self.change = change
        self.clocked = clocked
        self.insertValues = insertValues
    }

    /// A restore of an object with all its values and its join-table memberships (`members`, by
    /// relationship, both sides of a many-to-many): an object kept, or brought back, for a Deny rule.
    package static func restore(of id: ObjectID, uri: String, values: [String: ChangeValue], members: [String: [String]] = [:]) -> RecordedChange {
        RecordedChange(id: id, change: ObjectChange(kind: .restore, uri: uri, entity: id.entityName, values: values, added: members),
                       clocked: Array(values.keys) + [ReplayAnnotation.existenceKey])
    }

    /// The clock key of one membership fact: relationship name, a space, member URI.
    package static func membershipKey(_ relationship: String, _ member: String) -> String { relationship + " " + member }

    /// The clock key of one member's position in an ordered relationship: relationship name, `@ `, member URI.
    package static func positionKey(_ relationship: String, _ member: String) -> String { relationship + "@ " + member }
}

/// What one save changed in the to-many relationships of one object, as recorded:
/// members added and removed (relationships kept on this side) and new positions of
/// members of ordered relationships.
package struct RecordedMembership {
    package var added: [String: [String]] = [:]
    package var removed: [String: [String]] = [:]
    package var positions: [String: [String: String]] = [:]

    /// The clock keys of its facts: memberships added and removed, and positions.
    package var clockKeys: [String] {
        added.merging(removed, uniquingKeysWith: +).flatMap { relationship, uris in uris.map { RecordedChange.membershipKey(relationship, $0) } }
            + positions.flatMap { relationship, keys in keys.keys.map { RecordedChange.positionKey(relationship, $0) } }
    }

    /// The to-many facts of a save, by object (permanent IDs). When it `assignsPositions` (a local
    /// save), each ordered relationship the save changed gets position keys for the members that
    /// moved or arrived (``OrderedPositions/assign(order:existing:)``), given the keys the store has
    /// (`positionsOf`); a replaying save does not, as its positions are the replayed change set's.
    package static func collect(_ request: SaveRequest, model: ManagedObjectModel, resolve: (ObjectID?) -> ObjectID?,
                                uri: (ObjectID) throws -> String, assignsPositions: Bool,
                                positionsOf: (ObjectID, String) throws -> [String: String]) rethrows -> [ObjectID: RecordedMembership] {
        var result: [ObjectID: RecordedMembership] = [:]
        for change in request.toManyChanges {
            guard let source = resolve(change.source) else { continue }
            let added = try change.added.compactMap(resolve).map(uri)
            let removed = try change.removed.compactMap(resolve).map(uri)
            if !added.isEmpty { result[source, default: RecordedMembership()].added[change.relationship, default: []] += added }
            if !removed.isEmpty { result[source, default: RecordedMembership()].removed[change.relationship, default: []] += removed }
            guard assignsPositions, let ordered = change.orderedMembers,
                  let relationship = model.entity(named: source.entityName)?.relationship(named: change.relationship),
                  relationship.isOrdered, !relationship.isTransient else { continue }
            let order = try ordered.compactMap(resolve).map(uri)
            let assigned = OrderedPositions.assign(order: order, existing: try positionsOf(source, change.relationship))
            if !assigned.isEmpty { result[source, default: RecordedMembership()].positions[change.relationship] = assigned }
        }
        return result
    }
}

extension ReplayAnnotation {
    /// What the change set's record keeps when it left the store invalid (nil otherwise).
    package var leftInvalidNote: String? {
        leftInvalid.isEmpty ? nil : "applied; the store is left breaking: " + leftInvalid.map(\.description).joined(separator: "; ")
    }
}

/// How a replaying save is recorded, whatever the store: the same split for
/// every store, so that two stores that replay the same change set record the
/// same things. A replaying save's changes are those of the replayed change set
/// (recorded as received, under its origin) and whatever else the save did here
/// (delete rules against the local graph, Deny restores), which becomes a new
/// change set of this store.
package struct ReplayRecording {
    /// The properties the replayed change set wrote, by local object: stamped with its clock.
    package var replayedWrites: [ObjectID: Set<String>] = [:]
    /// The replayed change set's own deletes: tombstoned with its clock, their clocks forgotten.
    package var replayedDeletes: [RecordedChange] = []
    /// What the save did beyond the replayed change set: a new change set of this store
    /// (with the annotation's repair deletes and a restore of each ``restored`` object).
    package var derived: [RecordedChange] = []
    /// Objects kept or brought back for a Deny rule, recorded as restores with all their values.
    package var restored: [ObjectID] = []
    /// Clocks the merges give survivors' properties (the loser's, where its value won).
    package var mergeStamps: [ObjectID: [String: WriteStamp]] = [:]

    /// Splits `changes` (the save's recorded changes, without the plain inserts the replayed
    /// change set's own text records) by what `replay` says the replayed change set did.
    /// `resolve` turns the annotation's temporary IDs into the save's permanent ones;
    /// `plainInserts` and `resurrected` are the save's inserts of objects named by the change set.
    package init(_ changes: [RecordedChange], replay: ReplayAnnotation, resolve: (ObjectID?) -> ObjectID?,
                 plainInserts: Set<ObjectID>, resurrected: Set<ObjectID>) {
        for (id, properties) in replay.writes {
            if let resolved = resolve(id), !plainInserts.contains(resolved) { replayedWrites[resolved, default: []].formUnion(properties) }
        }
        let remoteDeletes = Set(replay.deletes.compactMap(resolve))
        let restoredIDs = Set(replay.restored.compactMap(resolve))
        restored = restoredIDs.sorted { $0.uriString < $1.uriString }
        // Merged duplicates: the loser's row goes without a delete of its own; what the merge
        // changed is the merge's, and a merge this store found is recorded as one.
        let losers = Set(replay.merges.map(\.loser))
        var mergeTouched: [ObjectID: Set<String>] = [:]
        for (id, properties) in replay.mergeTouched { if let resolved = resolve(id) { mergeTouched[resolved, default: []].formUnion(properties) } }
        for (id, stamps) in replay.mergeStamps { if let resolved = resolve(id) { mergeStamps[resolved, default: [:]].merge(stamps) { _, new in new } } }
        // What the change set itself said each property becomes: a written property that ends
        // otherwise here (a No Action delete in the same change set cleared it) is this store's doing.
        var said: [String: [String: ChangeValue]] = [:]
        for change in replay.changeSet.changes where change.kind != .delete {
            said[change.uri, default: [:]].merge(change.values) { _, new in new }
        }
        for entry in changes {
            if restoredIDs.contains(entry.id) || losers.contains(entry.id) { continue }
            switch entry.change.kind {
            case .insert, .restore:
                if !plainInserts.contains(entry.id) && !resurrected.contains(entry.id) { derived.append(entry) }
            case .delete:
                if remoteDeletes.contains(entry.id) { replayedDeletes.append(entry) } else { derived.append(entry) }
            case .update:
                // What the replayed change set (or a merge) wrote is its own; the rest (delete rules here) is derived.
                let written = (replayedWrites[entry.id] ?? []).union(mergeTouched[entry.id] ?? [])
                var rest = entry.change
                rest.values = rest.values.filter { name, value in
                    !written.contains(name) || (said[entry.change.uri]?[name]).map { $0 != value } == true
                }
                rest.added = Self.members(rest.added, notIn: written)
                rest.removed = Self.members(rest.removed, notIn: written)
                var positions: [String: [String: String]] = [:]
                for (relationship, keys) in rest.positions {
                    let kept = keys.filter { !written.contains(RecordedChange.positionKey(relationship, $0.key)) }
                    if !kept.isEmpty { positions[relationship] = kept }
                }
                rest.positions = positions
                if !rest.values.isEmpty || !rest.added.isEmpty || !rest.removed.isEmpty || !rest.positions.isEmpty {
                    derived.append(RecordedChange(id: entry.id, change: rest,
                                                  clocked: entry.clocked.filter { !written.contains($0) || rest.values[$0] != nil }))
                }
            case .merge:
                derived.append(entry)
            }
        }
        derived += Self.derivedMerges(replay.merges)
        // Repairs are recorded as made, joined to what the rows already show of them.
        for repair in replay.repairs {
            guard let id = resolve(repair.objectID) else { continue }
            if let index = derived.firstIndex(where: { $0.id == id && $0.change.kind == .update }) {
                derived[index].change.values.merge(repair.change.values) { _, new in new }
                for (relationship, members) in repair.change.removed {
                    let known = derived[index].change.removed[relationship] ?? []
                    derived[index].change.removed[relationship] = known + members.filter { !known.contains($0) }
                    let added = (derived[index].change.added[relationship] ?? []).filter { !members.contains($0) }
                    derived[index].change.added[relationship] = added.isEmpty ? nil : added
                }
                derived[index].clocked += repair.clocked.filter { !derived[index].clocked.contains($0) }
            } else {
                derived.append(RecordedChange(id: id, change: repair.change, clocked: repair.clocked))
            }
        }
    }

    /// The merges this store found, as changes of its own change set.
    private static func derivedMerges(_ merges: [MergedDuplicate]) -> [RecordedChange] {
        merges.filter { !$0.isReplayed }.map { merge in
            RecordedChange(id: merge.loser, change: ObjectChange(kind: .merge, uri: merge.loserURI, entity: merge.loser.entityName,
                                                                  mergedInto: merge.survivorURI), clocked: [])
        }
    }

    private static func members(_ members: [String: [String]], notIn written: Set<String>) -> [String: [String]] {
        var result: [String: [String]] = [:]
        for (relationship, uris) in members {
            let rest = uris.filter { !written.contains(RecordedChange.membershipKey(relationship, $0)) }
            if !rest.isEmpty { result[relationship] = rest }
        }
        return result
    }
}
