import FerryModel

/// How a store keeps a relationship. Both stores and contexts use this one
/// rule so that each relationship fact is written exactly once:
///
/// - a to-one is a foreign key on its own row;
/// - a to-many whose inverse is a to-one is derived from that foreign key;
/// - any other to-many (many-to-many, or one-way) lives in a join table,
///   written from its *canonical side* (see ``JoinTableKey``).
package enum RelationshipStorage: Sendable, Hashable {
    case foreignKey
    case inverseOfForeignKey(inverse: RelationshipDescription)
    case joinTable(JoinTableKey, sourceIsCanonical: Bool)
}

/// Names a join table by the relationship that writes it: the side whose
/// `DeclaringEntity.relationship` sorts first.
package struct JoinTableKey: Sendable, Hashable, Comparable {
    /// The entity that declares the canonical relationship.
    package var entityName: String
    /// The canonical relationship's name.
    package var relationshipName: String

    package static func < (lhs: JoinTableKey, rhs: JoinTableKey) -> Bool {
        (lhs.entityName, lhs.relationshipName) < (rhs.entityName, rhs.relationshipName)
    }
}

extension ManagedObjectModel {
    /// How `relationship` of `entity` is stored.
    package func storage(of relationship: RelationshipDescription, in entity: EntityDescription) -> RelationshipStorage {
        guard relationship.isToMany else { return .foreignKey }
        let inverse = self.inverse(of: relationship)
        if let inverse, !inverse.isToMany {
            return .inverseOfForeignKey(inverse: inverse)
        }
        // (Which side writes the join table is FerryModel's rule, shared with the migration's inference.)
        if writesOwnJoinTable(relationship, of: entity) {
            return .joinTable(JoinTableKey(entityName: declaringEntityName(ofProperty: relationship.name, in: entity), relationshipName: relationship.name),
                              sourceIsCanonical: true)
        }
        guard let inverse, let destination = self.entity(named: relationship.destinationEntityName) else {
            return .joinTable(JoinTableKey(entityName: declaringEntityName(ofProperty: relationship.name, in: entity), relationshipName: relationship.name),
                              sourceIsCanonical: true)
        }
        return .joinTable(JoinTableKey(entityName: declaringEntityName(ofProperty: inverse.name, in: destination), relationshipName: inverse.name),
                          sourceIsCanonical: false)
    }
}

extension ManagedObjectModel {
    /// The to-many relationships of `entity` kept in join tables, either side (many-to-many and
    /// one-way to-many): the memberships a restore carries, since a delete removed their rows.
    package func joinTableRelationships(of entity: EntityDescription) -> [RelationshipDescription] {
        entity.relationships.filter { relationship in
            guard relationship.isToMany, !relationship.isTransient, case .joinTable = storage(of: relationship, in: entity) else { return false }
            return true
        }
    }

    /// The many-to-many relationships of `entity` (either side) whose inverse has a minimum count:
    /// the memberships a delete of an `entity` object carries and its tombstone keeps, so a replica
    /// that finds the inverse below its minimum after merging can tell which deleted objects were
    /// members (see `docs/SYNC.md`, "Minimum and maximum counts").
    package func tombstoneMemberships(of entity: EntityDescription) -> [RelationshipDescription] {
        joinTableRelationships(of: entity).filter { relationship in
            guard let inverse = inverse(of: relationship), inverse.isToMany else { return false }
            return inverse.minCount > 0 || !inverse.isOptional
        }
    }

    /// Whether change sets record `relationship` of `entity`: each relationship
    /// fact is recorded once, on one side. A to-one is recorded unless its
    /// inverse is a to-one that sorts first (one-to-one: the side whose
    /// `Entity.relationship` sorts first); a to-many only when it owns its join
    /// table (many-to-many, one-way to-many). A to-many whose inverse is a
    /// to-one is never recorded: the to-one side says it all.
    package func isRecorded(_ relationship: RelationshipDescription, in entity: EntityDescription) -> Bool {
        guard !relationship.isTransient else { return false }
        if relationship.isToMany {
            if case .joinTable(_, sourceIsCanonical: true) = storage(of: relationship, in: entity) { return true }
            return false
        }
        guard let inverse = inverse(of: relationship), !inverse.isToMany,
              let destination = self.entity(named: relationship.destinationEntityName) else { return true }
        let own = JoinTableKey(entityName: declaringEntityName(ofProperty: relationship.name, in: entity), relationshipName: relationship.name)
        let other = JoinTableKey(entityName: declaringEntityName(ofProperty: inverse.name, in: destination), relationshipName: inverse.name)
        return !(other < own)
    }
}
