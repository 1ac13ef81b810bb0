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
                attributes[attribute.name] = Attribute(type: attribute.type.xcodeName, isOptional: attribute.isOptional)
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
}
