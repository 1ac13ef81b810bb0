import Foundation
import FerryModel

/// Key-value access, checked against the model. These throw
/// ``ContextError`` for unknown keys, values of the wrong type, objects of
/// another context and objects whose row is gone.
extension ManagedObject {
    /// The value of a property: a Swift value for attributes (`Int16`, `String`,
    /// `Date`, …, or nil), a ``ManagedObject`` (or nil) for to-one relationships,
    /// a `Set<ManagedObject>` for to-many and `[ManagedObject]` for ordered to-many.
    public func value(forKey key: String) throws(ContextError) -> Any? {
        let (context, index) = try locate(key)
        return try value(at: index, in: context)
    }

    /// The value of the property at `index` (see ``value(forKey:)``).
    func value(at index: Int, in context: ManagedObjectContext) throws(ContextError) -> Any? {
        switch runtime.kinds[index] {
        case .attribute(let attribute):
            try context.fulfillFault(self)
            return attributes[index].map { $0.swiftValue(as: attribute.type) }
        case .toOne:
            try context.fulfillFault(self)
            return toOne[index].flatMap { context.object(forKey: $0) }
        case .toMany(let relationship):
            let objects = try context.destinations(of: self, index)
            return relationship.isOrdered ? objects as Any : Set(objects) as Any
        }
    }

    /// Sets a property. Numbers are converted between widths when exact;
    /// to-one takes a ``ManagedObject`` or nil; to-many takes an array or set of
    /// objects and replaces the members. Inverses are kept in step.
    public func setValue(_ value: Any?, forKey key: String) throws(ContextError) {
        let (context, index) = try locate(key)
        switch runtime.kinds[index] {
        case .attribute(let attribute):
            if let value = value as? AttributeValue {
                try setAttributeValue(value, forKey: key)
                return
            }
            var converted: AttributeValue?
            if let value {
                guard let coerced = AttributeValue.coerce(value, to: attribute.type) else {
                    throw ContextError.invalidValue(entity: entity.name, key: key, value: "\(type(of: value)) \(value)",
                                                    expectedType: attribute.type.xcodeName)
                }
                converted = coerced
            }
            try context.fulfillFault(self)
            setAttribute(index, converted, in: context)
        case .toOne:
            guard value == nil || value is ManagedObject else {
                throw ContextError.wrongPropertyKind(entity: entity.name, key: key,
                                                     expected: "an attribute (it is a to-one relationship: pass a ManagedObject or nil)")
            }
            try context.setToOne(self, index, to: value as? ManagedObject)
        case .toMany:
            let objects: [ManagedObject]
            switch value {
            case nil: objects = []
            case let array as [ManagedObject]: objects = array
            case let set as Set<ManagedObject>: objects = Array(set)
            default:
                throw ContextError.wrongPropertyKind(entity: entity.name, key: key,
                                                     expected: "an attribute (it is a to-many relationship: pass [ManagedObject] or Set<ManagedObject>)")
            }
            try context.replaceToMany(self, index, with: objects)
        }
    }

    /// The attribute value in its model form (``AttributeValue``), nil when unset.
    public func attributeValue(forKey key: String) throws(ContextError) -> AttributeValue? {
        let (context, index) = try locate(key)
        guard case .attribute = runtime.kinds[index] else {
            throw ContextError.wrongPropertyKind(entity: entity.name, key: key, expected: "an attribute")
        }
        try context.fulfillFault(self)
        return attributes[index]
    }

    /// Sets an attribute from its model form; numbers are converted between kinds when exact.
    public func setAttributeValue(_ value: AttributeValue?, forKey key: String) throws(ContextError) {
        let (context, index) = try locate(key)
        guard case .attribute(let attribute) = runtime.kinds[index] else {
            throw ContextError.wrongPropertyKind(entity: runtime.name, key: key, expected: "an attribute")
        }
        var converted: AttributeValue?
        if let value {
            guard let fitting = value.converted(to: attribute.type) else {
                throw ContextError.invalidValue(entity: runtime.name, key: key, value: "\(value)", expectedType: attribute.type.xcodeName)
            }
            converted = fitting
        }
        try context.fulfillFault(self)
        setAttribute(index, converted, in: context)
    }

    /// Sets a to-one relationship, keeping the inverse in step.
    public func setToOneValue(_ target: ManagedObject?, forKey key: String) throws(ContextError) {
        let (context, index) = try locate(key)
        guard case .toOne = runtime.kinds[index] else {
            throw ContextError.wrongPropertyKind(entity: runtime.name, key: key, expected: "a to-one relationship")
        }
        try context.setToOne(self, index, to: target)
    }

    /// The editable members of a to-many relationship (Core Data's `mutableSetValue(forKey:)`).
    public func mutableSetValue(forKey key: String) throws(ContextError) -> RelationshipSet {
        let (_, index) = try locate(key)
        guard case .toMany = runtime.kinds[index] else {
            throw ContextError.wrongPropertyKind(entity: entity.name, key: key, expected: "a to-many relationship")
        }
        return RelationshipSet(owner: self, index: index)
    }

    /// The committed values of the changed properties (Core Data's `changedValues()` keys,
    /// mapped to their current values). Relationships map to object IDs.
    public func changedValues() -> [String: Any] {
        var result: [String: Any] = [:]
        for index in changedIndexes {
            let name = entity.properties[index].name
            switch runtime.kinds[index] {
            case .attribute(let attribute):
                result[name] = attributes[index].map { $0.swiftValue(as: attribute.type) } as Any
            case .toOne:
                result[name] = toOne[index].flatMap { managedObjectContext?.object(forKey: $0)?.objectID } as Any
            case .toMany:
                result[name] = (toMany[index]?.ordered ?? []).compactMap { managedObjectContext?.object(forKey: $0)?.objectID }
            }
        }
        return result
    }

    // MARK: - Internals

    func locate(_ key: String) throws(ContextError) -> (ManagedObjectContext, Int) {
        guard let context = managedObjectContext else { throw ContextError.detachedObject(objectID.uriString) }
        guard let index = runtime.propertyIndex(named: key) else {
            throw ContextError.unknownKey(entity: runtime.name, key: key)
        }
        return (context, index)
    }

    func setAttribute(_ index: Int, _ value: AttributeValue?, in context: ManagedObjectContext) {
        guard attributes[index] != value else { return }
        context.recordUndo(.attribute(self, index: index, attributes[index]))
        attributes[index] = value
        if runtime.isTransientAttribute[index] {
            context.noteEdit(self)
            return
        }
        context.markChanged(self, index)
    }
}

/// Typed accessors for subclasses. These trap on programming errors (an
/// unknown key, a value of the wrong type, a fault whose row is gone), as
/// Core Data's accessors raise; use ``value(forKey:)`` and
/// ``setValue(_:forKey:)`` where keys or values come from outside the program.
extension ManagedObject {
    /// Reads and writes an attribute as a Swift type.
    public subscript<Value: AttributeConvertible>(attribute key: String) -> Value? {
        get {
            do {
                return try attributeValue(forKey: key).flatMap(Value.init(attributeValue:))
            } catch {
                preconditionFailure("\(entity.name).\(key): \(error)")
            }
        }
        set {
            do {
                try setAttributeValue(newValue?.attributeValue, forKey: key)
            } catch {
                preconditionFailure("\(entity.name).\(key): \(error)")
            }
        }
    }

    /// Reads and writes a to-one relationship as a subclass.
    public subscript<Object: ManagedObject>(toOne key: String) -> Object? {
        get {
            do {
                return try value(forKey: key) as? Object
            } catch {
                preconditionFailure("\(entity.name).\(key): \(error)")
            }
        }
        set {
            do {
                try setToOneValue(newValue, forKey: key)
            } catch {
                preconditionFailure("\(entity.name).\(key): \(error)")
            }
        }
    }

    /// The editable members of a to-many relationship.
    public subscript(toMany key: String) -> RelationshipSet {
        do {
            return try mutableSetValue(forKey: key)
        } catch {
            preconditionFailure("\(entity.name).\(key): \(error)")
        }
    }
}

/// A Swift type that an attribute can hold.
public protocol AttributeConvertible {
    /// Converts from the model form; nil when the value does not fit.
    init?(attributeValue: AttributeValue)
    /// The model form.
    var attributeValue: AttributeValue { get }
}

extension Int: AttributeConvertible {
    public init?(attributeValue: AttributeValue) {
        guard case .integer(let v) = attributeValue, let exact = Int(exactly: v) else { return nil }
        self = exact
    }
    public var attributeValue: AttributeValue { .integer(Int64(self)) }
}

extension Int16: AttributeConvertible {
    public init?(attributeValue: AttributeValue) {
        guard case .integer(let v) = attributeValue, let exact = Int16(exactly: v) else { return nil }
        self = exact
    }
    public var attributeValue: AttributeValue { .integer(Int64(self)) }
}

extension Int32: AttributeConvertible {
    public init?(attributeValue: AttributeValue) {
        guard case .integer(let v) = attributeValue, let exact = Int32(exactly: v) else { return nil }
        self = exact
    }
    public var attributeValue: AttributeValue { .integer(Int64(self)) }
}

extension Int64: AttributeConvertible {
    public init?(attributeValue: AttributeValue) {
        guard case .integer(let v) = attributeValue else { return nil }
        self = v
    }
    public var attributeValue: AttributeValue { .integer(self) }
}

extension Double: AttributeConvertible {
    public init?(attributeValue: AttributeValue) {
        guard let v = attributeValue.numericValue else { return nil }
        self = v
    }
    public var attributeValue: AttributeValue { .double(self) }
}

extension Float: AttributeConvertible {
    public init?(attributeValue: AttributeValue) {
        if case .float(let v) = attributeValue { self = v; return }
        guard let v = attributeValue.numericValue else { return nil }
        self = Float(v)
    }
    public var attributeValue: AttributeValue { .float(self) }
}

extension Decimal: AttributeConvertible {
    public init?(attributeValue: AttributeValue) {
        guard case .decimal(let v) = attributeValue else { return nil }
        self = v
    }
    public var attributeValue: AttributeValue { .decimal(self) }
}

extension String: AttributeConvertible {
    public init?(attributeValue: AttributeValue) {
        guard case .string(let v) = attributeValue else { return nil }
        self = v
    }
    public var attributeValue: AttributeValue { .string(self) }
}

extension Bool: AttributeConvertible {
    public init?(attributeValue: AttributeValue) {
        guard case .boolean(let v) = attributeValue else { return nil }
        self = v
    }
    public var attributeValue: AttributeValue { .boolean(self) }
}

extension Date: AttributeConvertible {
    public init?(attributeValue: AttributeValue) {
        guard case .date(let v) = attributeValue else { return nil }
        self = v
    }
    public var attributeValue: AttributeValue { .date(self) }
}

extension Data: AttributeConvertible {
    public init?(attributeValue: AttributeValue) {
        switch attributeValue {
        case .binaryData(let v), .transformable(let v): self = v
        default: return nil
        }
    }
    public var attributeValue: AttributeValue { .binaryData(self) }
}

extension UUID: AttributeConvertible {
    public init?(attributeValue: AttributeValue) {
        guard case .uuid(let v) = attributeValue else { return nil }
        self = v
    }
    public var attributeValue: AttributeValue { .uuid(self) }
}

extension URL: AttributeConvertible {
    public init?(attributeValue: AttributeValue) {
        guard case .uri(let v) = attributeValue else { return nil }
        self = v
    }
    public var attributeValue: AttributeValue { .uri(self) }
}
