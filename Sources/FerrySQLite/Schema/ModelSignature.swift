import FerryModel

/// The persistent shape of a model, stored in each file so that a later open
/// can say exactly what differs and whether the difference is additive.
struct ModelSignature: Codable, Sendable, Equatable {
    struct Entity: Codable, Sendable, Equatable {
        var parent: String?
        var isAbstract: Bool
        var attributes: [String: Attribute]
        var relationships: [String: Relationship]
    }

    struct Attribute: Codable, Sendable, Equatable {
        var type: String
        var isOptional: Bool
        /// A derived attribute's expression (a migration computes the values when it changes).
        var derivation: String?
    }

    struct Relationship: Codable, Sendable, Equatable {
        var destination: String
        var inverse: String?
        var isToMany: Bool
        var isOrdered: Bool
        var isOptional: Bool
    }

    var entities: [String: Entity]

    init(model: ManagedObjectModel) {
        var entities: [String: Entity] = [:]
        for entity in model.entities {
            var attributes: [String: Attribute] = [:]
            var relationships: [String: Relationship] = [:]
            for attribute in entity.attributes where !attribute.isTransient {
                attributes[attribute.name] = Attribute(type: attribute.type.xcodeName, isOptional: attribute.isOptional,
                                                       derivation: attribute.derivation?.expression)
            }
            for relationship in entity.relationships where !relationship.isTransient {
                relationships[relationship.name] = Relationship(
                    destination: relationship.destinationEntityName, inverse: relationship.inverseName,
                    isToMany: relationship.isToMany, isOrdered: relationship.isOrdered, isOptional: relationship.isOptional)
            }
            entities[entity.name] = Entity(parent: entity.parentName, isAbstract: entity.isAbstract,
                                           attributes: attributes, relationships: relationships)
        }
        self.entities = entities
    }

    /// The stored shape as a model (names, types, optionality, relationships; no validation
    /// rules or defaults, which the shape does not keep), for matching a new model against it.
    func model() throws(ModelError) -> ManagedObjectModel {
        /// Everything `name` inherits, from its ancestors.
        func inherited(_ name: String?) -> (attributes: Set<String>, relationships: Set<String>) {
            guard let name, let entity = entities[name] else { return ([], []) }
            return (Set(entity.attributes.keys), Set(entity.relationships.keys))
        }
        let descriptions = entities.sorted(by: { $0.key < $1.key }).map { name, entity in
            let parent = inherited(entity.parent)
            return EntityDescription(
                name: name, parent: entity.parent, isAbstract: entity.isAbstract,
                attributes: entity.attributes.sorted(by: { $0.key < $1.key }).filter { !parent.attributes.contains($0.key) }.map { key, attribute in
                    AttributeDescription(name: key, type: AttributeType(xcodeName: attribute.type) ?? .string, isOptional: attribute.isOptional,
                                         derivation: attribute.derivation.map(Derivation.init(expression:)))
                },
                relationships: entity.relationships.sorted(by: { $0.key < $1.key }).filter { !parent.relationships.contains($0.key) }.map { key, relationship in
                    RelationshipDescription(name: key, destination: relationship.destination, inverse: relationship.inverse, isToMany: relationship.isToMany,
                                            isOrdered: relationship.isOrdered, isOptional: relationship.isOptional)
                })
        }
        return try ManagedObjectModel(entities: descriptions)
    }
}
