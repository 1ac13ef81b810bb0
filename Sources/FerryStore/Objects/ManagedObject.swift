import Foundation
import FerryModel

/// An object of the graph, registered with exactly one context.
///
/// Subclass it for typed access (register the subclass with the container) or
/// use it as is through key-value access. Like Core Data's
/// `NSManagedObject`, an object is confined to its context's isolation domain:
/// it is not `Sendable`; pass its ``objectID`` between tasks instead.
///
/// ```swift
/// final class Person: ManagedObject {
///     var name: String? {
///         get { self[attribute: "name"] }
///         set { self[attribute: "name"] = newValue }
///     }
///     var manager: Person? {
///         get { self[toOne: "manager"] }
///         set { self[toOne: "manager"] = newValue }
///     }
///     var employees: RelationshipSet { self[toMany: "employees"] }
/// }
/// ```
open class ManagedObject: Hashable, CustomStringConvertible {
    let runtime: EntityRuntime
    /// The context-local handle other objects use to point at this one.
    let key: Int

    /// The object's ID: temporary until the first save, then permanent.
    public internal(set) var objectID: ObjectID
    /// The context the object is registered with; nil once the context was
    /// reset or deallocated, or after the object was deleted and saved.
    public internal(set) weak var managedObjectContext: ManagedObjectContext?

    /// Whether the object's values have not been loaded yet.
    public internal(set) var isFault: Bool
    /// Whether the object was inserted and not yet saved.
    public internal(set) var isInserted = false
    /// Whether the object is scheduled for deletion at the next save (or was deleted by it).
    public internal(set) var isDeleted = false

    // Current values, by property index.
    var attributes: [AttributeValue?]
    var toOne: [Int?]
    var toMany: [Int: RelationshipMembers] = [:]
    /// True for objects this context inserted: a to-many it never loaded is empty,
    /// so loading it needs no store query.
    var unloadedToManyIsEmpty = false
    // Committed values (as last read from or written to the store).
    var committedAttributes: [AttributeValue?]
    var committedToOne: [Int?]
    var version: Int64 = 0
    /// Property indexes changed since the last save.
    var changedIndexes = Set<Int>()

    /// Creates an object. Only contexts create objects; subclasses inherit this initializer.
    public required init(_ construction: ObjectConstruction) {
        runtime = construction.runtime
        key = construction.key
        objectID = construction.objectID
        managedObjectContext = construction.context
        isFault = construction.isFault
        let count = construction.runtime.kinds.count
        attributes = construction.isFault ? Array(repeating: nil, count: count) : construction.runtime.initialAttributes
        toOne = Array(repeating: nil, count: count)
        committedAttributes = attributes
        committedToOne = toOne
    }

    /// The object's entity.
    public var entity: EntityDescription { runtime.entity }

    /// Whether the object has unsaved changes (inserted, deleted or updated).
    public var hasChanges: Bool { isInserted || isDeleted || !changedIndexes.isEmpty }

    /// Whether the object has changed properties that are not yet saved (and is not new).
    public var isUpdated: Bool { !isInserted && !isDeleted && !changedIndexes.isEmpty }

    /// The names of the properties changed since the last save.
    public var changedKeys: Set<String> {
        Set(changedIndexes.map { entity.properties[$0].name })
    }

    public static func == (lhs: ManagedObject, rhs: ManagedObject) -> Bool { lhs === rhs }
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }

    public var description: String {
        "<\(entity.name) \(objectID.uriString)\(isFault ? " fault" : "")>"
    }

    // MARK: - Custom validation (override in subclasses)

    /// Called at save for a newly inserted object, after the model's own rules.
    /// Throw a ``ValidationError`` (or any error) to refuse the save.
    open func validateForInsert() throws {}

    /// Called at save for an updated object, after the model's own rules.
    open func validateForUpdate() throws {}

    /// Called at save for a deleted object, after Deny rules are checked.
    open func validateForDelete() throws {}

    /// Called once after the object is inserted, before the caller sets values.
    open func awakeFromInsert() {}
}

/// The information a context passes to ``ManagedObject/init(_:)``; opaque to applications.
public struct ObjectConstruction {
    let runtime: EntityRuntime
    let key: Int
    let objectID: ObjectID
    let context: ManagedObjectContext
    let isFault: Bool
}

@available(*, unavailable, message: "a managed object belongs to its context's isolation domain; send its objectID instead")
extension ManagedObject: @unchecked Sendable {}

/// The members of one loaded to-many relationship: an ordered list plus a set
/// for membership tests, and the committed list for computing what a save adds
/// and removes.
struct RelationshipMembers {
    var ordered: [Int]
    var members: Set<Int>
    var committed: [Int]

    init(_ keys: [Int], committed: [Int]? = nil) {
        ordered = keys
        members = Set(keys)
        self.committed = committed ?? keys
    }

    mutating func insert(_ key: Int, at position: Int? = nil) -> Bool {
        guard members.insert(key).inserted else { return false }
        if let position, position >= 0, position < ordered.count {
            ordered.insert(key, at: position)
        } else {
            ordered.append(key)
        }
        return true
    }

    mutating func remove(_ key: Int) -> Bool {
        guard members.remove(key) != nil else { return false }
        if let index = ordered.lastIndex(of: key) { ordered.remove(at: index) }
        return true
    }
}
