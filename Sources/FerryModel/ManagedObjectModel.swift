import Foundation

/// A complete, checked description of an object graph: entities, their
/// properties and inheritance, and fetch request templates.
///
/// A model is a value: build it once (in code with ``ModelBuilder`` or from an
/// Xcode file with ``XcodeModelReader``) and share it freely. Building checks
/// that every parent, destination and inverse exists and agrees.
public struct ManagedObjectModel: Sendable, Hashable {
    /// All entities, sorted by name.
    public let entities: [EntityDescription]
    /// Named fetch request templates.
    public let fetchRequestTemplates: [String: FetchRequestTemplate]
    /// Named configurations (entity name lists) from the model file.
    public let configurations: [String: [String]]
    /// Free-form key/value pairs of the model.
    public let userInfo: [String: String]
    /// The model's own version label (Xcode's `userDefinedModelVersionIdentifier`).
    public let versionIdentifier: String?

    private let entityIndex: [String: Int]

    /// Builds and checks a model.
    /// - Throws: ``ModelError`` with code `.inconsistentModel` naming the entity and property at fault.
    public init(
        entities: [EntityDescription],
        fetchRequestTemplates: [FetchRequestTemplate] = [],
        configurations: [String: [String]] = [:],
        userInfo: [String: String] = [:],
        versionIdentifier: String? = nil
    ) throws(ModelError) {
        var byName: [String: EntityDescription] = [:]
        for entity in entities {
            guard !entity.name.isEmpty else {
                throw ModelError(.inconsistentModel, "an entity has an empty name")
            }
            try Self.checkIdentifier(entity.name, "entity '\(entity.name)'")
            for property in entity.ownAttributes.map(\.name) + entity.ownRelationships.map(\.name) + entity.ownFetchedProperties.map(\.name) {
                try Self.checkIdentifier(property, "entity '\(entity.name)' property '\(property)'")
            }
            guard byName[entity.name] == nil else {
                throw ModelError(.inconsistentModel, "entity '\(entity.name)' is defined twice; entity names must be unique")
            }
            byName[entity.name] = entity
        }
        let resolved = try ModelResolver(declared: byName).resolve()
        self.entities = resolved.sorted { $0.name < $1.name }
        self.entityIndex = Dictionary(uniqueKeysWithValues: self.entities.enumerated().map { ($1.name, $0) })
        var templates: [String: FetchRequestTemplate] = [:]
        for template in fetchRequestTemplates {
            guard byName[template.entityName] != nil else {
                throw ModelError(.inconsistentModel, "fetch request template '\(template.name)' fetches entity '\(template.entityName)', which does not exist")
            }
            guard templates[template.name] == nil else {
                throw ModelError(.inconsistentModel, "fetch request template '\(template.name)' is defined twice")
            }
            templates[template.name] = template
        }
        for (configuration, members) in configurations {
            for member in members where byName[member] == nil {
                throw ModelError(.inconsistentModel, "configuration '\(configuration)' lists entity '\(member)', which does not exist")
            }
        }
        self.fetchRequestTemplates = templates
        self.configurations = configurations
        self.userInfo = userInfo
        self.versionIdentifier = versionIdentifier
    }

    /// Names must be identifiers (a letter or `_`, then letters, digits or `_`),
    /// as Xcode's editor requires; they become SQL table and column names.
    static func checkIdentifier(_ name: String, _ place: String) throws(ModelError) {
        guard !name.isEmpty else { return }
        guard isIdentifier(name) else {
            throw ModelError(.inconsistentModel, "\(place): the name must start with a letter or _ and hold only ASCII letters, digits and _")
        }
    }

    /// Whether `name` is an identifier: a letter or `_`, then letters, digits or `_`, all ASCII.
    static func isIdentifier(_ name: String) -> Bool {
        let scalars = Array(name.unicodeScalars)
        func isLetter(_ c: Unicode.Scalar) -> Bool { c.isASCII && (c.properties.isAlphabetic || c == "_") }
        func isDigit(_ c: Unicode.Scalar) -> Bool { c.isASCII && ("0"..."9").contains(c) }
        guard let first = scalars.first, isLetter(first) else { return false }
        return scalars.dropFirst().allSatisfy { isLetter($0) || isDigit($0) }
    }

    /// The entity with this name, or nil.
    public func entity(named name: String) -> EntityDescription? {
        entityIndex[name].map { entities[$0] }
    }

    /// The entities with no parent, sorted by name.
    public var rootEntities: [EntityDescription] { entities.filter { $0.parentName == nil } }

    /// The fetch request template with this name, or nil.
    public func fetchRequestTemplate(named name: String) -> FetchRequestTemplate? {
        fetchRequestTemplates[name]
    }

    /// The entity (in `entity`'s ancestry) that declares property `name`.
    package func declaringEntityName(ofProperty name: String, in entity: EntityDescription) -> String {
        for ancestor in entity.ancestry {
            guard let candidate = self.entity(named: ancestor) else { continue }
            if candidate.ownAttributes.contains(where: { $0.name == name })
                || candidate.ownRelationships.contains(where: { $0.name == name }) {
                return ancestor
            }
        }
        return entity.name
    }

    /// Whether a to-many is kept in a join table written from its own side: a one-way to-many,
    /// or a many-to-many whose (declaring entity, name) sorts before its inverse's (the rule of
    /// `RelationshipStorage` in FerryStore, which the migration's inference needs too).
    package func writesOwnJoinTable(_ relationship: RelationshipDescription, of entity: EntityDescription) -> Bool {
        guard relationship.isToMany else { return false }
        guard let inverse = inverse(of: relationship), let destination = self.entity(named: relationship.destinationEntityName) else { return true }
        guard inverse.isToMany else { return false }
        return (declaringEntityName(ofProperty: relationship.name, in: entity), relationship.name)
            <= (declaringEntityName(ofProperty: inverse.name, in: destination), inverse.name)
    }

    /// The inverse of a relationship, if one is modelled.
    public func inverse(of relationship: RelationshipDescription) -> RelationshipDescription? {
        guard let inverseName = relationship.inverseName else { return nil }
        return entity(named: relationship.destinationEntityName)?.relationship(named: inverseName)
    }
}

/// Fills in inheritance and checks that the declared entities fit together.
private struct ModelResolver {
    let declared: [String: EntityDescription]

    func resolve() throws(ModelError) -> [EntityDescription] {
        var result: [String: EntityDescription] = [:]
        for name in declared.keys.sorted() {
            result[name] = try resolveEntity(name)
        }
        for name in declared.keys.sorted() {
            guard let entity = result[name] else { continue }
            let subentities = result.values
                .filter { $0.name != name && $0.ancestry.contains(name) }
                .map(\.name).sorted()
            result[name]?.subentityNames = subentities
            try checkRelationships(of: entity, in: result)
            try checkDerivations(of: entity, in: result)
        }
        return Array(result.values)
    }

    private func resolveEntity(_ name: String) throws(ModelError) -> EntityDescription {
        var chain: [String] = []
        var current: String? = name
        while let step = current {
            guard let entity = declared[step] else {
                let child = chain.last ?? name
                throw ModelError(.inconsistentModel, "entity '\(child)' has parent entity '\(step)', which does not exist")
            }
            if chain.contains(step) {
                throw ModelError(.inconsistentModel, "entity '\(name)' inherits from itself through \((chain + [step]).joined(separator: " → "))")
            }
            chain.append(step)
            current = entity.parentName
        }
        let ancestry = Array(chain.reversed())
        guard var entity = declared[name] else {
            throw ModelError(.inconsistentModel, "entity '\(name)' does not exist")
        }
        var properties: [PropertyDescription] = []
        var indexByName: [String: Int] = [:]
        for ancestorName in ancestry {
            guard let ancestor = declared[ancestorName] else { continue }
            let own = ancestor.ownAttributes.map(PropertyDescription.attribute)
                + ancestor.ownRelationships.map(PropertyDescription.relationship)
            for property in own {
                guard !property.name.isEmpty else {
                    throw ModelError(.inconsistentModel, "entity '\(ancestorName)' has a property with an empty name")
                }
                if indexByName[property.name] != nil {
                    throw ModelError(.inconsistentModel, "entity '\(name)' has two properties named '\(property.name)' (one may be inherited); " +
                                     "property names must be unique along the inheritance chain")
                }
                indexByName[property.name] = properties.count
                properties.append(property)
            }
        }
        for attribute in entity.ownAttributes {
            if let value = attribute.defaultValue, !value.fits(attribute.type) {
                throw ModelError(.inconsistentModel, "entity '\(name)' attribute '\(attribute.name)': " +
                                 "default value \(value.modelString) is not a valid \(attribute.type.xcodeName)")
            }
            if let pattern = attribute.validation.regularExpression, (try? NSRegularExpression(pattern: pattern)) == nil {
                throw ModelError(.inconsistentModel, "entity '\(name)' attribute '\(attribute.name)': regular expression '\(pattern)' does not compile")
            }
        }
        for constraint in entity.uniquenessConstraints {
            for key in constraint {
                guard let index = indexByName[key] else {
                    throw ModelError(.inconsistentModel, "entity '\(name)' has a uniqueness constraint on '\(key)', which is not one of its properties")
                }
                let property = properties[index]
                if !property.isPersistent || property.relationship?.isToMany == true {
                    throw ModelError(.inconsistentModel, "entity '\(name)' has a uniqueness constraint on '\(key)'; " +
                                     "constraints take stored attributes and to-one relationships only")
                }
            }
        }
        entity.properties = properties
        entity.indexByName = indexByName
        entity.ancestry = ancestry
        entity.rootName = ancestry.first ?? name
        return entity
    }

    private func checkRelationships(of entity: EntityDescription, in all: [String: EntityDescription]) throws(ModelError) {
        for relationship in entity.ownRelationships {
            let place = "entity '\(entity.name)' relationship '\(relationship.name)'"
            guard let destination = all[relationship.destinationEntityName] else {
                throw ModelError(.inconsistentModel, "\(place): destination entity '\(relationship.destinationEntityName)' does not exist")
            }
            if relationship.minCount < 0 || relationship.maxCount < 0 {
                throw ModelError(.inconsistentModel, "\(place): minCount and maxCount must not be negative")
            }
            if relationship.isToMany, relationship.maxCount > 0, relationship.minCount > relationship.maxCount {
                throw ModelError(.inconsistentModel, "\(place): minCount \(relationship.minCount) is above maxCount \(relationship.maxCount)")
            }
            if relationship.isOrdered && !relationship.isToMany {
                throw ModelError(.inconsistentModel, "\(place): only to-many relationships can be ordered")
            }
            guard let inverseName = relationship.inverseName else { continue }
            guard let inverse = destination.relationship(named: inverseName) else {
                throw ModelError(.inconsistentModel, "\(place): inverse '\(inverseName)' is not a relationship of '\(destination.name)'")
            }
            guard entity.ancestry.contains(inverse.destinationEntityName) else {
                throw ModelError(.inconsistentModel, "\(place): its inverse '\(destination.name).\(inverseName)' " +
                                 "points at '\(inverse.destinationEntityName)', not at '\(entity.name)' or one of its parents")
            }
            if let back = inverse.inverseName, back != relationship.name {
                throw ModelError(.inconsistentModel, "\(place): its inverse '\(destination.name).\(inverseName)' names '\(back)' as its own inverse; " +
                                 "the two must name each other")
            }
            if relationship.isTransient != inverse.isTransient {
                throw ModelError(.inconsistentModel, "\(place): a relationship and its inverse must both be transient or both persistent")
            }
        }
    }

    /// A derived attribute must read stored, non-derived attributes through relationships with an
    /// inverse (the inverse is how a save finds the objects whose value a change affects), and its
    /// type must hold what the expression computes.
    private func checkDerivations(of entity: EntityDescription, in all: [String: EntityDescription]) throws(ModelError) {
        for attribute in entity.ownAttributes {
            guard let derivation = attribute.derivation else { continue }
            let place = "entity '\(entity.name)' attribute '\(attribute.name)' (derived from '\(derivation.expression)')"
            func refuse(_ why: String) -> ModelError { ModelError(.inconsistentModel, "\(place): \(why)") }
            guard let form = derivation.form else { throw refuse(derivation.problem ?? "not a supported expression") }
            if attribute.isTransient { throw refuse("a derived attribute is stored; it cannot be transient") }
            var owner = entity
            if let name = derivation.relationship {
                guard let relationship = entity.relationship(named: name) else { throw refuse("'\(name)' is not a relationship of '\(entity.name)'") }
                let needsToMany: Bool = switch form { case .count, .sum: true; default: false }
                if relationship.isToMany != needsToMany {
                    throw refuse(needsToMany ? "@count and @sum take a to-many relationship; '\(name)' is to-one"
                                             : "a key path reads through a to-one relationship; '\(name)' is to-many (use @count or @sum)")
                }
                if relationship.isTransient { throw refuse("'\(name)' is transient") }
                if relationship.inverseName == nil {
                    throw refuse("'\(name)' has no inverse; give it one, so that a change on its destination updates the derived value")
                }
                guard let destination = all[relationship.destinationEntityName] else { return }
                owner = destination
            }
            var source: AttributeDescription?
            if let name = derivation.sourceAttribute {
                guard let found = owner.attribute(named: name) else { throw refuse("'\(name)' is not an attribute of '\(owner.name)'") }
                if found.isTransient || found.derivation != nil {
                    throw refuse("it reads '\(owner.name).\(name)', which is \(found.isTransient ? "transient" : "derived itself")")
                }
                source = found
            }
            let fits: Bool = switch form {
            case .value: source?.type == attribute.type
            case .uppercase, .lowercase, .canonical: source?.type == .string && attribute.type == .string
            case .count: attribute.type.isInteger
            case .sum: source?.type.isNumeric == true && attribute.type.isNumeric
            case .now: attribute.type == .date
            }
            if !fits {
                let computed: String = switch form {
                case .value: source?.type.xcodeName ?? "?"
                case .uppercase, .lowercase, .canonical: "String (from a String)"
                case .count: "an Integer"
                case .sum: "a number (from a number attribute)"
                case .now: "a Date"
                }
                throw refuse("it computes \(computed), and the attribute is \(attribute.type.xcodeName)")
            }
        }
    }
}
