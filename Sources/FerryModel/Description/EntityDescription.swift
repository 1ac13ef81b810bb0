/// An entity: a kind of object with attributes and relationships.
///
/// You describe an entity with its *own* properties and an optional parent.
/// Once it is part of a ``ManagedObjectModel``, the model fills in the
/// inherited properties and the subentities, which the resolved accessors
/// (``properties``, ``attributesByName`` …) read.
public struct EntityDescription: Sendable, Hashable {
    /// The entity name, unique within the model.
    public var name: String
    /// The parent entity's name, nil for a root entity.
    public var parentName: String?
    /// Abstract entities cannot be instantiated; fetches still return their subentities.
    public var isAbstract: Bool
    /// The class name in the source model (informational on Linux).
    public var className: String?
    /// The entity's own attributes (not inherited ones).
    public var ownAttributes: [AttributeDescription]
    /// The entity's own relationships (not inherited ones).
    public var ownRelationships: [RelationshipDescription]
    /// The entity's own fetched properties.
    public var ownFetchedProperties: [FetchedPropertyDescription]
    /// Groups of attribute names whose combined values should be unique.
    public var uniquenessConstraints: [[String]]
    /// Changes the version hash without changing the structure.
    public var versionHashModifier: String?
    /// The name this entity had in the model version it was renamed from (Xcode's Renaming ID,
    /// written `elementID` in the model file); a migration keeps its objects under the new name.
    public var renamingIdentifier: String?
    /// Free-form key/value pairs from the model file.
    public var userInfo: [String: String]

    // Filled in by ManagedObjectModel.
    /// All properties, inherited ones first, in declaration order. Set by the model.
    public internal(set) var properties: [PropertyDescription] = []
    /// The names of the direct and indirect subentities. Set by the model.
    public internal(set) var subentityNames: [String] = []
    /// The root of this entity's inheritance chain (itself for a root). Set by the model.
    public internal(set) var rootName: String = ""
    /// The chain from the root down to this entity. Set by the model.
    public internal(set) var ancestry: [String] = []
    var indexByName: [String: Int] = [:]

    /// Creates an entity from its own properties.
    public init(
        name: String,
        parent: String? = nil,
        isAbstract: Bool = false,
        className: String? = nil,
        attributes: [AttributeDescription] = [],
        relationships: [RelationshipDescription] = [],
        fetchedProperties: [FetchedPropertyDescription] = [],
        uniquenessConstraints: [[String]] = [],
        versionHashModifier: String? = nil,
        renamingIdentifier: String? = nil,
        userInfo: [String: String] = [:]
    ) {
        self.name = name
        self.parentName = parent
        self.isAbstract = isAbstract
        self.className = className
        self.ownAttributes = attributes
        self.ownRelationships = relationships
        self.ownFetchedProperties = fetchedProperties
        self.uniquenessConstraints = uniquenessConstraints
        self.versionHashModifier = versionHashModifier
        self.renamingIdentifier = renamingIdentifier
        self.userInfo = userInfo
    }

    /// The position of a property in ``properties``; stable for a given model.
    public func propertyIndex(named name: String) -> Int? { indexByName[name] }

    /// The property with this name, inherited or own.
    public func property(named name: String) -> PropertyDescription? {
        indexByName[name].map { properties[$0] }
    }

    /// The attribute with this name, inherited or own.
    public func attribute(named name: String) -> AttributeDescription? {
        property(named: name)?.attribute
    }

    /// The relationship with this name, inherited or own.
    public func relationship(named name: String) -> RelationshipDescription? {
        property(named: name)?.relationship
    }

    /// All attributes, inherited first.
    public var attributes: [AttributeDescription] { properties.compactMap(\.attribute) }

    /// All relationships, inherited first.
    public var relationships: [RelationshipDescription] { properties.compactMap(\.relationship) }

    /// Whether `other` is this entity or one of its subentities.
    public func isKind(of other: String) -> Bool { ancestry.contains(other) }
}

/// A property of an entity: an attribute or a relationship.
public enum PropertyDescription: Sendable, Hashable {
    case attribute(AttributeDescription)
    case relationship(RelationshipDescription)

    /// The property's name.
    public var name: String {
        switch self {
        case .attribute(let a): a.name
        case .relationship(let r): r.name
        }
    }

    /// The name it had before a rename (Xcode's Renaming ID), if any.
    public var renamingIdentifier: String? {
        switch self {
        case .attribute(let a): a.renamingIdentifier
        case .relationship(let r): r.renamingIdentifier
        }
    }

    /// The attribute, if this property is one.
    public var attribute: AttributeDescription? {
        if case .attribute(let a) = self { return a }
        return nil
    }

    /// The relationship, if this property is one.
    public var relationship: RelationshipDescription? {
        if case .relationship(let r) = self { return r }
        return nil
    }

    /// Whether the property is kept in the store (not transient).
    public var isPersistent: Bool {
        switch self {
        case .attribute(let a): !a.isTransient
        case .relationship(let r): !r.isTransient
        }
    }
}
