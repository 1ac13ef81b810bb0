import Foundation
import FerryModel
import FerryStore

/// Repairs of to-many counts that merged change sets broke (docs/SYNC.md, "Counts"):
/// each change set was valid where it was made, together they put more members in a
/// relationship than its maximum allows. Every replica that sees it removes the newest
/// memberships — by the clock of their membership facts, a membership kept since an insert
/// being oldest, ties broken by member origin URI — and records the removals in a change set
/// of its own, so the outcome does not depend on the order change sets arrived in.
extension MergeExecutor {
    /// Removes the members past the maximum count of every to-many relationship of the merge's objects.
    mutating func trimPastMaximum() throws {
        guard store.model.entities.contains(where: { $0.relationships.contains { $0.isToMany && $0.maxCount > 0 } }) else { return }
        var seen = Set<ObjectIdentifier>()
        for (_, owner) in objects.sorted(by: { $0.key < $1.key }) where !owner.isDeleted {
            guard seen.insert(ObjectIdentifier(owner)).inserted else { continue }  // a merged loser's URI names its survivor
            for relationship in owner.entity.relationships where relationship.isToMany && relationship.maxCount > 0 && !relationship.isTransient {
                try trim(relationship, of: owner, ownerURI: try uri(of: owner))
            }
        }
    }

    private mutating func trim(_ relationship: RelationshipDescription, of owner: ManagedObject, ownerURI: String) throws {
        let set = try owner.mutableSetValue(forKey: relationship.name)
        let members = set.objects.filter { !$0.isDeleted }
        guard members.count > relationship.maxCount else { return }
        let model = store.model
        // Who holds each membership fact, under which clock key, and how removing it is recorded.
        let inverse = model.isRecorded(relationship, in: owner.entity) ? nil : model.inverse(of: relationship)
        func fact(of member: ManagedObject, memberURI: String) -> (holder: ManagedObject, key: String, change: ObjectChange) {
            switch inverse {
            case nil:
                (owner, RecordedChange.membershipKey(relationship.name, memberURI),
                 ObjectChange(kind: .update, uri: ownerURI, entity: owner.entity.name, removed: [relationship.name: [memberURI]]))
            case let inverse? where inverse.isToMany:
                (member, RecordedChange.membershipKey(inverse.name, ownerURI),
                 ObjectChange(kind: .update, uri: memberURI, entity: member.entity.name, removed: [inverse.name: [ownerURI]]))
            case let inverse?:
                (member, inverse.name, ObjectChange(kind: .update, uri: memberURI, entity: member.entity.name, values: [inverse.name: .null]))
            }
        }
        var ranked: [(member: ManagedObject, uri: String, stamp: WriteStamp?)] = []
        for member in members {
            let memberURI = try uri(of: member)
            let held = fact(of: member, memberURI: memberURI)
            ranked.append((member, memberURI, try stamps(of: held.holder)[held.key]))
        }
        ranked.sort { Self.isOlder($0.stamp, $0.uri, than: $1.stamp, $1.uri) }
        for (member, memberURI, _) in ranked.suffix(members.count - relationship.maxCount) {
            try set.remove(member)
            let held = fact(of: member, memberURI: memberURI)
            annotation.repairs.append(RepairChange(objectID: held.holder.objectID, change: held.change, clocked: [held.key]))
        }
    }

    /// Membership order for trimming: no clock first, then by (timestamp, origin), then by member origin URI.
    static func isOlder(_ stamp: WriteStamp?, _ uri: String, than other: WriteStamp?, _ otherURI: String) -> Bool {
        switch (stamp, other) {
        case (nil, .some): return true
        case (.some, nil): return false
        case (let a?, let b?) where a != b:
            return a < b
        default:
            return uri.utf8.lexicographicallyPrecedes(otherURI.utf8)
        }
    }
}

/// Former members a to-many's minimum count brings back (see ``MergeExecutor/membersToBringBack(for:)``).
struct MinimumRepair: Equatable {
    /// Deletes of this change set to refuse (the object stays, and a restore of it is recorded).
    var refuse: Set<String> = []
    /// Objects deleted here before, to bring back from their tombstones (and record a restore of).
    var revive: Set<String> = []

    var isEmpty: Bool { refuse.isEmpty && revive.isEmpty }
}

extension MergeExecutor {
    /// For to-many relationships the merge left below their minimum (`failures` from validating it):
    /// the newest-deleted former members that bring each back to its minimum — deleted by this change
    /// set, or earlier here (their tombstones still name the owner) — by the clock of their delete, ties
    /// broken by origin URI. Every replica that sees the count short weighs the same deletes, so they
    /// bring back the same members; a store that saw fewer deletes may bring back one more, which
    /// converges too (restores are change sets). A member of a to-many whose inverse is a to-one names
    /// the owner in its last values; a member of a many-to-many, in its memberships (a delete carries
    /// them, and its tombstone keeps them, where the inverse has a minimum). One-way to-many relationships
    /// are not repaired: their members keep no trace of them.
    func membersToBringBack(for failures: [ValidationError]) throws -> MinimumRepair {
        var repair = MinimumRepair()
        let model = store.model
        let incoming = changeSet.stamp
        for failure in failures where failure.code == .relationshipLacksMinimumCount {
            guard let key = failure.key,
                  let owner = objects.values.first(where: { $0.objectID.uriString == failure.objectURI }), !owner.isDeleted,
                  let relationship = owner.entity.relationship(named: key), relationship.isToMany,
                  let inverse = model.inverse(of: relationship) else { continue }
            let present = try owner.mutableSetValue(forKey: key).objects.count { !$0.isDeleted }
            let needed = max(relationship.minCount, relationship.isOptional ? 0 : 1) - present
            guard needed > 0 else { continue }
            let ownerURI = try uri(of: owner)
            /// Whether a deleted object's last values or memberships say it was a member.
            func wasMember(values: [String: ChangeValue], memberships: [String: [String]]) -> Bool {
                inverse.isToMany ? memberships[inverse.name]?.contains(ownerURI) == true : values[inverse.name] == .object(ownerURI)
            }
            var candidates: [(uri: String, stamp: WriteStamp, isThisChangeSets: Bool)] = []
            for change in changeSet.changes where change.kind == .delete && wasMember(values: change.values, memberships: change.added) {
                guard objects[change.uri]?.isDeleted == true else { continue }
                candidates.append((change.uri, incoming, true))
            }
            for (uri, tombstone) in try store.tombstones(referringTo: ownerURI)
            where wasMember(values: tombstone.values, memberships: tombstone.memberships) {
                guard model.entity(named: tombstone.entity)?.isKind(of: relationship.destinationEntityName) == true else { continue }
                candidates.append((uri, WriteStamp(timestamp: tombstone.timestamp, origin: tombstone.origin), false))
            }
            candidates.sort { Self.isOlder($1.stamp, $1.uri, than: $0.stamp, $0.uri) }
            for candidate in candidates.prefix(needed) {
                if candidate.isThisChangeSets { repair.refuse.insert(candidate.uri) } else { repair.revive.insert(candidate.uri) }
            }
        }
        return repair
    }
}
