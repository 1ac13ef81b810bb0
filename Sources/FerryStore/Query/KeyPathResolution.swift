import FerryModel

/// A key path checked against the model: zero or more to-one hops, then a final property.
package struct ResolvedKeyPath: Sendable, Hashable {
    /// The to-one relationships followed, in order.
    package var hops: [RelationshipDescription]
    /// The entity the last step belongs to.
    package var finalEntity: EntityDescription
    /// The last property: an attribute or a to-one relationship.
    package var final: PropertyDescription

    /// Resolves `keyPath` from `entity`, or throws a ``QueryError`` naming the bad step.
    package static func resolve(_ keyPath: String, from entity: EntityDescription, in model: ManagedObjectModel) throws(QueryError) -> ResolvedKeyPath {
        let (hops, current, last) = try walkToOnes(keyPath, from: entity, in: model)
        guard let property = current.property(named: last) else {
            throw QueryError.unknownKey(entity: current.name, key: last, keyPath: keyPath)
        }
        if let relationship = property.relationship, relationship.isToMany {
            throw QueryError.toManyKeyNotAllowed(entity: current.name, key: last, keyPath: keyPath)
        }
        return ResolvedKeyPath(hops: hops, finalEntity: current, final: property)
    }

    /// Checks that this key path's value can be compared with `other`'s by `op`:
    /// two numbers, two attributes of one type (ordered only for strings and
    /// dates), or two to-ones into one entity family (equality only).
    package func checkComparable(with other: ResolvedKeyPath, _ op: ComparisonOperator, keyPath: String, otherKeyPath: String,
                                 entity: String, model: ManagedObjectModel) throws(QueryError) {
        let isEquality = op == .equal || op == .notEqual
        switch (final, other.final) {
        case (.attribute(let a), .attribute(let b)):
            if a.type.isNumeric && b.type.isNumeric { return }
            if a.type == b.type, isEquality || a.type == .string || a.type == .date { return }
            let what = a.type == b.type ? "\(a.type.xcodeName) values cannot be ordered" : "a \(a.type.xcodeName) cannot be compared with a \(b.type.xcodeName)"
            throw QueryError.typeMismatch(entity: entity, keyPath: keyPath, expected: a.type.xcodeName,
                                          value: "'\(otherKeyPath)' (\(b.type.xcodeName)) with \(op.rawValue): \(what)")
        case (.relationship(let a), .relationship(let b)):
            let rootA = model.entity(named: a.destinationEntityName)?.rootName
            let rootB = model.entity(named: b.destinationEntityName)?.rootName
            guard isEquality, rootA != nil, rootA == rootB else {
                throw QueryError.typeMismatch(entity: entity, keyPath: keyPath, expected: "a \(a.destinationEntityName) object",
                                              value: "'\(otherKeyPath)' (a \(b.destinationEntityName) object) with \(op.rawValue); " +
                                                  "objects compare with == or != within one entity family")
            }
        case (.attribute(let a), .relationship(let b)):
            throw QueryError.typeMismatch(entity: entity, keyPath: keyPath, expected: a.type.xcodeName,
                                          value: "'\(otherKeyPath)' (a \(b.destinationEntityName) object)")
        case (.relationship(let a), .attribute(let b)):
            throw QueryError.typeMismatch(entity: entity, keyPath: keyPath, expected: "a \(a.destinationEntityName) object",
                                          value: "'\(otherKeyPath)' (\(b.type.xcodeName))")
        }
    }
}

/// A key path that ends in a to-many relationship: to-one hops, then the to-many.
package struct ToManyKeyPath: Sendable {
    package var hops: [RelationshipDescription]
    package var owner: EntityDescription
    package var relationship: RelationshipDescription
    package var destination: EntityDescription

    package static func resolve(_ keyPath: String, from entity: EntityDescription, in model: ManagedObjectModel) throws(QueryError) -> ToManyKeyPath {
        let (hops, owner, last) = try walkToOnes(keyPath, from: entity, in: model)
        guard let relationship = owner.relationship(named: last) else {
            if owner.property(named: last) != nil { throw QueryError.notARelationship(entity: owner.name, key: last, keyPath: keyPath) }
            throw QueryError.unknownKey(entity: owner.name, key: last, keyPath: keyPath)
        }
        guard relationship.isToMany else {
            throw QueryError.typeMismatch(entity: entity.name, keyPath: keyPath, expected: "a to-many relationship at the end", value: "a to-one key path")
        }
        guard let destination = model.entity(named: relationship.destinationEntityName) else {
            throw QueryError.unknownKey(entity: owner.name, key: last, keyPath: keyPath)
        }
        return ToManyKeyPath(hops: hops, owner: owner, relationship: relationship, destination: destination)
    }
}

/// Follows every step of `keyPath` but the last as a to-one relationship; returns
/// the relationships followed, the entity reached, and the last step.
private func walkToOnes(_ keyPath: String, from entity: EntityDescription, in model: ManagedObjectModel) throws(QueryError)
    -> (hops: [RelationshipDescription], entity: EntityDescription, last: String) {
    let steps = keyPath.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
    var current = entity
    var hops: [RelationshipDescription] = []
    for step in steps.dropLast() {
        guard let property = current.property(named: step) else {
            throw QueryError.unknownKey(entity: current.name, key: step, keyPath: keyPath)
        }
        guard let relationship = property.relationship else {
            throw QueryError.notARelationship(entity: current.name, key: step, keyPath: keyPath)
        }
        guard !relationship.isToMany else {
            throw QueryError.toManyKeyNotAllowed(entity: current.name, key: step, keyPath: keyPath)
        }
        guard let next = model.entity(named: relationship.destinationEntityName) else {
            throw QueryError.unknownKey(entity: current.name, key: step, keyPath: keyPath)
        }
        hops.append(relationship)
        current = next
    }
    return (hops, current, steps.last ?? keyPath)
}

/// Why a fetch request cannot run.
public enum QueryError: Error, Sendable, Hashable, CustomStringConvertible {
    /// A key path names a property the entity does not have.
    case unknownKey(entity: String, key: String, keyPath: String)
    /// A key path continues past an attribute.
    case notARelationship(entity: String, key: String, keyPath: String)
    /// A to-many relationship appears where one value is needed; use ANY/ALL.
    case toManyKeyNotAllowed(entity: String, key: String, keyPath: String)
    /// The constant cannot be compared with the key path's type.
    case typeMismatch(entity: String, keyPath: String, expected: String, value: String)
    /// The fetch names an entity the model does not have.
    case unknownEntity(String)
    /// A MATCHES pattern is not a valid ICU regular expression.
    case invalidRegularExpression(entity: String, keyPath: String, pattern: String)
    /// An aggregate fetch (``FetchRequest/expressions``, ``FetchRequest/propertiesToGroupBy``) that
    /// cannot be computed: `name` is the key path or expression name at fault, `reason` says why and what to do.
    case invalidAggregate(entity: String, name: String, reason: String)

    public var description: String {
        switch self {
        case .unknownKey(let entity, let key, let keyPath):
            "key path '\(keyPath)': entity '\(entity)' has no property '\(key)'"
        case .notARelationship(let entity, let key, let keyPath):
            "key path '\(keyPath)': '\(entity).\(key)' is an attribute, so the path cannot continue past it"
        case .toManyKeyNotAllowed(let entity, let key, let keyPath):
            "key path '\(keyPath)': '\(entity).\(key)' is a to-many relationship, not allowed here (use ANY or ALL)"
        case .typeMismatch(let entity, let keyPath, let expected, let value):
            "key path '\(keyPath)' of entity '\(entity)' holds \(expected); cannot compare it with \(value)"
        case .unknownEntity(let name):
            "the model has no entity named '\(name)'"
        case .invalidRegularExpression(let entity, let keyPath, let pattern):
            "key path '\(keyPath)' of entity '\(entity)': MATCHES pattern '\(pattern)' is not a valid regular expression"
        case .invalidAggregate(let entity, let name, let reason):
            "aggregate fetch of entity '\(entity)': '\(name)' \(reason)"
        }
    }
}

extension PredicateValue {
    /// Checks that the constant can be compared with the key path's final property.
    package func check(against path: ResolvedKeyPath, keyPath: String, entity: String) throws(QueryError) {
        switch (self, path.final) {
        case (.null, _):
            return
        case (.attribute(let value), .attribute(let attribute)):
            let compatible = value.fits(attribute.type)
                || (attribute.type.isNumeric && value.numericValue != nil)
                || (attribute.type == .transformable && value.naturalType == .binaryData)
            if !compatible {
                throw QueryError.typeMismatch(entity: entity, keyPath: keyPath, expected: attribute.type.xcodeName, value: "\(value)")
            }
        case (.object, .relationship):
            return
        case (_, .attribute(let attribute)):
            throw QueryError.typeMismatch(entity: entity, keyPath: keyPath, expected: attribute.type.xcodeName, value: "\(self)")
        case (_, .relationship(let relationship)):
            throw QueryError.typeMismatch(entity: entity, keyPath: keyPath, expected: "a \(relationship.destinationEntityName) object", value: "\(self)")
        }
    }
}

extension QueryError: FerryError {
    /// The kinds of ``QueryError``: its cases.
    public enum Code: String, Hashable, Sendable {
        /// ``QueryError/unknownKey(entity:key:keyPath:)``
        case unknownKey
        /// ``QueryError/notARelationship(entity:key:keyPath:)``
        case notARelationship
        /// ``QueryError/toManyKeyNotAllowed(entity:key:keyPath:)``
        case toManyKeyNotAllowed
        /// ``QueryError/typeMismatch(entity:keyPath:expected:value:)``
        case typeMismatch
        /// ``QueryError/unknownEntity(_:)``
        case unknownEntity
        /// ``QueryError/invalidRegularExpression(entity:keyPath:pattern:)``
        case invalidRegularExpression
        /// ``QueryError/invalidAggregate(entity:name:reason:)``
        case invalidAggregate
    }

    public var code: Code {
        switch self {
        case .unknownKey: .unknownKey
        case .notARelationship: .notARelationship
        case .toManyKeyNotAllowed: .toManyKeyNotAllowed
        case .typeMismatch: .typeMismatch
        case .unknownEntity: .unknownEntity
        case .invalidRegularExpression: .invalidRegularExpression
        case .invalidAggregate: .invalidAggregate
        }
    }
}
