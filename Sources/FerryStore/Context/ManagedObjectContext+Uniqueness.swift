import FerryModel

/// An object whose values of a uniqueness constraint another object already has.
package struct UniqueKeyCollision {
    /// The constraint.
    package let constraint: UniquenessConstraint
    /// The newcomer: an object of the pending changes.
    package let object: ManagedObject
    /// The object that has the values already: a stored object, or an object of the
    /// pending changes that comes first (inserted earlier, or an update before inserts).
    package let other: ManagedObject
    /// The shared values, as `name = value`.
    package let values: [String]

    /// As a save reports it.
    var conflict: ConstraintConflict {
        ConstraintConflict(constraint: constraint, objectURI: object.objectID.uriString,
                           conflictingObjectURI: other.objectID.uriString, values: values)
    }
}

/// Uniqueness constraints at save: finding objects that would share a unique key, and
/// resolving them by the context's ``MergePolicy`` (see `docs/STORE.md`).
extension ManagedObjectContext {
    /// One value of a constraint's key.
    enum ConstraintValue: Hashable {
        case attribute(AttributeValue)
        case object(ObjectID)
    }


    /// The pending objects a uniqueness constraint binds: inserted ones, and updated ones
    /// whose constrained properties changed.
    package func pendingConstrainedObjects() -> [ManagedObject] {
        guard model.hasUniquenessConstraints else { return [] }
        var result: [ManagedObject] = []
        for key in updatedKeys.sorted() {
            guard let object = self.object(forKey: key), object.isUpdated else { continue }
            let constrained = model.uniquenessConstraints(of: object.entity).flatMap(\.properties)
            if constrained.contains(where: { object.runtime.propertyIndex(named: $0).map(object.changedIndexes.contains) ?? false }) {
                result.append(object)
            }
        }
        for key in insertedKeys {
            guard let object = self.object(forKey: key), !object.isDeleted, !model.uniquenessConstraints(of: object.entity).isEmpty else { continue }
            result.append(object)
        }
        return result
    }

    /// The values of `constraint` that `object` has now; nil when one of them is nil.
    func constraintKey(of object: ManagedObject, _ constraint: UniquenessConstraint) throws(ContextError) -> [ConstraintValue]? {
        try fulfillFault(object)
        var key: [ConstraintValue] = []
        for name in constraint.properties {
            guard let index = object.runtime.propertyIndex(named: name) else { return nil }
            switch object.runtime.kinds[index] {
            case .attribute:
                guard let value = object.attributes[index] else { return nil }
                key.append(.attribute(value))
            case .toOne:
                guard let target = object.toOne[index].flatMap({ self.object(forKey: $0) }) else { return nil }
                key.append(.object(target.objectID))
            case .toMany:
                return nil
            }
        }
        return key
    }

    private func constraintKey(of row: RowSnapshot, _ constraint: UniquenessConstraint) -> [ConstraintValue]? {
        guard let entity = model.entity(named: row.objectID.entityName) else { return nil }
        var key: [ConstraintValue] = []
        for name in constraint.properties {
            guard let index = entity.propertyIndex(named: name) else { return nil }
            if let value = row.attributes[index] {
                key.append(.attribute(value))
            } else if let target = row.toOne[index] {
                key.append(.object(target))
            } else {
                return nil
            }
        }
        return key
    }

    /// Each of `candidates` (pending objects, in order) that shares a constraint's values with
    /// a stored object or an earlier candidate, with the object it collides with. Per key, the
    /// object that stays is the stored one (the first by URI, should the store hold several),
    /// else the first candidate.
    package func uniquenessCollisions(of candidates: [ManagedObject]) throws -> [UniqueKeyCollision] {
        var order: [UniquenessConstraint] = []
        var groups: [UniquenessConstraint: [[ConstraintValue]: [ManagedObject]]] = [:]
        var keyOrder: [UniquenessConstraint: [[ConstraintValue]]] = [:]
        for object in candidates where !object.isDeleted {
            for constraint in model.uniquenessConstraints(of: object.entity) {
                guard let key = try constraintKey(of: object, constraint) else { continue }
                if groups[constraint] == nil { order.append(constraint) }
                if groups[constraint]?[key] == nil { keyOrder[constraint, default: []].append(key) }
                groups[constraint, default: [:]][key, default: []].append(object)
            }
        }
        var collisions: [UniqueKeyCollision] = []
        for constraint in order {
            guard let byKey = groups[constraint], let keys = keyOrder[constraint] else { continue }
            let candidateSet = Set(byKey.values.flatMap { $0 }.map(ObjectIdentifier.init))
            let stored = try storedObjects(with: keys, for: constraint, excluding: candidateSet)
            for key in keys {
                guard let members = byKey[key], let first = members.first else { continue }
                let survivor = stored[key] ?? first
                for member in members where member !== survivor {
                    collisions.append(UniqueKeyCollision(constraint: constraint, object: member, other: survivor,
                                                         values: describe(key, constraint)))
                }
            }
        }
        return collisions
    }

    /// The objects outside `excluded` (by identity) that have these values of `constraint` now:
    /// stored rows, as this context sees them (rows deleted or changed here do not count).
    private func storedObjects(with keys: [[ConstraintValue]], for constraint: UniquenessConstraint,
                               excluding excluded: Set<ObjectIdentifier>) throws -> [[ConstraintValue]: ManagedObject] {
        // Keys naming a new object cannot be stored yet.
        let searchable = keys.filter { key in key.allSatisfy { if case .object(let id) = $0 { !id.isTemporaryID } else { true } } }
        var found: [[ConstraintValue]: (object: ManagedObject, uri: String)] = [:]
        var start = 0
        while start < searchable.count {
            let batch = searchable[start..<min(start + UniqueKeyQuery.keysPerQuery, searchable.count)]
            start += batch.count
            let predicate = UniqueKeyQuery.predicate(for: constraint, keys: batch.map { key in
                key.map { value -> PredicateValue in
                    switch value {
                    case .attribute(let attribute): .attribute(attribute)
                    case .object(let id): .object(id)
                    }
                }
            })
            let rows = try store.fetchRows(FetchRequest(entityName: constraint.entityName, predicate: predicate))
            for row in rows {
                let registered = registeredObject(for: row.objectID)
                if let registered, registered.isDeleted || excluded.contains(ObjectIdentifier(registered)) { continue }
                let key = try registered.map { object throws(ContextError) in try constraintKey(of: object, constraint) } ?? constraintKey(of: row, constraint)
                guard let key, batch.contains(key) else { continue }
                if let existing = found[key], existing.uri.utf8.lexicographicallyPrecedes(row.objectID.uriString.utf8) { continue }
                found[key] = (registered ?? register(row), row.objectID.uriString)
            }
        }
        return found.mapValues(\.object)
    }

    private func describe(_ key: [ConstraintValue], _ constraint: UniquenessConstraint) -> [String] {
        zip(constraint.properties, key).map { name, value in
            switch value {
            case .attribute(let attribute): "\(name) = \(AttributeJSON.encode(attribute).text)"
            case .object(let id): "\(name) = \(id.uriString)"
            }
        }
    }

    // MARK: - Resolving by merge policy

    /// Finds the pending objects that break a uniqueness constraint and resolves them by
    /// ``mergePolicy``; under ``MergePolicy/error`` the save fails, naming them all.
    func resolveUniquenessConflicts() throws(SaveError) {
        guard model.hasUniquenessConstraints else { return }
        var collisions: [UniqueKeyCollision] = []
        // Merging may give a survivor new values that collide again: a few rounds settle it.
        for _ in 0..<8 {
            let candidates = pendingConstrainedObjects()
            guard !candidates.isEmpty else { return }
            do {
                collisions = try uniquenessCollisions(of: candidates)
            } catch {
                throw SaveError.storeFailed(StoreFailure("checking uniqueness constraints failed: \(error)", cause: error))
            }
            guard !collisions.isEmpty else { return }
            guard mergePolicy != .error else { throw SaveError.constraintConflict(collisions.map(\.conflict)) }
            do {
                for collision in collisions where !collision.object.isDeleted && !collision.other.isDeleted {
                    try resolve(collision)
                }
                try propagateDeletes()
            } catch {
                throw SaveError.storeFailed(StoreFailure("resolving a uniqueness conflict failed: \(error)", cause: error))
            }
        }
        throw SaveError.constraintConflict(collisions.map(\.conflict))
    }

    private func resolve(_ collision: UniqueKeyCollision) throws(ContextError) {
        let newcomer = collision.object, survivor = collision.other
        if mergePolicy == .rollback {
            if newcomer.isInserted {
                try moveReferences(from: newcomer, to: survivor)
                try detach(newcomer)
                delete(newcomer)
            } else {
                try revertChanges(of: newcomer)
            }
            return
        }
        try mergeValues(of: newcomer, into: survivor)
        try moveReferences(from: newcomer, to: survivor)
        try detach(newcomer)
        delete(newcomer)
    }

    /// Gives `survivor` the newcomer's values as the merge policy says (to-many members are
    /// moved by ``moveReferences(from:to:)``, or replaced here under overwrite).
    private func mergeValues(of newcomer: ManagedObject, into survivor: ManagedObject) throws(ContextError) {
        try fulfillFault(newcomer)
        try fulfillFault(survivor)
        for (index, kind) in survivor.runtime.kinds.enumerated() {
            guard let from = newcomer.runtime.propertyIndex(named: survivor.entity.properties[index].name) else { continue }
            let setByNewcomer = newcomer.isInserted || newcomer.changedIndexes.contains(from)
            switch (kind, newcomer.runtime.kinds[from]) {
            case (.attribute(let attribute), .attribute) where !attribute.isTransient:
                let value = newcomer.attributes[from]
                let take = switch mergePolicy {
                case .mergeByPropertyObjectTrump: setByNewcomer && (value != nil || !newcomer.isInserted)
                case .mergeByPropertyStoreTrump: survivor.attributes[index] == nil && value != nil
                default: true
                }
                if take { survivor.setAttribute(index, value, in: self) }
            case (.toOne(let relationship), .toOne) where !relationship.isTransient:
                let target = newcomer.toOne[from].flatMap { self.object(forKey: $0) }
                let take = switch mergePolicy {
                case .mergeByPropertyObjectTrump: setByNewcomer && (target != nil || !newcomer.isInserted)
                case .mergeByPropertyStoreTrump: survivor.toOne[index] == nil && target != nil
                default: true
                }
                if take, survivor.toOne[index] != target?.key { try setToOne(survivor, index, to: target) }
            case (.toMany(let relationship), .toMany) where mergePolicy == .overwrite && !relationship.isTransient:
                try replaceToMany(survivor, index, with: try destinations(of: newcomer, from))
            default:
                continue
            }
        }
    }

    /// Moves everything that points at `newcomer` to `survivor`: its to-many members (whose
    /// inverses then point at the survivor) and one-way references from other objects.
    private func moveReferences(from newcomer: ManagedObject, to survivor: ManagedObject) throws(ContextError) {
        for index in newcomer.runtime.toManyIndexes {
            guard let into = survivor.runtime.propertyIndex(named: newcomer.entity.properties[index].name),
                  case .toMany(let relationship) = survivor.runtime.kinds[into], !relationship.isTransient else { continue }
            for member in try destinations(of: newcomer, index) where !member.isDeleted && member !== survivor {
                try addToMany(survivor, into, member)
            }
        }
        // One-way to-ones (no inverse to move them by) of other registered objects.
        for object in registry.objects where object !== newcomer && !object.isDeleted && !object.isFault {
            for index in object.runtime.toOneIndexes where object.toOne[index] == newcomer.key {
                guard case .toOne(let relationship) = object.runtime.kinds[index], relationship.inverseName == nil,
                      survivor.runtime.isKind(of: relationship.destinationEntityName) else { continue }
                try setToOne(object, index, to: survivor)
            }
        }
        guard !newcomer.objectID.isTemporaryID else { return }
        for owner in model.entities {
            for relationship in owner.ownRelationships where !relationship.isToMany && !relationship.isTransient && relationship.inverseName == nil {
                guard newcomer.runtime.isKind(of: relationship.destinationEntityName),
                      survivor.runtime.isKind(of: relationship.destinationEntityName) else { continue }
                let referrers: [ManagedObject]
                do {
                    referrers = try fetch(FetchRequest(entityName: owner.name, predicate: .equal(relationship.name, .object(newcomer.objectID))))
                } catch {
                    throw ContextError.referencesNotFound(newcomer.objectID.uriString, cause: error)
                }
                for referrer in referrers where !referrer.isDeleted { try referrer.setToOneValue(survivor, forKey: relationship.name) }
            }
        }
    }

    /// Empties the newcomer's relationships before it goes, so that its delete rules
    /// (Cascade, Deny) act on nothing the survivor now holds.
    private func detach(_ newcomer: ManagedObject) throws(ContextError) {
        for index in newcomer.runtime.toManyIndexes {
            for member in try destinations(of: newcomer, index) { try removeFromToMany(newcomer, index, member) }
        }
        for index in newcomer.runtime.toOneIndexes { try setToOne(newcomer, index, to: nil) }
    }

    /// Returns an updated object to its saved values (the rollback policy).
    private func revertChanges(of object: ManagedObject) throws(ContextError) {
        for index in object.changedIndexes {
            switch object.runtime.kinds[index] {
            case .attribute:
                object.attributes[index] = object.committedAttributes[index]
            case .toOne:
                try setToOne(object, index, to: object.committedToOne[index].flatMap { self.object(forKey: $0) })
            case .toMany:
                let committed = (object.toMany[index]?.committed ?? []).compactMap { self.object(forKey: $0) }
                try replaceToMany(object, index, with: committed)
            }
        }
        object.changedIndexes.removeAll()
    }
}
