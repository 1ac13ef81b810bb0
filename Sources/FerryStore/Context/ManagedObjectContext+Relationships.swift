import FerryModel

/// Relationship edits. Every public edit keeps the inverse in step, as Core
/// Data does when an inverse is modelled: setting `order.customer = c` also
/// adds the order to `c.orders` and removes it from the previous customer's.
extension ManagedObjectContext {
    /// Makes sure an object's values and one of its to-many relationships are loaded.
    func loadToMany(_ object: ManagedObject, _ index: Int) throws(ContextError) {
        try fulfillFault(object)
        guard object.toMany[index] == nil else { return }
        guard let relationship = object.runtime.relationship(at: index) else { return }
        if isOwnTemporary(object.objectID) || object.unloadedToManyIsEmpty {
            object.toMany[index] = RelationshipMembers([], committed: [])
            return
        }
        let ids: [ObjectID]
        do {
            ids = try store.relatedObjectIDs(of: object.objectID, relationship: relationship.name)
        } catch {
            throw ContextError.objectInaccessible(object.objectID.uriString)
        }
        object.toMany[index] = RelationshipMembers(ids.map { referencedFault(for: $0).key })
    }

    /// The current destinations of a relationship (to-one or to-many).
    func destinations(of object: ManagedObject, _ index: Int) throws(ContextError) -> [ManagedObject] {
        switch object.runtime.kinds[index] {
        case .toOne:
            try fulfillFault(object)
            return object.toOne[index].flatMap { self.object(forKey: $0) }.map { [$0] } ?? []
        case .toMany:
            try loadToMany(object, index)
            return (object.toMany[index]?.ordered ?? []).compactMap { self.object(forKey: $0) }
        case .attribute:
            return []
        }
    }

    func checkDestination(_ target: ManagedObject, for relationship: RelationshipInfo, of source: ManagedObject) throws(ContextError) {
        guard target.managedObjectContext === self else {
            throw ContextError.objectFromAnotherContext(target.objectID.uriString)
        }
        guard target.runtime.isKind(of: relationship.destinationEntityName) else {
            throw ContextError.wrongDestination(entity: source.runtime.name, key: relationship.name,
                                                expected: relationship.destinationEntityName, actual: target.runtime.name)
        }
    }

    // MARK: - Edits that keep inverses in step

    /// Sets a to-one relationship and updates the inverse on both the old and the new destination.
    func setToOne(_ source: ManagedObject, _ index: Int, to target: ManagedObject?) throws(ContextError) {
        guard case .toOne(let relationship) = source.runtime.kinds[index] else { return }
        if let target { try checkDestination(target, for: relationship, of: source) }
        try fulfillFault(source)
        let old = source.toOne[index].flatMap { self.object(forKey: $0) }
        guard old !== target else { return }
        if let inverse = source.runtime.inverseIndex[index] {
            // (An old destination whose row is gone, left by a No Action delete, has no inverse to update.)
            if let old, isStored(old) { try primitiveUnlink(old, inverse, source) }
            if let target {
                if case .toOne = target.runtime.kinds[inverse] {
                    // One-to-one: the target's previous partner loses it.
                    try fulfillFault(target)
                    if let previous = target.toOne[inverse].flatMap({ self.object(forKey: $0) }), previous !== source {
                        try primitiveSetToOne(previous, index, nil)
                    }
                }
                try primitiveLink(target, inverse, source, at: nil)
            }
        }
        try primitiveSetToOne(source, index, target)
    }

    /// Adds `target` to a to-many relationship (at `position` for ordered ones).
    func addToMany(_ source: ManagedObject, _ index: Int, _ target: ManagedObject, at position: Int? = nil) throws(ContextError) {
        guard case .toMany(let relationship) = source.runtime.kinds[index] else { return }
        try checkDestination(target, for: relationship, of: source)
        try loadToMany(source, index)
        if source.toMany[index]?.contains(target.key) == true {
            if let position { try primitiveMove(source, index, target, to: position) }
            return
        }
        if let inverse = source.runtime.inverseIndex[index] {
            if case .toOne = target.runtime.kinds[inverse] {
                try fulfillFault(target)
                if let previous = target.toOne[inverse].flatMap({ self.object(forKey: $0) }), previous !== source, isStored(previous) {
                    try primitiveUnlink(previous, index, target)
                }
            }
            try primitiveLink(target, inverse, source, at: nil)
        }
        try primitiveLink(source, index, target, at: position)
    }

    /// Removes `target` from a to-many relationship and from the inverse.
    func removeFromToMany(_ source: ManagedObject, _ index: Int, _ target: ManagedObject) throws(ContextError) {
        try loadToMany(source, index)
        guard source.toMany[index]?.contains(target.key) == true else { return }
        if let inverse = source.runtime.inverseIndex[index] {
            try primitiveUnlink(target, inverse, source)
        }
        try primitiveUnlink(source, index, target)
    }

    /// Replaces the members of a to-many relationship.
    func replaceToMany(_ source: ManagedObject, _ index: Int, with targets: [ManagedObject]) throws(ContextError) {
        guard case .toMany(let relationship) = source.runtime.kinds[index] else { return }
        for target in targets { try checkDestination(target, for: relationship, of: source) }
        let keep = Set(targets.map(\.key))
        for current in try destinations(of: source, index) where !keep.contains(current.key) {
            try removeFromToMany(source, index, current)
        }
        for (position, target) in targets.enumerated() {
            try addToMany(source, index, target, at: relationship.isOrdered ? position : nil)
        }
    }

    // MARK: - Primitive edits: one side only

    /// Points a to-one at `target` without touching any inverse.
    func primitiveSetToOne(_ object: ManagedObject, _ index: Int, _ target: ManagedObject?) throws(ContextError) {
        try fulfillFault(object)
        guard object.toOne[index] != target?.key else { return }
        recordUndo(.toOne(object, index: index, object.toOne[index]))
        target?.isReferenced = true
        object.toOne[index] = target?.key
        markChanged(object, index)
    }

    /// Adds `target` to one side: sets a to-one, or inserts into a to-many.
    func primitiveLink(_ object: ManagedObject, _ index: Int, _ target: ManagedObject, at position: Int?) throws(ContextError) {
        switch object.runtime.kinds[index] {
        case .toOne:
            try primitiveSetToOne(object, index, target)
        case .toMany:
            try loadToMany(object, index)
            target.isReferenced = true
            if object.toMany[index]?.insert(target.key, at: position) == true {
                recordUndo(.toManyLinked(object, index: index, target.key))
                markChanged(object, index)
            }
        case .attribute:
            return
        }
    }

    /// Removes `target` from one side: clears a to-one that points at it, or removes it from a to-many.
    func primitiveUnlink(_ object: ManagedObject, _ index: Int, _ target: ManagedObject) throws(ContextError) {
        switch object.runtime.kinds[index] {
        case .toOne:
            try fulfillFault(object)
            if object.toOne[index] == target.key { try primitiveSetToOne(object, index, nil) }
        case .toMany:
            try loadToMany(object, index)
            let before = membersBeforeUndoableEdit(object, index)
            if object.toMany[index]?.remove(target.key) == true {
                recordUndo(.toMany(object, index: index, before))
                markChanged(object, index)
            }
        case .attribute:
            return
        }
    }

    /// A to-many's members before an edit, for the undo step that reverts it; empty without an undo
    /// manager. (Holding the list while the edit changes it copies the whole list: when every link
    /// did, inserting 40,000 objects under one manager took seconds for that alone. A link records
    /// only what it added; a removal, which shifts the list anyway, records the list.)
    private func membersBeforeUndoableEdit(_ object: ManagedObject, _ index: Int) -> [Int] {
        undoManager == nil ? [] : object.toMany[index]?.ordered ?? []
    }

    func primitiveMove(_ object: ManagedObject, _ index: Int, _ target: ManagedObject, to position: Int) throws(ContextError) {
        try loadToMany(object, index)
        guard object.toMany[index]?.contains(target.key) == true else { return }
        recordUndo(.toMany(object, index: index, object.toMany[index]?.ordered ?? []))
        object.toMany[index]?.move(target.key, to: position)
        markChanged(object, index)
    }
}
