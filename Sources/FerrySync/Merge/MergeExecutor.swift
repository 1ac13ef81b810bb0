import Foundation
import FerryModel
import FerryStore

/// Carries a change set's ``MergePlan`` out on a fresh context: reads the
/// ``MergeFacts`` from the store, asks ``MergePlanner`` for the plan, makes its
/// writes, and runs the delete rules. The caller saves the context with
/// ``annotation``, which tells the store what to record.
struct MergeExecutor {
    let store: any ReplicaStore
    let context: ManagedObjectContext
    let changeSet: ChangeSet
    var annotation: ReplayAnnotation
    /// Objects by origin URI: those that exist here, and those the plan created.
    var objects: [String: ManagedObject] = [:]

    /// Objects (by origin URI) whose delete in this change set a Deny rule, or a to-many's minimum, refused here.
    let refusedDeletes: Set<String>
    /// Objects deleted here before that come back for a to-many's minimum count.
    let revived: Set<String>
    /// To-many relationships an earlier version had as to-one (`Entity.relationship`; ``VersionTranslator/replacedRelationships``).
    let replacedRelationships: Set<String>

    init(store: any ReplicaStore, context: ManagedObjectContext, changeSet: ChangeSet, body: String,
         refusedDeletes: Set<String> = [], revived: Set<String> = [], replacedRelationships: Set<String> = []) {
        self.store = store
        self.context = context
        self.changeSet = changeSet
        self.annotation = ReplayAnnotation(changeSet: changeSet, body: body)
        self.refusedDeletes = refusedDeletes
        self.revived = revived
        self.replacedRelationships = replacedRelationships
    }

    /// Whether a validation failure is the change set's own doing, whatever it meets here: a value
    /// it wrote that breaks an attribute's rule (bounds, length, pattern, a required attribute set
    /// to nil), or a custom validator refusing an object it creates (a store with stricter rules
    /// than the origin's). Rules on relationships (required, counts) and custom rules on objects
    /// that were here already are broken by the combination with concurrent changes.
    func isOwnFailure(_ failure: ValidationError) -> Bool {
        guard let object = objects.values.first(where: { $0.objectID.uriString == failure.objectURI }),
              let uri = objects.first(where: { $0.value === object })?.key else { return false }
        if failure.code == .custom { return object.isInserted }
        guard let key = failure.key, object.entity.attribute(named: key) != nil else { return false }
        return changeSet.changes.contains { $0.uri == uri && $0.kind != .delete && $0.values[key] != nil }
    }

    /// The origin URI of an object of this merge.
    func originURI(of id: ObjectID) -> String? {
        objects.first { $0.value.objectID == id }?.key
    }

    /// The origin URI of the object this merge's context names `uri` (temporary for an insert).
    func originURI(ofObjectURI uri: String) -> String? {
        objects.first { $0.value.objectID.uriString == uri }?.key
    }

    /// Plans the merge and makes its writes on the context.
    /// - Throws: ``MergeProblem`` when the change set names an object this store never received.
    mutating func applyChanges() throws {
        let context = self.context
        // URIs of merged duplicates stand for their survivors.
        let aliases = try store.aliases(of: Array(MergeFacts.uris(in: changeSet.changes)))
        let changeSet = aliases.isEmpty ? self.changeSet : DuplicateRule.following(aliases, in: self.changeSet, model: store.model)
        let (facts, localIDs) = try MergeFacts.gather(for: changeSet, also: revived, replaced: replacedRelationships, from: store) { ids in
            // Load the rows in one read, rather than one read each.
            try context.registerExisting(ids)
            return Set(ids.filter { (try? context.existingObject(with: $0)) != nil })
        }
        for (uri, id) in localIDs {
            objects[uri] = try context.existingObject(with: id)
        }
        let plan = try MergePlanner.plan(changeSet, model: store.model, facts: facts, refusedDeletes: refusedDeletes, revived: revived)
        try carryOut(plan)
        if !aliases.isEmpty { try carryWrites(of: self.changeSet, aliases: aliases) }
        // Run delete rules now, so that objects this change set inserted and a
        // rule then deleted leave tombstones: later updates to them are ignored.
        try context.processPendingChanges()
        // Objects of different origins that now share a unique key merge into one.
        try mergeFoundDuplicates()
        // Members past a to-many's maximum (concurrent additions) go, newest first.
        try trimPastMaximum()
        // Objects this change set inserted that a rule deleted at once (not those merged away).
        let mergedAway = Set(annotation.merges.map(\.loser))
        for (id, uri) in annotation.originURIs.sorted(by: { $0.value < $1.value }) where !mergedAway.contains(id) {
            guard let object = objects[uri], object.isDeleted, object.objectID == id else { continue }
            annotation.repairDeletes.append(DeletedObject(uri: uri, entity: object.entity.name))
        }
        try orderMembers(by: plan)
    }

    private mutating func carryOut(_ plan: MergePlan) throws {
        for step in plan.steps {
            switch step {
            case .create(let uri, let entity, let keeping):
                try insert(uri, entity: entity, keeping: keeping)
            case .resurrect(let uri, let entity, let keeping):
                let object = try insert(uri, entity: entity, keeping: keeping)
                annotation.resurrected.insert(object.objectID)
            case .set(let uri, let property, let value):
                let target = try object(uri)
                switch value {
                case .null:
                    if target.entity.attribute(named: property) != nil {
                        try target.setAttributeValue(nil, forKey: property)
                    } else {
                        try target.setToOneValue(nil, forKey: property)
                    }
                case .attribute(let attribute):
                    try target.setAttributeValue(attribute, forKey: property)
                case .object(let destination):
                    try target.setToOneValue(try object(destination), forKey: property)
                }
            case .add(let uri, let relationship, let member):
                try object(uri).mutableSetValue(forKey: relationship).insert(try object(member))
            case .remove(let uri, let relationship, let member):
                try object(uri).mutableSetValue(forKey: relationship).remove(try object(member))
            case .delete(let uri):
                context.delete(try object(uri))
            case .merge(let loser, let survivor):
                try mergeDuplicate(loser: try object(loser), loserURI: loser, into: try object(survivor), survivorURI: survivor, isReplayed: true)
            }
        }
        for (uri, properties) in plan.clocks {
            annotation.writes[try object(uri).objectID, default: []].formUnion(properties)
        }
        for uri in plan.deletes { annotation.deletes.insert(try object(uri).objectID) }
        for uri in plan.restored { annotation.restored.insert(try object(uri).objectID) }
        annotation.tombstonesOnly = plan.tombstonesOnly
    }

    /// Puts the members of every ordered relationship the merge touched in the order every replica
    /// agrees on: by position key (the keys that won here, then those the store keeps), then by
    /// member origin URI (docs/SYNC.md, "Ordered relationships").
    private mutating func orderMembers(by plan: MergePlan) throws {
        var touched = context.changedOrderedRelationships()
        for (uri, positions) in plan.positions.sorted(by: { $0.key < $1.key }) {
            guard let owner = objects[uri], !owner.isDeleted else { continue }
            annotation.positions[owner.objectID, default: [:]].merge(positions) { mine, theirs in mine.merging(theirs) { _, new in new } }
            for relationship in positions.keys.sorted() where !touched.contains(where: { $0.owner === owner && $0.relationship == relationship }) {
                touched.append((owner, relationship))
            }
        }
        guard !touched.isEmpty else { return }
        var names: [ObjectID: String] = [:]
        for (uri, object) in objects { names[object.objectID] = uri }
        for (owner, relationship) in touched {
            let members = try owner.mutableSetValue(forKey: relationship).objects
            guard members.count > 1 || annotation.positions[owner.objectID]?[relationship] != nil else { continue }
            var keys = owner.objectID.isTemporaryID ? [:] : try store.positions(of: owner.objectID, relationship: relationship)
            if let won = annotation.positions[owner.objectID]?[relationship] { keys.merge(won) { _, new in new } }
            var named: [(member: ManagedObject, uri: String)] = []
            for member in members {
                let uri = try names[member.objectID] ?? store.originURI(of: member.objectID)
                named.append((member, uri))
            }
            named.sort { OrderedPositions.precedes((keys[$0.uri], $0.uri), (keys[$1.uri], $1.uri)) }
            try context.reorder(owner, relationship: relationship, as: named.map(\.member))
        }
    }

    /// Inserts an object for `uri`; attributes with a default that `keeping` does not name are
    /// cleared (inserts, restores and tombstones carry every non-nil value, so a default they
    /// leave out was set to nil where they were made).
    @discardableResult
    private mutating func insert(_ uri: String, entity: String, keeping: Set<String>) throws -> ManagedObject {
        let inserted = try context.insert(entityName: entity)
        for attribute in inserted.entity.attributes where attribute.defaultValue != nil && !attribute.isTransient && !keeping.contains(attribute.name) {
            try inserted.setAttributeValue(nil, forKey: attribute.name)
        }
        objects[uri] = inserted
        annotation.originURIs[inserted.objectID] = uri
        return inserted
    }

    private func object(_ uri: String) throws -> ManagedObject {
        guard let found = objects[uri] else { throw MergeProblem.unknownObject(uri, place: "the merge plan") }
        return found
    }
}
