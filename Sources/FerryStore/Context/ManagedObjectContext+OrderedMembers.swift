import FerryModel

/// What replay needs of ordered to-many relationships: which ones a context changed, and
/// putting their members in the order the replicas agree on (see `docs/SYNC.md`).
extension ManagedObjectContext {
    /// The ordered to-many relationships whose members changed in this context since it was
    /// last saved, as (owner, relationship name), owners in registration order.
    package func changedOrderedRelationships() -> [(owner: ManagedObject, relationship: String)] {
        var result: [(owner: ManagedObject, relationship: String)] = []
        let keys = insertedKeys + updatedKeys.sorted()
        for key in keys {
            guard let object = self.object(forKey: key), !object.isDeleted else { continue }
            for index in object.runtime.toManyIndexes {
                guard let relationship = object.runtime.relationship(at: index), relationship.isOrdered,
                      object.isInserted ? object.toMany[index]?.ordered.isEmpty == false : object.changedIndexes.contains(index) else { continue }
                result.append((object, relationship.name))
            }
        }
        return result
    }

    /// Puts the members of an ordered to-many relationship of `owner` in the order of `members`
    /// (which must be its current members; others are ignored).
    package func reorder(_ owner: ManagedObject, relationship name: String, as members: [ManagedObject]) throws(ContextError) {
        guard let index = owner.runtime.propertyIndex(named: name) else { return }
        try loadToMany(owner, index)
        owner.toMany[index]?.compact()  // (the loop reads the members at every position)
        for (position, member) in members.enumerated() {
            guard let current = owner.toMany[index]?.ordered, position < current.count, current[position] != member.key else { continue }
            try primitiveMove(owner, index, member, to: position)
        }
    }
}
