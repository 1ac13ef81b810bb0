import FerryModel

/// Looking up objects by the values of a uniqueness constraint, many keys per query.
package enum UniqueKeyQuery {
    /// How many keys one query looks up.
    package static let keysPerQuery = 200

    /// The predicate matching objects that hold any of `keys` (values in the constraint's
    /// order): an `IN` list for a single property, else one `AND` per key.
    package static func predicate(for constraint: UniquenessConstraint, keys: some Collection<[PredicateValue]>) -> FetchPredicate {
        if constraint.properties.count == 1, let name = constraint.properties.first {
            return .membership(keyPath: name, keys.compactMap(\.first))
        }
        return .or(keys.map { key in .and(zip(constraint.properties, key).map { .equal($0, $1) }) })
    }
}

extension ReplicaObjects where Self: PersistentStore {
    /// Whether the store holds an object (of the constraint's entity or a subentity) with any of
    /// these attribute values of `constraint` (``UniqueKeyQuery/holdsAny(in:keys:constraint:)``).
    public func holdsAny(of keys: [[AttributeValue]], for constraint: UniquenessConstraint) throws -> Bool {
        try UniqueKeyQuery.holdsAny(in: self, keys: keys, constraint: constraint)
    }
}

extension UniqueKeyQuery {
    /// Whether `store` holds an object (of the constraint's entity or a subentity) with any of
    /// these attribute values of `constraint`: one fetch request per ``keysPerQuery`` keys.
    package static func holdsAny(in store: some PersistentStore, keys: [[AttributeValue]], constraint: UniquenessConstraint) throws -> Bool {
        var start = 0
        while start < keys.count {
            let batch = keys[start..<min(start + keysPerQuery, keys.count)].map { $0.map(PredicateValue.attribute) }
            start += batch.count
            let request = FetchRequest(entityName: constraint.entityName, predicate: predicate(for: constraint, keys: batch), fetchLimit: 1)
            if try store.count(request) > 0 { return true }
        }
        return false
    }
}
