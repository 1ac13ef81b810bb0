/// The live, editable members of one to-many relationship of one object.
///
/// Edits go through the context, so the inverse relationship is updated on
/// both sides. For ordered relationships the order is kept; for unordered
/// ones ``objects`` lists members in the order they were added.
public struct RelationshipSet: Sequence {
    let owner: ManagedObject
    let index: Int

    private func context() throws(ContextError) -> ManagedObjectContext {
        guard let context = owner.managedObjectContext else { throw ContextError.detachedObject(owner.objectID.uriString) }
        return context
    }

    /// The members (in order for ordered relationships). Empty when they cannot
    /// be loaded (the owner's context is gone, or its row was deleted elsewhere);
    /// `value(forKey:)` reports those cases as errors.
    public var objects: [ManagedObject] {
        (try? context().destinations(of: owner, index)) ?? []
    }

    /// The number of members.
    public var count: Int { objects.count }

    /// Whether there are no members.
    public var isEmpty: Bool { objects.isEmpty }

    /// Whether `object` is a member.
    public func contains(_ object: ManagedObject) -> Bool {
        objects.contains { $0 === object }
    }

    /// Adds `object` (at `position` in an ordered relationship), updating the inverse.
    public func insert(_ object: ManagedObject, at position: Int? = nil) throws(ContextError) {
        try context().addToMany(owner, index, object, at: position)
    }

    /// Adds several objects.
    public func insert(contentsOf objects: some Sequence<ManagedObject>) throws(ContextError) {
        for object in objects { try insert(object) }
    }

    /// Removes `object`, updating the inverse.
    public func remove(_ object: ManagedObject) throws(ContextError) {
        try context().removeFromToMany(owner, index, object)
    }

    /// Removes every member.
    public func removeAll() throws(ContextError) {
        for object in objects { try remove(object) }
    }

    public func makeIterator() -> IndexingIterator<[ManagedObject]> {
        objects.makeIterator()
    }
}
