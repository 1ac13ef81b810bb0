/// A ``ManagedObject`` subclass that checks single property values beyond the model's rules
/// (Core Data's `validate<Key>:error:` methods, which `validateValue(_:forKey:)` calls).
///
/// Saves call ``validate(_:forKey:)`` for every property of an inserted object and for each
/// changed property of an updated one, after the model's own rules; so does
/// ``ManagedObject/validateValue(_:forKey:)``. Subclasses that do not adopt the protocol cost a
/// save nothing here: their values are not read for it.
///
/// ```swift
/// final class Person: ManagedObject, KeyValidating {
///     func validate(_ value: Any?, forKey key: String) throws {
///         if key == "age", let age = value as? Int16, age > 150 {
///             throw ValidationError(code: .numberTooLarge, entityName: "Person",
///                                   objectURI: objectID.uriString, key: key, message: "is \(age)")
///         }
///     }
/// }
/// ```
public protocol KeyValidating: ManagedObject {
    /// Checks one property's value — a value for it, not necessarily the one it holds. Throw a
    /// ``ValidationError`` (or any error, reported as ``ValidationError/Code/custom`` with the key).
    func validate(_ value: Any?, forKey key: String) throws
}
