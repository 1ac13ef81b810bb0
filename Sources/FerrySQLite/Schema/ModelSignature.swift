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

    /// What makes `new` unreadable by a store made with `self`; empty when
    /// every difference is additive (new entities, new optional attributes
    /// and relationships, required properties made optional).
    func incompatibilities(with new: ModelSignature) -> [String] {
        var problems: [String] = []
        for (name, old) in entities.sorted(by: { $0.key < $1.key }) {
            guard let current = new.entities[name] else {
                problems.append("entity '\(name)' was removed (its rows would be lost)")
                continue
            }
            if old.parent != current.parent {
                problems.append("entity '\(name)' changed parent from \(old.parent ?? "none") to \(current.parent ?? "none")")
            }
            if !old.isAbstract && current.isAbstract {
                problems.append("entity '\(name)' became abstract, but the store may hold objects of it")
            }
            for (key, attribute) in old.attributes.sorted(by: { $0.key < $1.key }) {
                guard let now = current.attributes[key] else {
                    problems.append("entity '\(name)': attribute '\(key)' was removed or made transient")
                    continue
                }
                if attribute.type != now.type {
                    problems.append("entity '\(name)': attribute '\(key)' changed type from \(attribute.type) to \(now.type)")
                }
                if attribute.isOptional && !now.isOptional {
                    problems.append("entity '\(name)': attribute '\(key)' became required; stored objects may have no value")
                }
            }
            for (key, relationship) in old.relationships.sorted(by: { $0.key < $1.key }) {
                guard let now = current.relationships[key] else {
                    problems.append("entity '\(name)': relationship '\(key)' was removed or made transient")
                    continue
                }
                if relationship.destination != now.destination || relationship.isToMany != now.isToMany
                    || relationship.inverse != now.inverse || relationship.isOrdered != now.isOrdered {
                    problems.append("entity '\(name)': relationship '\(key)' changed (destination, cardinality, order or inverse)")
                }
                if relationship.isOptional && !now.isOptional {
                    problems.append("entity '\(name)': relationship '\(key)' became required; stored objects may have none")
                }
            }
            for (key, attribute) in current.attributes.sorted(by: { $0.key < $1.key }) where old.attributes[key] == nil && !attribute.isOptional {
                problems.append("entity '\(name)': new attribute '\(key)' is required; existing objects have no value for it (make it optional)")
            }
            for (key, relationship) in current.relationships.sorted(by: { $0.key < $1.key }) where old.relationships[key] == nil {
                if !relationship.isOptional {
                    problems.append("entity '\(name)': new relationship '\(key)' is required; existing objects have none (make it optional)")
                }
                if let inverse = relationship.inverse, entities[relationship.destination]?.relationships[inverse] != nil {
                    problems.append("entity '\(name)': new relationship '\(key)' is the inverse of the existing '\(relationship.destination).\(inverse)', which changes how that one is stored")
                }
            }
        }
        return problems
    }
}
