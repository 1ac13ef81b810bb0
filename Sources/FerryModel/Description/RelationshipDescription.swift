/// A relationship from one entity to another.
public struct RelationshipDescription: Sendable, Hashable {
    /// The property name, unique within the entity and its ancestors.
    public var name: String
    /// The entity the relationship points at (may be a parent of the actual objects).
    public var destinationEntityName: String
    /// The relationship on the destination that points back, if modelled.
    public var inverseName: String?
    /// To-many relationships hold a set (or an ordered set); to-one hold one object or nil.
    public var isToMany: Bool
    /// For to-many relationships, whether the members keep an order.
    public var isOrdered: Bool
    /// Whether an empty relationship is valid at save.
    public var isOptional: Bool
    /// Lowest number of destinations for a to-many (0 = none), checked at save.
    public var minCount: Int
    /// Highest number of destinations for a to-many (0 = unbounded), checked at save.
    public var maxCount: Int
    /// What deleting the source does to the destinations.
    public var deleteRule: DeleteRule
    /// Transient relationships are not stored.
    public var isTransient: Bool
    /// Changes the version hash without changing the structure.
    public var versionHashModifier: String?
    /// The name this property had in the model version it was renamed from (Xcode's Renaming ID,
    /// written `elementID` in the model file); a migration carries the old property's values over.
    public var renamingIdentifier: String?
    /// Free-form key/value pairs from the model file.
    public var userInfo: [String: String]

    /// Creates a relationship. The default delete rule is Nullify, as in Core Data.
    public init(
        name: String,
        destination: String,
        inverse: String? = nil,
        isToMany: Bool = false,
        isOrdered: Bool = false,
        isOptional: Bool = true,
        minCount: Int = 0,
        maxCount: Int = 0,
        deleteRule: DeleteRule = .nullify,
        isTransient: Bool = false,
        versionHashModifier: String? = nil,
        renamingIdentifier: String? = nil,
        userInfo: [String: String] = [:]
    ) {
        self.name = name
        self.destinationEntityName = destination
        self.inverseName = inverse
        self.isToMany = isToMany
        self.isOrdered = isOrdered
        self.isOptional = isOptional
        self.minCount = minCount
        self.maxCount = maxCount
        self.deleteRule = deleteRule
        self.isTransient = isTransient
        self.versionHashModifier = versionHashModifier
        self.renamingIdentifier = renamingIdentifier
        self.userInfo = userInfo
    }
}

/// A read-only, predicate-based property: the objects of `entityName`
/// that match `predicate` (which may use `$FETCH_SOURCE`).
public struct FetchedPropertyDescription: Sendable, Hashable {
    /// The property name.
    public var name: String
    /// The entity whose objects are fetched.
    public var entityName: String
    /// The predicate in Core Data's format-string syntax.
    public var predicate: String?
    /// Free-form key/value pairs from the model file.
    public var userInfo: [String: String]

    /// Creates a fetched property.
    public init(name: String, entityName: String, predicate: String? = nil, userInfo: [String: String] = [:]) {
        self.name = name
        self.entityName = entityName
        self.predicate = predicate
        self.userInfo = userInfo
    }
}

/// A named fetch request stored in the model, with `$VARIABLE`s to substitute.
public struct FetchRequestTemplate: Sendable, Hashable {
    /// The template's name, unique within the model.
    public var name: String
    /// The entity it fetches.
    public var entityName: String
    /// The predicate in Core Data's format-string syntax; nil fetches everything.
    public var predicate: String?
    /// The fetch limit (0 = none).
    public var fetchLimit: Int

    /// Creates a template.
    public init(name: String, entityName: String, predicate: String? = nil, fetchLimit: Int = 0) {
        self.name = name
        self.entityName = entityName
        self.predicate = predicate
        self.fetchLimit = fetchLimit
    }
}
