import FerryModel

/// Primitive accessors and per-key validation (Core Data's `primitiveValue(forKey:)`,
/// `setPrimitiveValue(_:forKey:)` and `validateValue(_:forKey:)`).
extension ManagedObject {
    /// The value of a property as stored in the object, without anything a subclass's accessors add:
    /// the same values as ``value(forKey:)``.
    public func primitiveValue(forKey key: String) throws(ContextError) -> Any? {
        try value(forKey: key)
    }

    /// Sets an attribute or a to-one relationship without the bookkeeping of ``setValue(_:forKey:)``:
    /// the change is not listed in ``changedValues()``, publishes no event, is not undoable, and a
    /// to-one's inverse is not kept in step. As in Core Data, use it inside custom accessors and
    /// ``awakeFromInsert()``/``awakeFromFetch()`` to set up values.
    ///
    /// The value is written by the object's next save: an inserted object saves all its values; a
    /// saved object writes it along with its other changes (it is not marked updated for it alone).
    /// - Throws: ``ContextError`` for an unknown key, a to-many relationship or a value of the wrong type.
    public func setPrimitiveValue(_ value: Any?, forKey key: String) throws(ContextError) {
        let (context, index) = try locate(key)
        switch runtime.kinds[index] {
        case .attribute(let attribute):
            let converted = try attributeValue(converting: value, for: attribute, key: key)
            try context.fulfillFault(self)
            attributes[index] = converted
        case .toOne:
            guard value == nil || value is ManagedObject else {
                throw ContextError.wrongPropertyKind(entity: entity.name, key: key,
                                                     expected: "an attribute (it is a to-one relationship: pass a ManagedObject or nil)")
            }
            let target = value as? ManagedObject
            if let target, target.managedObjectContext !== context { throw ContextError.objectFromAnotherContext(target.objectID.uriString) }
            try context.fulfillFault(self)
            target?.isReferenced = true
            toOne[index] = target?.key
        case .toMany:
            throw ContextError.wrongPropertyKind(entity: entity.name, key: key,
                                                 expected: "an attribute or a to-one relationship " +
                                                     "(primitive to-many values are not supported: use mutableSetValue(forKey:))")
        }
        if !isInserted && !runtime.isTransientAttribute[index] { quietIndexes.insert(index) }
        context.noteEdit(self)
    }

    /// Checks a value for a property without setting it: the model's rules (its type, nil for a
    /// required property, bounds, lengths, pattern, to-many counts), then, for a subclass that adopts
    /// ``KeyValidating``, its ``KeyValidating/validate(_:forKey:)`` (Core Data's `validateValue(_:forKey:)`).
    /// - Throws: the first ``ValidationError`` found, or ``ContextError`` for an unknown key or a
    ///   value that cannot be the property's type.
    public func validateValue(_ value: Any?, forKey key: String) throws {
        let (context, index) = try locate(key)
        let validator = ObjectValidator(context: context)
        var failures: [ValidationError] = []
        switch runtime.kinds[index] {
        case .attribute(let attribute):
            failures = validator.attributeFailures(self, attribute, try attributeValue(converting: value, for: attribute, key: key))
        case .toOne(let relationship):
            guard value == nil || value is ManagedObject else {
                throw ContextError.wrongPropertyKind(entity: entity.name, key: key, expected: "a ManagedObject or nil for a to-one relationship")
            }
            failures = validator.relationshipFailures(self, relationship, count: value == nil ? 0 : 1)
        case .toMany(let relationship):
            let count: Int
            switch value {
            case nil: count = 0
            case let array as [ManagedObject]: count = array.count
            case let set as Set<ManagedObject>: count = set.count
            default:
                throw ContextError.wrongPropertyKind(entity: entity.name, key: key,
                                                     expected: "[ManagedObject] or Set<ManagedObject> for a to-many relationship")
            }
            failures = validator.relationshipFailures(self, relationship, count: count)
        }
        if let first = failures.first { throw first }
        guard let validating = self as? any KeyValidating else { return }
        do {
            try validating.validate(value, forKey: key)
        } catch {
            throw validator.wrapKeyed(error, self, key)
        }
    }

    /// `value` in the attribute's type (an ``AttributeValue`` converted, a Swift value coerced); nil stays nil.
    private func attributeValue(converting value: Any?, for attribute: AttributeInfo, key: String) throws(ContextError) -> AttributeValue? {
        guard let value else { return nil }
        guard let coerced = (value as? AttributeValue)?.converted(to: attribute.type) ?? AttributeValue.coerce(value, to: attribute.type) else {
            throw ContextError.invalidValue(entity: entity.name, key: key, value: "\(type(of: value)) \(value)", expectedType: attribute.type.xcodeName)
        }
        return coerced
    }
}
