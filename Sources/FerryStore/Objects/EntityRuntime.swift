import FerryModel

/// What a context needs to know about an entity, computed once per container
/// so that inserts and property access are array lookups.
final class EntityRuntime: Sendable {
    let entity: EntityDescription
    let name: String
    let ancestry: [String]
    private let indexByName: [String: Int]
    private let names: [String]
    let objectClass: ManagedObject.Type
    /// Property index → kind, for every property.
    let kinds: [PropertyKind]
    /// Values a new object starts with (defaults), by property index.
    let initialAttributes: [AttributeValue?]
    /// All-nil arrays that new objects and faults share until their first write.
    let emptyToOne: [Int?]
    let emptyAttributes: [AttributeValue?]
    /// The all-nil to-one destinations that the save requests' inserts with none set share (an
    /// array of its own per insert is some 220 bytes for the benchmarks' Person: 22 MB for 100,000 new objects).
    let emptyDestinations: [ObjectID?]
    /// Property indexes of persistent attributes.
    let persistentAttributeIndexes: [Int]
    /// Property indexes of to-one and to-many relationships.
    let toOneIndexes: [Int]
    let toManyIndexes: [Int]
    /// By property index: the inverse's property index in any destination object (relationships with an inverse).
    let inverseIndex: [Int?]
    /// By property index: how the store keeps a relationship (nil for attributes).
    let storage: [RelationshipStorage?]
    /// By property index: whether the property is a transient attribute.
    let isTransientAttribute: [Bool]
    /// Whether any attribute is transient (then saves copy only the persistent ones).
    let hasTransientAttributes: Bool
    /// Whether objects of the entity are of a subclass, whose lifecycle hooks a context calls
    /// (``ManagedObject`` itself has none to call).
    let hasCustomClass: Bool
    /// Whether objects of the entity are of a subclass that adopts ``KeyValidating``, whose
    /// per-key hook a save calls.
    let validatesKeys: Bool
    /// Whether any property has a model rule (required, bounds, pattern, counts) to check at save.
    let hasModelRules: Bool
    /// The entity's derived attributes, resolved to property indexes.
    let derivations: [DerivedAttribute]
    /// Where a change to one of this entity's objects makes derived values of other objects stale.
    let derivationDependents: [DerivationDependent]

    /// Payloads are classes so that switching over a kind costs one retain,
    /// not a copy of a whole description.
    enum PropertyKind: Sendable {
        case attribute(AttributeInfo)
        case toOne(RelationshipInfo)
        case toMany(RelationshipInfo)
    }

    init(entity: EntityDescription, model: ManagedObjectModel, objectClass: ManagedObject.Type) {
        self.entity = entity
        self.name = entity.name
        self.ancestry = entity.ancestry
        self.indexByName = Dictionary(uniqueKeysWithValues: entity.properties.enumerated().map { ($1.name, $0) })
        self.names = entity.properties.map(\.name)
        self.objectClass = objectClass
        self.hasCustomClass = ObjectIdentifier(objectClass) != ObjectIdentifier(ManagedObject.self)
        self.validatesKeys = objectClass is any KeyValidating.Type
        var kinds: [PropertyKind] = []
        var initial: [AttributeValue?] = []
        var persistent: [Int] = []
        var toOne: [Int] = []
        var toMany: [Int] = []
        var inverse = [Int?](repeating: nil, count: entity.properties.count)
        var storage = [RelationshipStorage?](repeating: nil, count: entity.properties.count)
        for (index, property) in entity.properties.enumerated() {
            switch property {
            case .attribute(let attribute):
                kinds.append(.attribute(AttributeInfo(attribute)))
                initial.append(attribute.defaultValue)
                if !attribute.isTransient { persistent.append(index) }
            case .relationship(let relationship):
                let info = RelationshipInfo(relationship)
                kinds.append(relationship.isToMany ? .toMany(info) : .toOne(info))
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
        self.hasTransientAttributes = entity.attributes.contains { $0.isTransient }
        self.hasModelRules = entity.attributes.contains { !$0.isOptional || !$0.validation.isEmpty }
            || entity.relationships.contains { !$0.isOptional || $0.minCount > 0 || $0.maxCount > 0 }
        self.initialAttributes = initial
        self.emptyToOne = Array(repeating: nil, count: kinds.count)
        self.emptyAttributes = Array(repeating: nil, count: kinds.count)
        self.emptyDestinations = Array(repeating: nil, count: kinds.count)
        self.persistentAttributeIndexes = persistent
        self.toOneIndexes = toOne
        self.toManyIndexes = toMany
        self.inverseIndex = inverse
        self.storage = storage
        self.isTransientAttribute = entity.properties.map { $0.attribute?.isTransient ?? false }
        self.derivations = DerivedAttribute.all(of: entity, in: model)
        self.derivationDependents = DerivationDependent.all(of: entity, in: model)
    }

    func relationship(at index: Int) -> RelationshipInfo? {
        switch kinds[index] {
        case .toOne(let r), .toMany(let r): r
        case .attribute: nil
        }
    }

    /// The index of a property by name. Small entities are scanned: short Swift
    /// strings compare by their raw bits, which is cheaper than hashing.
    func propertyIndex(named name: String) -> Int? {
        if names.count <= 16 { return names.firstIndex(of: name) }
        return indexByName[name]
    }

    /// Whether this entity is `name` or one of its subentities.
    func isKind(of name: String) -> Bool {
        self.name == name || ancestry.contains(name)
    }
}

/// The parts of an attribute description a context reads on every access.
final class AttributeInfo: Sendable {
    let name: String
    let type: AttributeType
    let isOptional: Bool
    let isTransient: Bool
    let defaultValue: AttributeValue?
    let validation: AttributeValidation

    init(_ description: AttributeDescription) {
        name = description.name
        type = description.type
        isOptional = description.isOptional
        isTransient = description.isTransient
        defaultValue = description.defaultValue
        validation = description.validation
    }
}

/// The parts of a relationship description a context reads on every access.
final class RelationshipInfo: Sendable {
    let name: String
    let destinationEntityName: String
    let inverseName: String?
    let isToMany: Bool
    let isOrdered: Bool
    let isOptional: Bool
    let minCount: Int
    let maxCount: Int
    let deleteRule: DeleteRule
    let isTransient: Bool

    init(_ description: RelationshipDescription) {
        name = description.name
        destinationEntityName = description.destinationEntityName
        inverseName = description.inverseName
        isToMany = description.isToMany
        isOrdered = description.isOrdered
        isOptional = description.isOptional
        minCount = description.minCount
        maxCount = description.maxCount
        deleteRule = description.deleteRule
        isTransient = description.isTransient
    }
}

/// A derived attribute of an entity, its expression resolved to property indexes.
struct DerivedAttribute: Sendable {
    /// The derived attribute's property index.
    let index: Int
    let type: AttributeType
    let form: Derivation.Form
    /// The relationship read through (on the object), if any.
    let relationshipIndex: Int?
    /// The attribute read (on the object, or on the relationship's destinations), if any.
    let sourceIndex: Int?
    let isComputedOnEveryReplica: Bool

    static func all(of entity: EntityDescription, in model: ManagedObjectModel) -> [DerivedAttribute] {
        entity.properties.enumerated().compactMap { index, property in
            guard let attribute = property.attribute, let derivation = attribute.derivation, let form = derivation.form else { return nil }
            var owner: EntityDescription? = entity
            var relationshipIndex: Int?
            if let name = derivation.relationship {
                relationshipIndex = entity.propertyIndex(named: name)
                owner = entity.relationship(named: name).flatMap { model.entity(named: $0.destinationEntityName) }
            }
            // (Subentities list their parents' properties first, so an index holds in every destination.)
            let sourceIndex = derivation.sourceAttribute.flatMap { owner?.propertyIndex(named: $0) }
            return DerivedAttribute(index: index, type: attribute.type, form: form, relationshipIndex: relationshipIndex,
                                    sourceIndex: sourceIndex, isComputedOnEveryReplica: derivation.isComputedOnEveryReplica)
        }
    }
}

/// How a change to an object reaches the objects whose derived values read it: through
/// the inverse of the relationship the derivation reads through.
struct DerivationDependent: Sendable {
    /// The property index, on the changed object, of the relationship back to the dependent objects.
    let inverseIndex: Int
    /// The attribute whose change matters. (A change of membership needs no entry: it marks
    /// the dependent object itself as changed, through the inverse.)
    let sourceIndex: Int

    static func all(of entity: EntityDescription, in model: ManagedObjectModel) -> [DerivationDependent] {
        var result: [DerivationDependent] = []
        for owner in model.entities {
            for attribute in owner.ownAttributes {
                guard let derivation = attribute.derivation, let name = derivation.relationship,
                      let relationship = owner.relationship(named: name), let inverse = relationship.inverseName,
                      entity.name == relationship.destinationEntityName || entity.ancestry.contains(relationship.destinationEntityName),
                      let inverseIndex = entity.propertyIndex(named: inverse),
                      let source = derivation.sourceAttribute, let sourceIndex = entity.propertyIndex(named: source) else { continue }
                result.append(DerivationDependent(inverseIndex: inverseIndex, sourceIndex: sourceIndex))
            }
        }
        return result
    }
}
