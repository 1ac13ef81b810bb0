import Foundation
import FerryModel

/// What a child context (``ManagedObjectContext/newChildContext()``) reads from and saves to:
/// its parent context, seen as a store. Reads answer with the parent's current state, its unsaved
/// changes included (the parent's fetch merges them with its own store); a save becomes edits of
/// the parent's objects, which the parent writes at its own next save.
///
/// A child belongs to its parent's isolation domain (neither is `Sendable`), and this store is
/// reachable only through its child, so it is only ever called from that domain: that is what
/// makes the unchecked `Sendable` conformance the protocol asks for sound.
final class ParentContextStore: PersistentStore, @unchecked Sendable {
    let parent: ManagedObjectContext

    init(parent: ManagedObjectContext) {
        self.parent = parent
    }

    var identifier: UUID { parent.store.identifier }
    var model: ManagedObjectModel { parent.model }

    // MARK: - Reading the parent's state

    func fetchRows(_ request: FetchRequest) throws -> [RowSnapshot] {
        try parent.fetch(Self.throughParent(request)).map(snapshot)
    }

    func fetchObjectIDs(_ request: FetchRequest) throws -> [ObjectID] {
        try parent.fetchObjectIDs(Self.throughParent(request))
    }

    func count(_ request: FetchRequest) throws -> Int {
        try parent.count(for: Self.throughParent(request))
    }

    func rows(for ids: [ObjectID]) throws -> [ObjectID: RowSnapshot] {
        var rows: [ObjectID: RowSnapshot] = [:]
        for id in ids {
            if let object = parentObject(for: id) { rows[id] = snapshot(of: object) }
        }
        return rows
    }

    func relatedObjectIDs(of id: ObjectID, relationship name: String) throws -> [ObjectID] {
        guard let object = parentObject(for: id), let index = object.runtime.propertyIndex(named: name) else {
            throw QueryError.unknownKey(entity: id.entityName, key: name, keyPath: name)
        }
        return try parent.destinations(of: object, index).filter { !$0.isDeleted }.map(\.objectID)
    }

    /// The parent's unsaved changes are the child's store content, whatever the child asks of its own.
    private static func throughParent(_ request: FetchRequest) -> FetchRequest {
        var request = request
        request.includesPendingChanges = true
        request.fetchBatchSize = 0
        return request
    }

    /// The parent's object for an ID, its values loaded (registered, or read from its store); nil when
    /// it has none, its row is gone, or it deleted it.
    private func parentObject(for id: ObjectID) -> ManagedObject? {
        guard let object = try? parent.existingObject(with: id), !object.isDeleted else { return nil }
        return object
    }

    /// A parent object's current values as a row (objects a fetch or ``parentObject(for:)`` gave:
    /// loaded, not deleted).
    private func snapshot(of object: ManagedObject) -> RowSnapshot {
        let toOne = object.toOne.map { key -> ObjectID? in
            guard let key, let target = parent.object(forKey: key), !target.isDeleted else { return nil }
            return target.objectID
        }
        return RowSnapshot(objectID: object.objectID, version: object.version, attributes: object.attributes, toOne: toOne)
    }

    // MARK: - Saving into the parent

    /// Applies a child's save to the parent's objects. Every object the save names is found before
    /// anything changes, so a save naming an object the parent no longer has changes nothing.
    func save(_ request: SaveRequest) throws -> SaveResult {
        do {
            return try apply(request)
        } catch let error as ContextError {
            throw SaveError.storeFailed(StoreFailure("the parent context could not take the child's save: \(error)", cause: error))
        }
    }

    private func apply(_ request: SaveRequest) throws -> SaveResult {
        // Find what exists first: updated and deleted objects, and every object referred to.
        var existing: [ObjectID: ManagedObject] = [:]
        let inserting = Set(request.inserts.map(\.objectID))
        var referred = request.updates.map(\.objectID) + request.deletes.map(\.objectID)
        for insert in request.inserts { referred += insert.toOne.compactMap { $0 } }
        for update in request.updates { referred += update.toOne.values.compactMap { $0 } }
        for change in request.toManyChanges { referred += [change.source] + change.added + change.removed + (change.orderedMembers ?? []) }
        for id in referred where !inserting.contains(id) && existing[id] == nil {
            guard let object = parentObject(for: id) else { throw SaveError.conflict(objectURIs: [id.uriString]) }
            existing[id] = object
        }
        // Then change the parent: inserts (values, then references, which may name each other), updates, to-manys, deletes.
        var inserted: [ObjectID: ManagedObject] = [:]
        var permanentIDs: [ObjectID] = []
        for insert in request.inserts {
            guard let runtime = parent.container.runtimes[insert.objectID.entityName] else {
                throw ContextError.unknownEntity(insert.objectID.entityName)
            }
            let object = try parent.insert(runtime: runtime, awake: false)
            for index in runtime.persistentAttributeIndexes { object.setAttribute(index, insert.attributes[index], in: parent) }
            inserted[insert.objectID] = object
            permanentIDs.append(object.objectID)
        }
        func object(_ id: ObjectID) -> ManagedObject? { inserted[id] ?? existing[id] }
        for insert in request.inserts {
            guard let source = object(insert.objectID) else { continue }
            for index in source.runtime.toOneIndexes {
                if let target = insert.toOne[index].flatMap(object) { try parent.setToOne(source, index, to: target) }
            }
        }
        var versions: [Int64] = []
        for update in request.updates {
            guard let target = object(update.objectID) else { continue }
            for (index, value) in update.attributes.sorted(by: { $0.key < $1.key }) { target.setAttribute(index, value, in: parent) }
            for (index, destination) in update.toOne.sorted(by: { $0.key < $1.key }) {
                try parent.setToOne(target, index, to: destination.flatMap(object))
            }
            versions.append(target.version)
        }
        for change in request.toManyChanges {
            guard let source = object(change.source), let index = source.runtime.propertyIndex(named: change.relationship) else { continue }
            if let ordered = change.orderedMembers {
                try parent.replaceToMany(source, index, with: ordered.compactMap(object))
                continue
            }
            for member in change.removed.compactMap(object) { try parent.removeFromToMany(source, index, member) }
            for member in change.added.compactMap(object) { try parent.addToMany(source, index, member) }
        }
        for delete in request.deletes {
            if let doomed = object(delete.objectID) { parent.delete(doomed) }
        }
        return SaveResult(permanentIDs: permanentIDs, updatedVersions: versions)
    }
}
