import Foundation
import FerryModel
import FerryStore

/// Merges one change set into a fresh context: the last-writer-wins decisions,
/// deletes and tombstones, and the repair of references to deleted objects.
/// The caller saves the context with ``annotation``.
struct MergeContext {
    let store: any ReplicaStore
    let context: ManagedObjectContext
    let changeSet: ChangeSet
    private(set) var annotation: ReplayAnnotation
    /// Objects by origin URI (those already looked up, and new inserts).
    private var objects: [String: ManagedObject] = [:]
    private var buried: [String: Bool] = [:]

    /// Objects (by origin URI) whose delete in this change set a Deny rule refused here.
    let refusedDeletes: Set<String>

    init(store: any ReplicaStore, context: ManagedObjectContext, changeSet: ChangeSet, body: String, refusedDeletes: Set<String> = []) {
        self.store = store
        self.context = context
        self.changeSet = changeSet
        self.annotation = ReplayAnnotation(changeSet: changeSet, body: body)
        self.refusedDeletes = refusedDeletes
    }

    /// The origin URI of an object of this merge.
    func originURI(of id: ObjectID) -> String? {
        objects.first { $0.value.objectID == id }?.key
    }

    /// Whether this change set's clock is later than (timestamp, origin).
    private func isLater(than timestamp: HybridTimestamp, _ origin: UUID) -> Bool {
        if changeSet.timestamp != timestamp { return changeSet.timestamp > timestamp }
        return changeSet.origin.uuidString > origin.uuidString
    }

    mutating func applyChanges() throws {
        try prefetch()
        try mergeChanges()
        // Run delete rules now, so that objects this change set inserted and a
        // rule then deleted leave tombstones: later updates to them are ignored.
        try context.processPendingChanges()
        for (id, uri) in annotation.originURIs.sorted(by: { $0.value < $1.value }) {
            guard let object = objects[uri], object.isDeleted, object.objectID == id else { continue }
            annotation.repairDeletes.append((uri, object.entity.name))
        }
    }

    private mutating func mergeChanges() throws {
        // Create the inserted objects first: a change may refer to one inserted later in the set.
        for change in changeSet.changes where change.kind == .insert {
            guard try !isBuried(change.uri), try object(change.uri) == nil else { continue }
            let inserted = try context.insert(entityName: change.entity)
            try clearDefaults(of: inserted, keeping: change.values)
            objects[change.uri] = inserted
            annotation.originURIs[inserted.objectID] = change.uri
        }
        for change in changeSet.changes {
            switch change.kind {
            case .insert:
                guard try !isBuried(change.uri), let target = try object(change.uri) else { continue }
                try write(change, to: target, isNew: target.isInserted)
            case .update:
                guard try !isBuried(change.uri) else { continue }
                guard let target = try object(change.uri) else {
                    throw MergeProblem.unknownObject(change.uri, place: "an update")
                }
                try write(change, to: target, isNew: false)
            case .restore:
                try restore(change)
            case .delete:
                if let target = try object(change.uri) {
                    if refusedDeletes.contains(change.uri) {
                        annotation.restored.insert(target.objectID)
                    } else if let kept = try store.lastWrite(of: target.objectID, property: ReplayAnnotation.existenceKey), !isLater(than: kept.timestamp, kept.origin) {
                        continue  // restored after this delete was made
                    } else if !target.isDeleted {
                        context.delete(target)
                        annotation.deletes.insert(target.objectID)
                    }
                } else if try !isBuried(change.uri) {
                    annotation.tombstonesOnly.append((change.uri, change.entity))
                    buried[change.uri] = true
                }
            }
        }
    }

    // MARK: - Restores

    /// A restore wins over a delete older than it: the object comes back (on a
    /// new row, under its origin URI) with the restore's values.
    private mutating func restore(_ change: ObjectChange) throws {
        if try isBuried(change.uri) {
            guard let tombstone = try store.tombstone(of: change.uri), isLater(than: tombstone.timestamp, tombstone.origin) else { return }
            let target = try resurrect(change.uri, entity: change.entity)
            try clearDefaults(of: target, keeping: change.values)
            try write(change, to: target, isNew: true)
            annotation.writes[target.objectID, default: []].formUnion(change.values.keys)
            annotation.writes[target.objectID, default: []].insert(ReplayAnnotation.existenceKey)
        } else if let target = try object(change.uri) {
            try write(change, to: target, isNew: false)
            if try wins(target, ReplayAnnotation.existenceKey) { annotation.writes[target.objectID, default: []].insert(ReplayAnnotation.existenceKey) }
        }
    }

    /// Inserts, restores and tombstones carry every non-nil value, so a default
    /// they leave out was set to nil where they were made: a new object here must not keep it.
    private func clearDefaults(of object: ManagedObject, keeping values: [String: ChangeValue]) throws {
        for attribute in object.entity.attributes where attribute.defaultValue != nil && !attribute.isTransient && values[attribute.name] == nil {
            try object.setAttributeValue(nil, forKey: attribute.name)
        }
    }

    /// Inserts an object for a deleted origin URI.
    private mutating func resurrect(_ uri: String, entity: String) throws -> ManagedObject {
        let target = try context.insert(entityName: entity)
        objects[uri] = target
        buried[uri] = false
        annotation.originURIs[target.objectID] = uri
        annotation.resurrected.insert(target.objectID)
        return target
    }

    // MARK: - Writes

    private mutating func write(_ change: ObjectChange, to target: ManagedObject, isNew: Bool) throws {
        guard !target.isDeleted else { return }
        // A plain insert needs no clocks (every later write follows it); a resurrected object does.
        let clocked = !isNew || annotation.resurrected.contains(target.objectID)
        for (name, value) in change.values.sorted(by: { $0.key < $1.key }) {
            guard try isNew || wins(target, name) else { continue }
            switch value {
            case .null:
                if target.entity.attribute(named: name) != nil {
                    try target.setAttributeValue(nil, forKey: name)
                } else {
                    try target.setToOneValue(nil, forKey: name)
                }
            case .attribute(let attribute):
                try target.setAttributeValue(attribute, forKey: name)
            case .object(let uri):
                // A reference to an object deleted here becomes nil (after the deleted side's rule ran).
                let destination = try reference(uri, from: target, relationship: name)
                if target.isDeleted { return }
                try target.setToOneValue(destination, forKey: name)
            }
            if clocked { annotation.writes[target.objectID, default: []].insert(name) }
            if target.isDeleted { return }
        }
        for (relationship, uris) in change.added.sorted(by: { $0.key < $1.key }) {
            for uri in uris.sorted() {
                let key = relationship + " " + uri
                guard try isNew || wins(target, key) else { continue }
                if clocked { annotation.writes[target.objectID, default: []].insert(key) }
                guard let member = try reference(uri, from: target, relationship: relationship) else { continue }
                try target.mutableSetValue(forKey: relationship).insert(member)
                if target.isDeleted { return }
            }
        }
        for (relationship, uris) in change.removed.sorted(by: { $0.key < $1.key }) {
            for uri in uris.sorted() {
                let key = relationship + " " + uri
                guard try isNew || wins(target, key) else { continue }
                if clocked { annotation.writes[target.objectID, default: []].insert(key) }
                guard try !isBuried(uri), let member = try object(uri) else { continue }
                try target.mutableSetValue(forKey: relationship).remove(member)
            }
        }
    }

    /// Whether this change set's write of `property` beats the last one applied here.
    private func wins(_ target: ManagedObject, _ property: String) throws -> Bool {
        guard !target.isInserted, let last = try store.lastWrite(of: target.objectID, property: property) else { return true }
        return isLater(than: last.timestamp, last.origin)
    }

    /// The object a reference points to; nil when it was deleted here, after
    /// repairing the referrer by the deleted side's delete rule (Cascade deletes
    /// the referrer; Nullify and No Action drop the reference; Deny is refused).
    private mutating func reference(_ uri: String, from source: ManagedObject, relationship name: String) throws -> ManagedObject? {
        if try !isBuried(uri), let found = try object(uri), !found.isDeleted { return found }
        guard try isBuried(uri) || object(uri)?.isDeleted == true else {
            throw MergeProblem.unknownObject(uri, place: "\(source.entity.name).\(name)")
        }
        let inverse = source.entity.relationship(named: name).flatMap { store.model.inverse(of: $0) }
        switch inverse?.deleteRule {
        case .cascade?:
            context.delete(source)
        case .deny?:
            // The delete would have been refused had the reference been here: bring the object back.
            guard try isBuried(uri), let tombstone = try store.tombstone(of: uri) else { return nil }
            let restored = try resurrect(uri, entity: tombstone.entity)
            annotation.restored.insert(restored.objectID)
            try clearDefaults(of: restored, keeping: tombstone.values)
            try write(ObjectChange(kind: .restore, uri: uri, entity: tombstone.entity, values: tombstone.values), to: restored, isNew: true)
            return restored
        default:
            break
        }
        return nil
    }

    // MARK: - Lookups

    /// Every URI the change set names, looked up in one read.
    private var known = Set<String>()
    private var mapped: [String: ObjectID] = [:]

    private mutating func prefetch() throws {
        var uris = Set<String>()
        for change in changeSet.changes {
            uris.insert(change.uri)
            for value in change.values.values { if case .object(let uri) = value { uris.insert(uri) } }
            for members in change.added.values { uris.formUnion(members) }
            for members in change.removed.values { uris.formUnion(members) }
        }
        let found = try store.lookUp(originURIs: Array(uris))
        for uri in uris { buried[uri] = found.buried.contains(uri) }
        mapped = found.mapped
        known = uris
        // Load the objects that exist here in one read, rather than one read each.
        let existing = uris.compactMap { uri -> ObjectID? in
            guard !found.buried.contains(uri) else { return nil }
            return found.mapped[uri] ?? store.ownObjectID(forURI: uri)
        }
        try context.registerExisting(existing)
    }

    private mutating func isBuried(_ uri: String) throws -> Bool {
        if let known = buried[uri] { return known }
        let answer = try store.isBuried(uri)
        buried[uri] = answer
        return answer
    }

    private mutating func object(_ uri: String) throws -> ManagedObject? {
        if let found = objects[uri] { return found }
        let id: ObjectID?
        if known.contains(uri) {
            // Prefetched: mapped rows, else this store's own URIs.
            id = mapped[uri] ?? store.ownObjectID(forURI: uri)
        } else {
            id = try store.localObjectID(forOriginURI: uri)
        }
        guard let id, let found = try? context.existingObject(with: id) else { return nil }
        objects[uri] = found
        return found
    }
}

/// Why a change set cannot be merged as it is (it is quarantined with this reason).
enum MergeProblem: Error, CustomStringConvertible {
    case unknownObject(String, place: String)

    var description: String {
        switch self {
        case .unknownObject(let uri, let place):
            "\(place) refers to \(uri), which this store has never received"
        }
    }
}
