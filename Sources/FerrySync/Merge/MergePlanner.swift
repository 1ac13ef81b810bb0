import Foundation
import FerryModel
import FerryStore

/// Decides what replaying a change set does here: every merge rule of docs/SYNC.md
/// lives in this file. It reads nothing but the change set, the model and the
/// ``MergeFacts`` the store gave, and returns a ``MergePlan``; it writes nothing.
///
/// - **values, members and positions**: last writer wins per (object, property), per
///   (object, relationship, member) and per ordered member's position, by (timestamp,
///   origin); a property never written since its insert takes any write;
/// - **inserts** create their object (defaults they leave out cleared) unless it
///   exists or was deleted here;
/// - **deletes** win over updates; a delete older than a restore of its object is
///   ignored; a delete refused here (by a Deny rule, or because it would leave a required
///   to-one nil) keeps the object and records a restore;
///   a delete of an object never seen leaves a tombstone only;
/// - **restores** newer than an object's delete bring it back with their values;
/// - **changes concurrent with a delete that a restore undid** (they know no restore of the
///   object) do not apply to it: its values and memberships are ignored, as they are where
///   they arrived before the delete (the delete wiped them) or between delete and restore;
/// - **merges** of duplicates make the loser's URI an alias of the survivor (the one whose
///   origin URI sorts first); a merge with an object deleted here deletes the other;
/// - **references to objects deleted here** are repaired by the deleted side's rule:
///   Cascade deletes the referrer, Deny brings the object back from its tombstone, and so
///   does Nullify when the reference is a required to-one; otherwise Nullify and No Action
///   leave the reference nil; a reference to an object never
///   received is a ``MergeProblem`` (the change set is quarantined);
/// - **minimum counts**: deletes the caller says a to-many's minimum keeps are refused, and
///   former members it says come back are brought back from their tombstones (the caller,
///   `CountRepair.swift`, picks them after a first try leaves the count short);
/// - **a to-one that became to-many**: a to-one write of the earlier version (translated, it
///   writes a value to the to-many) replaces the members whose facts are older than it, and its
///   clock (kept under the relationship's name) voids membership facts older than it that arrive later.
///
/// What the delete rules then do to the local graph is not the planner's: the
/// context runs them, and the store records their effects as a change set of its own.
struct MergePlanner {
    let changeSet: ChangeSet
    let model: ManagedObjectModel
    let facts: MergeFacts
    /// Objects (by origin URI) whose delete in this change set a Deny rule refused here, or a
    /// to-many's minimum count keeps.
    let refusedDeletes: Set<String>
    /// Objects deleted here before that come back for a to-many's minimum count.
    let revived: Set<String>

    private var plan = MergePlan()
    /// Objects the plan creates (new inserts and resurrections): every write to them wins.
    private var created: Set<String> = []
    private var resurrected: Set<String> = []
    /// Objects the plan deletes.
    private var deleted: Set<String> = []
    /// Deleted here, as the plan goes: the facts' tombstones, minus resurrections, plus tombstones it adds.
    private var buried: [String: Bool] = [:]

    init(changeSet: ChangeSet, model: ManagedObjectModel, facts: MergeFacts, refusedDeletes: Set<String> = [], revived: Set<String> = []) {
        self.changeSet = changeSet
        self.model = model
        self.facts = facts
        self.refusedDeletes = refusedDeletes
        self.revived = revived
    }

    /// The plan for the change set.
    /// - Throws: ``MergeProblem`` when it names an object this store never received.
    static func plan(_ changeSet: ChangeSet, model: ManagedObjectModel, facts: MergeFacts, refusedDeletes: Set<String> = [],
                     revived: Set<String> = []) throws(MergeProblem) -> MergePlan {
        var planner = MergePlanner(changeSet: changeSet, model: model, facts: facts, refusedDeletes: refusedDeletes, revived: revived)
        try planner.decide()
        return planner.plan
    }

    private mutating func decide() throws(MergeProblem) {
        // Create the inserted objects first: a change may refer to one inserted later in the set.
        for change in changeSet.changes where change.kind == .insert {
            guard !isBuried(change.uri), !exists(change.uri) else { continue }
            plan.steps.append(.create(uri: change.uri, entity: change.entity, keeping: Set(change.values.keys)))
            created.insert(change.uri)
        }
        for change in changeSet.changes {
            switch change.kind {
            case .insert:
                guard !isBuried(change.uri), exists(change.uri) else { continue }
                try write(change, isNew: created.contains(change.uri))
            case .update:
                guard !isBuried(change.uri) else { continue }
                guard exists(change.uri) else { throw .unknownObject(change.uri, place: "an update") }
                guard !isConcurrentWithUndoneDelete(change.uri) else { continue }
                try write(change, isNew: false)
            case .restore:
                try restore(change)
            case .merge:
                try merge(change)
            case .delete:
                if exists(change.uri) {
                    if refusedDeletes.contains(change.uri) {
                        plan.restored.insert(change.uri)
                    } else if let kept = facts.stamp(of: change.uri, property: ReplayAnnotation.existenceKey), !isLater(than: kept) {
                        continue  // restored after this delete was made
                    } else if !deleted.contains(change.uri) {
                        delete(change.uri)
                        plan.deletes.insert(change.uri)
                    }
                } else if !isBuried(change.uri) {
                    plan.tombstonesOnly.append(DeletedObject(uri: change.uri, entity: change.entity))
                    buried[change.uri] = true
                }
            }
        }
        // Former members deleted here before, back for a to-many's minimum count.
        for uri in revived.sorted() where isBuried(uri) {
            guard let tombstone = facts.tombstone(of: uri) else { continue }
            try bringBack(uri, from: tombstone)
        }
    }

    // MARK: - Rules

    /// Whether this change set's clock is later than `stamp`'s (ties broken by origin, as text).
    private func isLater(than stamp: WriteStamp) -> Bool {
        changeSet.stamp > stamp
    }

    /// Whether `uri` names an object restored here after a delete this change set did not know of:
    /// it knows none of the restores, so it was made concurrently with the delete they undid, and
    /// the delete won over it. (A change knowing the delete knows a restore: where the object was
    /// deleted, only a restore brings it back; where the delete was refused, a restore was recorded.)
    private func isConcurrentWithUndoneDelete(_ uri: String) -> Bool {
        guard !created.contains(uri), let marks = facts.restores[uri], !marks.isEmpty else { return false }
        return !marks.contains(where: changeSet.knows)
    }

    /// Whether this change set's write of `property` beats the last one applied here.
    private func wins(_ uri: String, _ property: String) -> Bool {
        guard !created.contains(uri), let last = facts.stamp(of: uri, property: property) else { return true }
        return isLater(than: last)
    }

    /// A merge of two duplicates (names already followed through aliases): the survivor is the
    /// one whose origin URI sorts first, whichever way the change set put it. If either was
    /// deleted here, the other goes too: a delete of either one is a delete of the merged object.
    private mutating func merge(_ change: ObjectChange) throws(MergeProblem) {
        guard let other = change.mergedInto, other != change.uri else { return }
        let (survivor, loser) = DuplicateRule.order(change.uri, other)
        let gone = [survivor, loser].filter { isBuried($0) || deleted.contains($0) }
        for uri in [survivor, loser] where !gone.contains(uri) && !exists(uri) {
            throw .unknownObject(uri, place: "a merge")
        }
        if gone.isEmpty {
            plan.steps.append(.merge(loser: loser, survivor: survivor))
        } else {
            for uri in [survivor, loser] where !gone.contains(uri) { delete(uri) }
        }
    }

    /// A restore wins over a delete older than it: the object comes back (on a
    /// new row, under its origin URI) with the restore's values.
    private mutating func restore(_ change: ObjectChange) throws(MergeProblem) {
        if isBuried(change.uri) {
            guard let tombstone = facts.tombstone(of: change.uri),
                  isLater(than: WriteStamp(timestamp: tombstone.timestamp, origin: tombstone.origin)) else { return }
            resurrect(change.uri, entity: change.entity, keeping: Set(change.values.keys))
            try write(change, isNew: true)
            plan.clocks[change.uri, default: []].formUnion(change.values.keys)
            plan.clocks[change.uri, default: []].insert(ReplayAnnotation.existenceKey)
        } else if exists(change.uri) {
            try write(change, isNew: false)
            if wins(change.uri, ReplayAnnotation.existenceKey) { plan.clocks[change.uri, default: []].insert(ReplayAnnotation.existenceKey) }
        }
    }

    /// The writes of one change that win. A plain insert needs no clocks (every later
    /// write follows it); a resurrected object does.
    private mutating func write(_ change: ObjectChange, isNew: Bool) throws(MergeProblem) {
        let uri = change.uri
        guard !deleted.contains(uri) else { return }
        let clocked = !isNew || resurrected.contains(uri)
        for (name, value) in change.values.sorted(by: { $0.key < $1.key }) {
            guard isNew || wins(uri, name) else { continue }
            if model.entity(named: change.entity)?.relationship(named: name)?.isToMany == true {
                try replaceMembers(of: uri, entity: change.entity, relationship: name, with: value, isNew: isNew)
                if clocked { plan.clocks[uri, default: []].insert(name) }
                if deleted.contains(uri) { return }
                continue
            }
            switch value {
            case .null, .attribute:
                plan.steps.append(.set(uri: uri, property: name, value: value))
            case .object(let target):
                // A reference to an object deleted here becomes nil (after the deleted side's rule ran).
                let destination = try reference(target, from: uri, entity: change.entity, relationship: name)
                if deleted.contains(uri) { return }
                plan.steps.append(.set(uri: uri, property: name, value: destination.map(ChangeValue.object) ?? .null))
            }
            if clocked { plan.clocks[uri, default: []].insert(name) }
            if deleted.contains(uri) { return }
        }
        for (relationship, members) in change.added.sorted(by: { $0.key < $1.key }) {
            // A restore also brings back memberships its members record (their side of a many-to-many).
            let description = model.entity(named: change.entity)?.relationship(named: relationship)
            let theirs = description.flatMap { relationship in
                model.entity(named: change.entity).map { model.isRecorded(relationship, in: $0) ? nil : relationship.inverseName } ?? nil
            }
            for member in members.sorted() {
                let key = relationship + " " + member
                if theirs == nil {
                    // (Older than the last to-one write of an earlier version, if the relationship was to-one then: void.)
                    guard isNew || (wins(uri, key) && wins(uri, relationship)) else { continue }
                    if clocked { plan.clocks[uri, default: []].insert(key) }
                }
                guard !isConcurrentWithUndoneDelete(member) else { continue }
                guard let found = try reference(member, from: uri, entity: change.entity, relationship: relationship) else { continue }
                if deleted.contains(uri) { return }
                if let theirs { plan.clocks[found, default: []].insert(theirs + " " + uri) }
                plan.steps.append(.add(uri: uri, relationship: relationship, member: found))
            }
        }
        for (relationship, members) in change.removed.sorted(by: { $0.key < $1.key }) {
            // A member whose delete in this change set is refused here keeps its memberships: the
            // removal came with the delete (its Nullify rule), and the restore recorded carries them.
            for member in members.sorted() where !refusedDeletes.contains(member) {
                let key = relationship + " " + member
                guard isNew || (wins(uri, key) && wins(uri, relationship)) else { continue }
                if clocked { plan.clocks[uri, default: []].insert(key) }
                guard !isBuried(member), exists(member), !isConcurrentWithUndoneDelete(member) else { continue }
                plan.steps.append(.remove(uri: uri, relationship: relationship, member: member))
            }
        }
        // Positions in ordered relationships: last writer wins per member, like values. A position of a
        // member that is not (or no longer) in the relationship is kept all the same: it orders the member
        // if it comes back, and every replica keeps the same keys.
        for (relationship, keys) in change.positions.sorted(by: { $0.key < $1.key }) {
            for (member, key) in keys.sorted(by: { $0.key < $1.key }) {
                let clockKey = RecordedChange.positionKey(relationship, member)
                guard isNew || wins(uri, clockKey) else { continue }
                if clocked { plan.clocks[uri, default: []].insert(clockKey) }
                plan.positions[uri, default: [:]][relationship, default: [:]][member] = key
            }
        }
    }

    /// A to-one write of an earlier version to a relationship that is to-many now: the written
    /// object (if any, and if its fact is older) becomes a member, and every member whose fact is
    /// older than the write leaves, as the write removed the previous destination where it was made.
    /// (Members added after it stay: their facts are later.)
    private mutating func replaceMembers(of uri: String, entity: String, relationship name: String, with value: ChangeValue, isNew: Bool) throws(MergeProblem) {
        var kept: String?
        if case .object(let target) = value {
            kept = try reference(target, from: uri, entity: entity, relationship: name)
            if deleted.contains(uri) { return }
        }
        for fact in facts.members[uri]?[name] ?? [] where fact.member != kept {
            guard fact.stamp.map(isLater(than:)) ?? true else { continue }
            plan.steps.append(.remove(uri: uri, relationship: name, member: fact.member))
            plan.clocks[uri, default: []].insert(RecordedChange.membershipKey(name, fact.member))
        }
        guard let kept else { return }
        let key = RecordedChange.membershipKey(name, kept)
        guard isNew || wins(uri, key) else { return }
        if !isNew || resurrected.contains(uri) { plan.clocks[uri, default: []].insert(key) }
        plan.steps.append(.add(uri: uri, relationship: name, member: kept))
    }

    /// The object a reference points to; nil when it was deleted here, after
    /// repairing the referrer by the deleted side's delete rule (Cascade deletes the referrer;
    /// Deny, and Nullify of a required to-one, bring the object back; otherwise Nullify and
    /// No Action drop the reference).
    private mutating func reference(_ target: String, from source: String, entity: String, relationship name: String) throws(MergeProblem) -> String? {
        if !isBuried(target), exists(target), !deleted.contains(target) { return target }
        guard isBuried(target) || deleted.contains(target) else {
            throw .unknownObject(target, place: "\(entity).\(name)")
        }
        let inverse = model.entity(named: entity)?.relationship(named: name).flatMap { model.inverse(of: $0) }
        // The delete would have been refused had the reference been here (by Deny, or by the
        // validation of a required to-one its Nullify rule cleared): bring the object back.
        let refused: Bool
        switch inverse?.deleteRule {
        case .cascade?:
            delete(source)
            refused = false
        case .deny?:
            refused = true
        case .nullify?:
            refused = isRequiredToOne(name, of: entity)
        default:
            refused = false
        }
        guard refused, isBuried(target), let tombstone = facts.tombstone(of: target) else { return nil }
        try bringBack(target, from: tombstone)
        return target
    }

    private func isRequiredToOne(_ name: String, of entity: String) -> Bool {
        guard let relationship = model.entity(named: entity)?.relationship(named: name) else { return false }
        return !relationship.isToMany && !relationship.isOptional
    }

    /// Brings a deleted object back from its tombstone (its last values and the memberships it
    /// keeps), and records a restore of it.
    private mutating func bringBack(_ uri: String, from tombstone: Tombstone) throws(MergeProblem) {
        resurrect(uri, entity: tombstone.entity, keeping: Set(tombstone.values.keys))
        plan.restored.insert(uri)
        try write(ObjectChange(kind: .restore, uri: uri, entity: tombstone.entity, values: tombstone.values, added: tombstone.memberships),
                  isNew: true)
    }

    // MARK: - Objects as the plan goes

    private func isBuried(_ uri: String) -> Bool {
        buried[uri] ?? facts.isBuried(uri)
    }

    /// Whether the object exists here or the plan created it (deleted or not).
    private func exists(_ uri: String) -> Bool {
        created.contains(uri) || (facts.isLive(uri) && !isBuried(uri))
    }

    private mutating func resurrect(_ uri: String, entity: String, keeping: Set<String>) {
        plan.steps.append(.resurrect(uri: uri, entity: entity, keeping: keeping))
        created.insert(uri)
        resurrected.insert(uri)
        buried[uri] = false
    }

    private mutating func delete(_ uri: String) {
        guard !deleted.contains(uri) else { return }
        plan.steps.append(.delete(uri: uri))
        deleted.insert(uri)
    }
}
