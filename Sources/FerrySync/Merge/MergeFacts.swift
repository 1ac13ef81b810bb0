import Foundation
import FerryModel
import FerryStore

/// What a store knows of the objects one change set names: which exist here (with
/// the clocks of their last writes), which were deleted here (with their tombstones),
/// and which it never had. A plain value: ``MergePlanner`` decides from it alone, so
/// a merge rule can be tested with facts written by hand.
struct MergeFacts: Equatable {
    /// One object, as this store knows it.
    enum Known: Equatable {
        /// It exists here; `stamps` holds the last write of each property the change set
        /// writes that was written after the insert (a property never written since takes any write).
        case live(stamps: [String: WriteStamp])
        /// It was deleted here (nil when its tombstone keeps no values).
        case buried(Tombstone?)
    }

    /// By origin URI; a URI missing here names an object this store never had.
    var objects: [String: Known] = [:]
    /// Live objects that were restored after a delete, with the change sets that restored them.
    var restores: [String: Set<ChangeSetMark>] = [:]
    /// One member of a to-many and the last write of its membership fact (nil: a member since the insert).
    struct MemberFact: Equatable {
        var member: String
        var stamp: WriteStamp?
    }
    /// For a to-one write of an earlier version to a relationship now to-many (which replaces its
    /// members): the object's current members and their facts, by object URI and relationship.
    var members: [String: [String: [MemberFact]]] = [:]

    /// Whether `uri` names an object deleted here.
    func isBuried(_ uri: String) -> Bool {
        if case .buried? = objects[uri] { return true }
        return false
    }

    /// Whether `uri` names an object that exists here.
    func isLive(_ uri: String) -> Bool {
        if case .live? = objects[uri] { return true }
        return false
    }

    /// The tombstone of an object deleted here.
    func tombstone(of uri: String) -> Tombstone? {
        if case .buried(let tombstone)? = objects[uri] { return tombstone }
        return nil
    }

    /// The last write of `property` of a live object after its insert.
    func stamp(of uri: String, property: String) -> WriteStamp? {
        if case .live(let stamps)? = objects[uri] { return stamps[property] }
        return nil
    }
}

extension MergeFacts {
    /// Every URI `changeSet` names: its objects, the objects its values point at, and its members.
    static func uris(in changes: [ObjectChange]) -> Set<String> {
        var uris = Set<String>()
        for change in changes {
            uris.insert(change.uri)
            if let survivor = change.mergedInto { uris.insert(survivor) }
            for value in change.values.values { if case .object(let uri) = value { uris.insert(uri) } }
            for members in change.added.values { uris.formUnion(members) }
            for members in change.removed.values { uris.formUnion(members) }
        }
        return uris
    }

    /// The properties whose last writes decide `change` against a live object. For a relationship
    /// an earlier version had as to-one (`replaced`), its own name too: the clock of the last
    /// to-one write, older membership facts than which are void.
    static func decidingProperties(of change: ObjectChange, replaced: Set<String> = []) -> Set<String> {
        var properties = Set(change.values.keys)
        if !replaced.isEmpty {
            for relationship in Set(change.added.keys).union(change.removed.keys) where replaced.contains(change.entity + "." + relationship) {
                properties.insert(relationship)
            }
        }
        // (A delete's memberships are its tombstone's, not writes.)
        for (relationship, members) in change.added where change.kind != .delete {
            for member in members { properties.insert(relationship + " " + member) }
        }
        for (relationship, members) in change.removed { for member in members { properties.insert(relationship + " " + member) } }
        for (relationship, keys) in change.positions { for member in keys.keys { properties.insert(RecordedChange.positionKey(relationship, member)) } }
        if change.kind == .delete || change.kind == .restore { properties.insert(ReplayAnnotation.existenceKey) }
        return properties
    }

    /// Reads the facts for `changeSet` (and the objects `extra` names) from `store`, and the local ID of each live object.
    /// `exists` says whether a row still exists for an ID (the context that will merge
    /// registers the rows as it answers, so they are read once). Tombstones are followed:
    /// the objects a tombstone's values point at are looked up too, since a Deny rule may
    /// bring the tombstone's object back with those values.
    static func gather(for changeSet: ChangeSet, also extra: Set<String> = [], replaced: Set<String> = [],
                       from store: any PersistentStore & ReplicaObjects & Graveyard & MergeClocks,
                       exists: ([ObjectID]) throws -> Set<ObjectID>) throws -> (facts: MergeFacts, localIDs: [String: ObjectID]) {
        var facts = MergeFacts()
        var localIDs: [String: ObjectID] = [:]
        var pending = uris(in: changeSet.changes).union(extra)
        var seen = Set<String>()
        while !pending.isEmpty {
            let batch = Array(pending)
            seen.formUnion(pending)
            pending = []
            let found = try store.lookUpForReplay(originURIs: batch)
            var candidates: [String: ObjectID] = [:]
            for uri in batch {
                if found.buried.contains(uri) {
                    let tombstone = try store.tombstone(of: uri)
                    facts.objects[uri] = .buried(tombstone)
                    for value in (tombstone?.values ?? [:]).values {
                        if case .object(let target) = value, !seen.contains(target) { pending.insert(target) }
                    }
                } else if let id = found.mapped[uri] ?? found.own[uri] {
                    candidates[uri] = id
                }
            }
            let existing = try exists(Array(candidates.values))
            for (uri, id) in candidates where existing.contains(id) {
                facts.objects[uri] = .live(stamps: [:])
                localIDs[uri] = id
            }
        }
        facts.restores = try store.restores(of: Array(localIDs.keys))
        // The clocks that decide each change against a live object.
        var wanted: [String: Set<String>] = [:]
        for change in changeSet.changes where localIDs[change.uri] != nil {
            wanted[change.uri, default: []].formUnion(decidingProperties(of: change, replaced: replaced))
            // A to-one write of an earlier version to a relationship now to-many: the members it replaces,
            // and the fact of the member it names (a later fact of that member must not be overwritten).
            for (name, value) in change.values where replaced.contains(change.entity + "." + name) {
                if case .object(let target) = value { wanted[change.uri, default: []].insert(RecordedChange.membershipKey(name, target)) }
                guard let id = localIDs[change.uri], facts.members[change.uri]?[name] == nil else { continue }
                var members: [MemberFact] = []
                for member in try store.relatedObjectIDs(of: id, relationship: name) {
                    let uri = try store.originURI(of: member)
                    members.append(MemberFact(member: uri, stamp: try store.lastWrite(of: id, property: RecordedChange.membershipKey(name, uri))))
                    // (The plan may remove it: the executor must know it.)
                    if localIDs[uri] == nil, facts.objects[uri] == nil {
                        localIDs[uri] = member
                        facts.objects[uri] = .live(stamps: [:])
                    }
                }
                facts.members[change.uri, default: [:]][name] = members.sorted { $0.member < $1.member }
            }
        }
        for (uri, properties) in wanted {
            guard let id = localIDs[uri] else { continue }
            var stamps: [String: WriteStamp] = [:]
            for property in properties {
                if let stamp = try store.lastWrite(of: id, property: property) { stamps[property] = stamp }
            }
            facts.objects[uri] = .live(stamps: stamps)
        }
        return (facts, localIDs)
    }
}
