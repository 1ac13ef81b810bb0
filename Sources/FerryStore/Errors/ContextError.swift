import FerryModel
/// A misuse of a context or managed object: an unknown key, a value of the
/// wrong type, an object that no longer exists.
public enum ContextError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The model has no entity with this name.
    case unknownEntity(String)
    /// Abstract entities cannot be inserted; insert one of their subentities.
    case abstractEntity(String)
    /// The entity has no property with this name.
    case unknownKey(entity: String, key: String)
    /// The property exists but is another kind (an attribute where a relationship was used, …).
    case wrongPropertyKind(entity: String, key: String, expected: String)
    /// The value cannot be stored in the attribute.
    case invalidValue(entity: String, key: String, value: String, expectedType: String)
    /// The object is not of the relationship's destination entity.
    case wrongDestination(entity: String, key: String, expected: String, actual: String)
    /// The object belongs to another context (or to none).
    case objectFromAnotherContext(String)
    /// The object's row no longer exists in the store (deleted elsewhere).
    case objectInaccessible(String)
    /// `existingObject(with:)` found no such object.
    case objectNotFound(String)
    /// The object's context has been deallocated or reset.
    case detachedObject(String)
    /// A URI could not be resolved.
    case invalidURI(ObjectURIError)
    /// The store could not be read to answer (a failed read, not a misuse): trying again may help
    /// when the failure says it is transient.
    case storeFailed(StoreFailure)
    /// The class registered for an entity does not match what was asked for.
    case wrongClass(entity: String, expected: String, actual: String)

    public var description: String {
        switch self {
        case .unknownEntity(let name):
            "the model has no entity named '\(name)'"
        case .abstractEntity(let name):
            "entity '\(name)' is abstract and cannot be inserted; insert one of its subentities"
        case .unknownKey(let entity, let key):
            "entity '\(entity)' has no property named '\(key)'"
        case .wrongPropertyKind(let entity, let key, let expected):
            "'\(entity).\(key)' is not \(expected)"
        case .invalidValue(let entity, let key, let value, let expectedType):
            "'\(entity).\(key)' takes \(expectedType); \(value) cannot be stored there"
        case .wrongDestination(let entity, let key, let expected, let actual):
            "'\(entity).\(key)' takes \(expected) objects; got a '\(actual)'"
        case .objectFromAnotherContext(let uri):
            "object \(uri) belongs to another context; fetch it in this context with object(with:) first"
        case .objectInaccessible(let uri):
            "object \(uri) no longer exists in the store (it was deleted, perhaps by another process)"
        case .objectNotFound(let uri):
            "no object \(uri) in the context or the store"
        case .detachedObject(let uri):
            "object \(uri) is no longer registered with a context (the context was reset, or the object was deleted and saved)"
        case .invalidURI(let error):
            error.description
        case .storeFailed(let failure):
            "the store could not be read: \(failure)"
        case .wrongClass(let entity, let expected, let actual):
            "entity '\(entity)' is registered with class \(actual), not \(expected)"
        }
    }
}

extension ContextError {
    /// A store failure met while finding the objects that refer to `uri` (to nullify their
    /// references before it goes): the store's failure, saying whose references it was finding.
    static func referencesNotFound(_ uri: String, cause error: any Error) -> ContextError {
        let failure = StoreFailure(error)
        return .storeFailed(StoreFailure("\(uri): finding references to it failed: \(failure.message)", cause: error,
                                         isRetryable: failure.isRetryable))
    }
}

extension ContextError: FerryError {
    /// The kinds of ``ContextError``: its cases.
    public enum Code: String, Hashable, Sendable {
        /// ``ContextError/unknownEntity(_:)``
        case unknownEntity
        /// ``ContextError/abstractEntity(_:)``
        case abstractEntity
        /// ``ContextError/unknownKey(entity:key:)``
        case unknownKey
        /// ``ContextError/wrongPropertyKind(entity:key:expected:)``
        case wrongPropertyKind
        /// ``ContextError/invalidValue(entity:key:value:expectedType:)``
        case invalidValue
        /// ``ContextError/wrongDestination(entity:key:expected:actual:)``
        case wrongDestination
        /// ``ContextError/objectFromAnotherContext(_:)``
        case objectFromAnotherContext
        /// ``ContextError/objectInaccessible(_:)``
        case objectInaccessible
        /// ``ContextError/objectNotFound(_:)``
        case objectNotFound
        /// ``ContextError/detachedObject(_:)``
        case detachedObject
        /// ``ContextError/invalidURI(_:)``
        case invalidURI
        /// ``ContextError/storeFailed(_:)``
        case storeFailed
        /// ``ContextError/wrongClass(entity:expected:actual:)``
        case wrongClass
    }

    public var code: Code {
        switch self {
        case .unknownEntity: .unknownEntity
        case .abstractEntity: .abstractEntity
        case .unknownKey: .unknownKey
        case .wrongPropertyKind: .wrongPropertyKind
        case .invalidValue: .invalidValue
        case .wrongDestination: .wrongDestination
        case .objectFromAnotherContext: .objectFromAnotherContext
        case .objectInaccessible: .objectInaccessible
        case .objectNotFound: .objectNotFound
        case .detachedObject: .detachedObject
        case .invalidURI: .invalidURI
        case .storeFailed: .storeFailed
        case .wrongClass: .wrongClass
        }
    }

    /// The URI's own error, or the store's failure.
    public var cause: (any Error)? {
        switch self {
        case .invalidURI(let error): error
        case .storeFailed(let failure): failure
        default: nil
        }
    }

    /// Whether the store's failure may pass; every other case is a fault in the call.
    public var isRetryable: Bool {
        if case .storeFailed(let failure) = self { return failure.isRetryable }
        return false
    }
}
