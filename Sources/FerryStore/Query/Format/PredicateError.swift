import FerryModel

/// Why a predicate format string cannot be used: what is wrong, where in the
/// string, and (when known) for which entity and key.
public struct PredicateFormatError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The kind of problem.
    public enum Code: String, Sendable, Hashable {
        /// The text does not follow the predicate grammar.
        case syntax
        /// A key path names a property the entity does not have (or cannot be followed).
        case unknownKey
        /// A value cannot be compared with the key path's type.
        case typeMismatch
        /// A format argument or template variable is missing or of an unusable type.
        case argument
        /// Valid Core Data syntax that Ferry does not support yet.
        case unsupported
    }

    /// The kind of problem.
    public let code: Code
    /// The predicate as given.
    public let predicate: String
    /// The character offset the problem is at.
    public let position: Int
    /// What is wrong.
    public let message: String
    /// The entity the predicate was checked against.
    public let entity: String?
    /// The key the problem concerns, if any.
    public let key: String?
    /// The error met resolving a key path or a variable, when the problem is one.
    public var cause: (any Error)? = nil

    /// The message, then the predicate with a caret under the position.
    public var description: String {
        let context = entity.map { " (entity '\($0)')" } ?? ""
        return "\(message)\(context), at offset \(position):\n" + PredicateSyntaxError.quoted(predicate, caretAt: position)
    }
}

extension PredicateFormatError: FerryError {
    /// Errors are equal when their fields are (causes are not compared).
    public static func == (lhs: PredicateFormatError, rhs: PredicateFormatError) -> Bool {
        (lhs.code, lhs.predicate, lhs.position, lhs.message, lhs.entity, lhs.key)
            == (rhs.code, rhs.predicate, rhs.position, rhs.message, rhs.entity, rhs.key)
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(code)
        hasher.combine(predicate)
        hasher.combine(position)
        hasher.combine(message)
        hasher.combine(entity)
        hasher.combine(key)
    }
}
