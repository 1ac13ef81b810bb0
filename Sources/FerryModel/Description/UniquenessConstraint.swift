/// One uniqueness constraint as it applies to objects: the entity that declares it
/// (its scope: that entity and every subentity share one key space) and the
/// properties whose combined values must be unique. An object with nil in any of
/// them is not constrained (as SQLite's UNIQUE treats NULL).
public struct UniquenessConstraint: Sendable, Hashable, CustomStringConvertible {
    /// The entity that declares the constraint.
    public var entityName: String
    /// Attributes or to-one relationships, in the model's order.
    public var properties: [String]

    public init(entityName: String, properties: [String]) {
        self.entityName = entityName
        self.properties = properties
    }

    public var description: String { "\(entityName)(\(properties.joined(separator: ", ")))" }
}

extension ManagedObjectModel {
    /// The uniqueness constraints an object of `entity` is bound by: those of the entity
    /// and of each of its parents, the root's first.
    public func uniquenessConstraints(of entity: EntityDescription) -> [UniquenessConstraint] {
        entity.ancestry.flatMap { name in
            (self.entity(named: name)?.uniquenessConstraints ?? []).map { UniquenessConstraint(entityName: name, properties: $0) }
        }
    }

    /// Whether any entity of the model declares a uniqueness constraint.
    public var hasUniquenessConstraints: Bool {
        entities.contains { !$0.uniquenessConstraints.isEmpty }
    }
}
