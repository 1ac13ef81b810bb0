import FerryModel

/// What a context needs to know about an entity, computed once per container
/// so that inserts and property access are array lookups.
final class EntityRuntime: Sendable {
    let entity: EntityDescription
    let objectClass: ManagedObject.Type
    /// Property index → kind, for every property.
    let kinds: [PropertyKind]
    /// Values a new object starts with (defaults), by property index.
    let initialAttributes: [AttributeValue?]
    /// Property indexes of persistent attributes.
    let persistentAttributeIndexes: [Int]
    /// Property indexes of to-one and to-many relationships.
    let toOneIndexes: [Int]
    let toManyIndexes: [Int]
    /// For each relationship index, the inverse's property index in any destination object.
    let inverseIndex: [Int: Int]
    /// For each relationship index, how the store keeps it.
    let storage: [Int: RelationshipStorage]

    enum PropertyKind: Sendable, Equatable {
        case attribute(AttributeDescription)
        case toOne(RelationshipDescription)
        case toMany(RelationshipDescription)
    }

    init(entity: EntityDescription, model: ManagedObjectModel, objectClass: ManagedObject.Type) {
        self.entity = entity
        self.objectClass = objectClass
        var kinds: [PropertyKind] = []
        var initial: [AttributeValue?] = []
        var persistent: [Int] = []
        var toOne: [Int] = []
        var toMany: [Int] = []
        var inverse: [Int: Int] = [:]
        var storage: [Int: RelationshipStorage] = [:]
        for (index, property) in entity.properties.enumerated() {
            switch property {
            case .attribute(let attribute):
                kinds.append(.attribute(attribute))
                initial.append(attribute.defaultValue)
                if !attribute.isTransient { persistent.append(index) }
            case .relationship(let relationship):
                kinds.append(relationship.isToMany ? .toMany(relationship) : .toOne(relationship))
                initial.append(nil)
                if !relationship.isTransient {
                    if relationship.isToMany { toMany.append(index) } else { toOne.append(index) }
                }
                if let inverseName = relationship.inverseName,
                   let destination = model.entity(named: relationship.destinationEntityName),
                   let inverseIndex = destination.propertyIndex(named: inverseName) {
                    inverse[index] = inverseIndex
                }
                storage[index] = model.storage(of: relationship, in: entity)
            }
        }
        self.kinds = kinds
        self.initialAttributes = initial
        self.persistentAttributeIndexes = persistent
        self.toOneIndexes = toOne
        self.toManyIndexes = toMany
        self.inverseIndex = inverse
        self.storage = storage
    }

    func relationship(at index: Int) -> RelationshipDescription? {
        switch kinds[index] {
        case .toOne(let r), .toMany(let r): r
        case .attribute: nil
        }
    }
}
