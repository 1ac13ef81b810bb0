import FerryModel

/// Two objects that would share the values of a uniqueness constraint: what a save under
/// ``MergePolicy/error`` reports (Core Data's `NSConstraintConflict`).
public struct ConstraintConflict: Sendable, Hashable, CustomStringConvertible {
    /// The constraint.
    public var constraint: UniquenessConstraint
    /// The object being saved (a temporary URI for a new object).
    public var objectURI: String
    /// The object it collides with: a stored object, or another object of the same save.
    public var conflictingObjectURI: String
    /// The shared values, as `name = value`, in the constraint's order.
    public var values: [String]

    public init(constraint: UniquenessConstraint, objectURI: String, conflictingObjectURI: String, values: [String]) {
        self.constraint = constraint
        self.objectURI = objectURI
        self.conflictingObjectURI = conflictingObjectURI
        self.values = values
    }

    public var description: String {
        "uniqueness constraint \(constraint) broken: \(objectURI) and \(conflictingObjectURI) both have \(values.joined(separator: ", "))"
    }
}
