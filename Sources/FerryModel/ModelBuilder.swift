/// A concise way to describe a model in Swift.
///
/// ```swift
/// let model = try ManagedObjectModel {
///     Entity("Person") {
///         Attribute("name", .string, optional: false)
///         Attribute("id", .integer16, default: .integer(0))
///         Relationship("manager", to: "Person", inverse: "employees")
///         Relationship("employees", to: "Person", inverse: "manager", toMany: true)
///     }
///     FetchTemplate("byName", entity: "Person", predicate: "name == $NAME")
/// }
/// ```
@resultBuilder
public enum ModelBuilder {
    // The result-builder protocol: entities and templates are collected in order.
    public static func buildExpression(_ entity: Entity) -> [ModelComponent] { [.entity(entity.description)] }
    public static func buildExpression(_ template: FetchTemplate) -> [ModelComponent] { [.template(template.template)] }
    public static func buildBlock(_ parts: [ModelComponent]...) -> [ModelComponent] { parts.flatMap { $0 } }
    public static func buildArray(_ parts: [[ModelComponent]]) -> [ModelComponent] { parts.flatMap { $0 } }
    public static func buildOptional(_ part: [ModelComponent]?) -> [ModelComponent] { part ?? [] }
    public static func buildEither(first: [ModelComponent]) -> [ModelComponent] { first }
    public static func buildEither(second: [ModelComponent]) -> [ModelComponent] { second }
}

/// One piece of a model built with ``ModelBuilder``.
public enum ModelComponent: Sendable {
    case entity(EntityDescription)
    case template(FetchRequestTemplate)
}

/// Collects the properties of an ``Entity``.
@resultBuilder
public enum EntityBuilder {
    // The result-builder protocol: attributes and relationships are collected in order.
    public static func buildExpression(_ attribute: Attribute) -> [PropertyDescription] { [.attribute(attribute.description)] }
    public static func buildExpression(_ relationship: Relationship) -> [PropertyDescription] { [.relationship(relationship.description)] }
    public static func buildBlock(_ parts: [PropertyDescription]...) -> [PropertyDescription] { parts.flatMap { $0 } }
    public static func buildArray(_ parts: [[PropertyDescription]]) -> [PropertyDescription] { parts.flatMap { $0 } }
    public static func buildOptional(_ part: [PropertyDescription]?) -> [PropertyDescription] { part ?? [] }
    public static func buildEither(first: [PropertyDescription]) -> [PropertyDescription] { first }
    public static func buildEither(second: [PropertyDescription]) -> [PropertyDescription] { second }
}

/// An entity in a ``ModelBuilder`` block.
public struct Entity: Sendable {
    /// The resulting description.
    public let description: EntityDescription

    /// Declares an entity with its own properties.
    public init(
        _ name: String,
        parent: String? = nil,
        abstract: Bool = false,
        uniquenessConstraints: [[String]] = [],
        renamedFrom renamingIdentifier: String? = nil,
        userInfo: [String: String] = [:],
        @EntityBuilder properties: () -> [PropertyDescription] = { [] }
    ) {
        let all = properties()
        description = EntityDescription(
            name: name, parent: parent, isAbstract: abstract,
            attributes: all.compactMap(\.attribute),
            relationships: all.compactMap(\.relationship),
            uniquenessConstraints: uniquenessConstraints,
            renamingIdentifier: renamingIdentifier,
            userInfo: userInfo
        )
    }
}

/// An attribute in an ``Entity`` block. Attributes are optional unless `optional: false`.
public struct Attribute: Sendable {
    /// The resulting description.
    public let description: AttributeDescription

    /// Declares an attribute.
    public init(
        _ name: String,
        _ type: AttributeType,
        optional: Bool = true,
        transient: Bool = false,
        default defaultValue: AttributeValue? = nil,
        minimum: AttributeValue? = nil,
        maximum: AttributeValue? = nil,
        regularExpression: String? = nil,
        indexed: Bool = false,
        renamedFrom renamingIdentifier: String? = nil,
        userInfo: [String: String] = [:]
    ) {
        description = AttributeDescription(
            name: name, type: type, isOptional: optional, isTransient: transient,
            defaultValue: defaultValue,
            validation: AttributeValidation(minimum: minimum, maximum: maximum, regularExpression: regularExpression),
            isIndexed: indexed, renamingIdentifier: renamingIdentifier, userInfo: userInfo
        )
    }

    /// Declares a derived attribute: the store computes its value at every save from
    /// `expression` (see ``Derivation`` for the forms), as Core Data's derived attributes.
    /// A model holding an expression Ferry cannot compute does not build.
    public init(
        _ name: String,
        _ type: AttributeType,
        derivedFrom expression: String,
        indexed: Bool = false,
        renamedFrom renamingIdentifier: String? = nil
    ) {
        description = AttributeDescription(
            name: name, type: type, isIndexed: indexed, renamingIdentifier: renamingIdentifier,
            derivation: Derivation(expression: expression)
        )
    }
}

/// A relationship in an ``Entity`` block. Relationships are optional with
/// the Nullify rule unless told otherwise.
public struct Relationship: Sendable {
    /// The resulting description.
    public let description: RelationshipDescription

    /// Declares a relationship.
    public init(
        _ name: String,
        to destination: String,
        inverse: String? = nil,
        toMany: Bool = false,
        ordered: Bool = false,
        optional: Bool = true,
        minCount: Int = 0,
        maxCount: Int = 0,
        deleteRule: DeleteRule = .nullify,
        renamedFrom renamingIdentifier: String? = nil,
        userInfo: [String: String] = [:]
    ) {
        description = RelationshipDescription(
            name: name, destination: destination, inverse: inverse, isToMany: toMany,
            isOrdered: ordered, isOptional: optional, minCount: minCount, maxCount: maxCount,
            deleteRule: deleteRule, renamingIdentifier: renamingIdentifier, userInfo: userInfo
        )
    }
}

/// A fetch request template in a ``ModelBuilder`` block.
public struct FetchTemplate: Sendable {
    /// The resulting template.
    public let template: FetchRequestTemplate

    /// Declares a template whose predicate may use `$VARIABLE`s.
    public init(_ name: String, entity: String, predicate: String? = nil, fetchLimit: Int = 0) {
        template = FetchRequestTemplate(name: name, entityName: entity, predicate: predicate, fetchLimit: fetchLimit)
    }
}

extension ManagedObjectModel {
    /// Builds and checks a model from a ``ModelBuilder`` block.
    public init(
        versionIdentifier: String? = nil,
        userInfo: [String: String] = [:],
        @ModelBuilder _ content: () -> [ModelComponent]
    ) throws(ModelError) {
        var entities: [EntityDescription] = []
        var templates: [FetchRequestTemplate] = []
        for component in content() {
            switch component {
            case .entity(let entity): entities.append(entity)
            case .template(let template): templates.append(template)
            }
        }
        try self.init(entities: entities, fetchRequestTemplates: templates, userInfo: userInfo, versionIdentifier: versionIdentifier)
    }
}
