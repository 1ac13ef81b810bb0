import FerryModel

/// Saves over another writer's changes (optimistic-locking conflicts), resolved by the
/// context's ``ManagedObjectContext/mergePolicy`` as Core Data's merge policies do:
///
/// | policy | an object another writer changed | an object another writer deleted |
/// |---|---|---|
/// | ``MergePolicy/error`` | the save fails with ``SaveError/mergeConflict(_:)`` | the same |
/// | ``MergePolicy/mergeByPropertyObjectTrump`` | the store's values, with this context's changed properties on top | the delete stands |
/// | ``MergePolicy/mergeByPropertyStoreTrump`` | the same, except properties the other writer changed too keep the store's value | the same |
/// | ``MergePolicy/overwrite`` | the object's whole state is written, undoing the other writer's changes to it | the same |
/// | ``MergePolicy/rollback`` | the object's changes are dropped: it takes the store's values | the same |
///
/// Where another writer's delete stands, the object leaves the context and its changes are dropped.
/// A delete of this context's over another writer's change goes ahead under object trump and
/// overwrite, and is undone (the object takes the store's values) under store trump and rollback.
/// After resolving, the save validates again and writes; conflicts that arise meanwhile are
/// resolved the same way, at most three times.
extension ManagedObjectContext {
    struct Conflict {
        let object: ManagedObject
        let row: RowSnapshot?
        let report: MergeConflict
    }

    static let conflictRounds = 3

    /// The conflicts the store reported for these URIs, with the objects' current rows.
    func conflicts(for uris: [String]) -> [Conflict] {
        var pending: [String: ManagedObject] = [:]
        for key in updatedKeys.union(deletedKeys) {
            guard let object = self.object(forKey: key) else { continue }
            pending[object.objectID.uriString] = object
        }
        let objects = uris.compactMap { pending[$0] }
        let rows = (try? store.rows(for: objects.map(\.objectID))) ?? [:]
        return objects.map { object in
            let row = rows[object.objectID]
            let report = MergeConflict(objectID: object.objectID, oldVersion: object.version, newVersion: row?.version,
                                       objectSnapshot: snapshot(of: object, attributes: object.attributes,
                                                                toOne: object.toOne.map { $0.flatMap { self.object(forKey: $0)?.objectID } }),
                                       cachedSnapshot: snapshot(of: object, attributes: object.committedAttributes,
                                                                toOne: object.committedToOne.map { $0.flatMap { self.object(forKey: $0)?.objectID } }),
                                       persistedSnapshot: row.map { snapshot(of: object, attributes: $0.attributes, toOne: $0.toOne) })
            return Conflict(object: object, row: row, report: report)
        }
    }

    private func snapshot(of object: ManagedObject, attributes: [AttributeValue?], toOne: [ObjectID?]) -> [String: ChangeValue] {
        var values: [String: ChangeValue] = [:]
        for (index, kind) in object.runtime.kinds.enumerated() {
            switch kind {
            case .attribute(let attribute) where !attribute.isTransient:
                values[attribute.name] = index < attributes.count ? attributes[index].map(ChangeValue.attribute) ?? .null : .null
            case .toOne(let relationship) where !relationship.isTransient:
                values[relationship.name] = index < toOne.count ? toOne[index].map { .object($0.uriString) } ?? .null : .null
            default:
                continue
            }
        }
        return values
    }

    /// Resolves `conflicts` by ``mergePolicy`` (not ``MergePolicy/error``).
    func resolve(_ conflicts: [Conflict]) {
        for conflict in conflicts {
            let object = conflict.object
            guard let row = conflict.row else {
                // Deleted by the other writer: the delete stands under every policy.
                object.changedIndexes.removeAll()
                updatedKeys.remove(object.key)
                deletedKeys.removeAll { $0 == object.key }
                object.isDeleted = true
                unregister(object)
                continue
            }
            if object.isDeleted {
                switch mergePolicy {
                case .mergeByPropertyObjectTrump, .overwrite, .error:
                    object.version = row.version
                case .mergeByPropertyStoreTrump, .rollback:
                    object.isDeleted = false
                    deletedKeys.removeAll { $0 == object.key }
                    rebase(object, onto: row, keeping: PropertyIndexSet(), keepingToMany: false)
                }
                continue
            }
            var keep = PropertyIndexSet()
            for index in object.runtime.persistentAttributeIndexes + object.runtime.toOneIndexes {
                let current = value(of: object, at: index, attributes: object.attributes,
                                    toOne: object.toOne.map { $0.flatMap { self.object(forKey: $0)?.objectID } })
                let read = value(of: object, at: index, attributes: object.committedAttributes,
                                 toOne: object.committedToOne.map { $0.flatMap { self.object(forKey: $0)?.objectID } })
                let stored = value(of: object, at: index, attributes: row.attributes, toOne: row.toOne)
                let changedHere = object.changedIndexes.contains(index)
                switch mergePolicy {
                case .mergeByPropertyObjectTrump, .error:
                    if changedHere { keep.insert(index) }
                case .mergeByPropertyStoreTrump:
                    if changedHere && stored == read { keep.insert(index) }
                case .overwrite:
                    if current != stored { keep.insert(index) }
                case .rollback:
                    continue
                }
            }
            rebase(object, onto: row, keeping: keep, keepingToMany: mergePolicy != .rollback)
        }
    }

    private func value(of object: ManagedObject, at index: Int, attributes: [AttributeValue?], toOne: [ObjectID?]) -> ChangeValue {
        switch object.runtime.kinds[index] {
        case .attribute: attributes[index].map(ChangeValue.attribute) ?? .null
        case .toOne: toOne[index].map { .object($0.uriString) } ?? .null
        case .toMany: .null
        }
    }

    /// Takes `row` as the object's committed state (and version), keeping its values at `keep`
    /// (and its to-many edits, unless told not to) as unsaved changes.
    private func rebase(_ object: ManagedObject, onto row: RowSnapshot, keeping keep: PropertyIndexSet, keepingToMany: Bool) {
        let attributes = object.attributes
        let toOne = object.toOne
        let toManyChanged = object.changedIndexes.filter { if case .toMany = object.runtime.kinds[$0] { keepingToMany } else { false } }
        let toMany = object.toMany
        fill(object, from: row)
        for (index, kind) in object.runtime.kinds.enumerated() {
            if case .attribute(let attribute) = kind, attribute.isTransient { object.attributes[index] = attributes[index] }
        }
        var changed = PropertyIndexSet()
        for index in keep {
            switch object.runtime.kinds[index] {
            case .attribute: object.attributes[index] = attributes[index]
            case .toOne: object.toOne[index] = toOne[index]
            case .toMany: continue
            }
            changed.insert(index)
        }
        object.toMany = keepingToMany ? toMany : [:]
        for index in toManyChanged { changed.insert(index) }
        object.changedIndexes = changed
        if changed.isEmpty {
            updatedKeys.remove(object.key)
            if !retainsRegisteredObjects { _ = registry.unpin(object.key) }
        }
    }
}
