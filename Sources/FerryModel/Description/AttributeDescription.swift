import Foundation

/// A typed attribute of an entity.
public struct AttributeDescription: Sendable, Hashable {
    /// The property name, unique within the entity and its ancestors.
    public var name: String
    /// The storage type.
    public var type: AttributeType
    /// Whether nil is a valid value (checked at save).
    public var isOptional: Bool
    /// Transient attributes live in memory only: never stored, never synced.
    public var isTransient: Bool
    /// The value a newly inserted object starts with.
    public var defaultValue: AttributeValue?
    /// Model-level validation rules checked at save.
    public var validation: AttributeValidation
    /// Whether the store keeps an index on the column.
    public var isIndexed: Bool
    /// For transformable attributes, the transformer's name (informational).
    public var valueTransformerName: String?
    /// Whether the last value is kept in the tombstone when the object is deleted.
    public var preservesValueInHistoryOnDeletion: Bool
    /// Changes the version hash without changing the structure (Core Data's `versionHashModifier`).
    public var versionHashModifier: String?
    /// The name this property had in the model version it was renamed from (Xcode's Renaming ID,
    /// written `elementID` in the model file); a migration carries the old property's values over.
    public var renamingIdentifier: String?
    /// For a derived attribute, how the store computes its value at every save (see ``Derivation``).
    public var derivation: Derivation?
    /// Free-form key/value pairs from the model file; never affects behaviour.
    public var userInfo: [String: String]

    /// Whether the attribute's values are recorded in change sets and replicated: stored
    /// attributes except those every replica derives itself (``Derivation/isComputedOnEveryReplica``).
    public var isReplicated: Bool { !isTransient && derivation?.isComputedOnEveryReplica != true }

    /// Creates an attribute. Attributes are optional by default, as in Xcode's editor.
    public init(
        name: String,
        type: AttributeType,
        isOptional: Bool = true,
        isTransient: Bool = false,
        defaultValue: AttributeValue? = nil,
        validation: AttributeValidation = AttributeValidation(),
        isIndexed: Bool = false,
        valueTransformerName: String? = nil,
        preservesValueInHistoryOnDeletion: Bool = false,
        versionHashModifier: String? = nil,
        renamingIdentifier: String? = nil,
        derivation: Derivation? = nil,
        userInfo: [String: String] = [:]
    ) {
        self.name = name
        self.type = type
        self.isOptional = isOptional
        self.isTransient = isTransient
        self.defaultValue = defaultValue
        self.validation = validation
        self.isIndexed = isIndexed
        self.valueTransformerName = valueTransformerName
        self.preservesValueInHistoryOnDeletion = preservesValueInHistoryOnDeletion
        self.versionHashModifier = versionHashModifier
        self.renamingIdentifier = renamingIdentifier
        self.derivation = derivation
        self.userInfo = userInfo
    }
}

/// Validation rules of one attribute, as Xcode's model editor offers them.
///
/// For numbers `minimum`/`maximum` bound the value; for dates they bound the
/// date; for strings they bound the length in characters, as in Core Data.
public struct AttributeValidation: Sendable, Hashable {
    /// Lower bound: a number, a date, or a string length (as `.integer`).
    public var minimum: AttributeValue?
    /// Upper bound: a number, a date, or a string length (as `.integer`).
    public var maximum: AttributeValue?
    /// For strings, a regular expression the whole value must match.
    public var regularExpression: String?

    /// Creates a set of rules; all are optional.
    public init(minimum: AttributeValue? = nil, maximum: AttributeValue? = nil, regularExpression: String? = nil) {
        self.minimum = minimum
        self.maximum = maximum
        self.regularExpression = regularExpression
    }

    /// Whether no rule is set.
    public var isEmpty: Bool { minimum == nil && maximum == nil && regularExpression == nil }
}
