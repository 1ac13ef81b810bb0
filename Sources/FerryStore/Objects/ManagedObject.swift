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
///
/// ## Performance note
/// The per-object state below is read and written on every property access.
/// In release builds its dynamic exclusivity checks are turned off
/// (`@exclusivity(unchecked)`): an object is confined to its context's
/// isolation domain, so the compiler already rules out concurrent access, and
/// the checks cost about 10% of a bulk insert (docs/PERFORMANCE.md). Debug
/// builds, and so the test suite, keep them on to catch overlapping accesses.
open class ManagedObject: Hashable, CustomStringConvertible {
    let runtime: EntityRuntime
    /// The context-local handle other objects use to point at this one.
    let key: Int

    /// The object's ID: temporary until the first save, then permanent.
    #if DEBUG
    public internal(set) var objectID: ObjectID
    #else
    @exclusivity(unchecked) public internal(set) var objectID: ObjectID
    #endif
    /// The context the object is registered with; nil once the context was
    /// reset or deallocated, or after the object was deleted and saved.
    public internal(set) weak var managedObjectContext: ManagedObjectContext?

    /// Whether the object's values have not been loaded yet.
    #if DEBUG
    public internal(set) var isFault: Bool
    #else
    @exclusivity(unchecked) public internal(set) var isFault: Bool
    #endif
    /// Whether the object was inserted and not yet saved.
    #if DEBUG
    public internal(set) var isInserted = false
    #else
    @exclusivity(unchecked) public internal(set) var isInserted = false
    #endif
    /// Whether the object is scheduled for deletion at the next save (or was deleted by it).
    #if DEBUG
    public internal(set) var isDeleted = false
    #else
    @exclusivity(unchecked) public internal(set) var isDeleted = false
    #endif

    // Current values, by property index.
    #if DEBUG
    var attributes: [AttributeValue?]
    #else
    @exclusivity(unchecked) var attributes: [AttributeValue?]
    #endif
    #if DEBUG
    var toOne: [Int?]
    #else
    @exclusivity(unchecked) var toOne: [Int?]
    #endif
    #if DEBUG
    var toMany: [Int: RelationshipMembers] = [:]
    #else
    @exclusivity(unchecked) var toMany: [Int: RelationshipMembers] = [:]
    #endif
    /// True for objects this context inserted: a to-many it never loaded is empty,
    /// so loading it needs no store query.
    #if DEBUG
    var unloadedToManyIsEmpty = false
    #else
    @exclusivity(unchecked) var unloadedToManyIsEmpty = false
    #endif
    // Committed values (as last read from or written to the store).
    #if DEBUG
    var committedAttributes: [AttributeValue?]
    #else
    @exclusivity(unchecked) var committedAttributes: [AttributeValue?]
    #endif
    #if DEBUG
    var committedToOne: [Int?]
    #else
    @exclusivity(unchecked) var committedToOne: [Int?]
    #endif
    #if DEBUG
    var version: Int64 = 0
    #else
    @exclusivity(unchecked) var version: Int64 = 0
    #endif
    /// Whether ``prepareForDeletion()`` was called for the pending delete.
    #if DEBUG
    var isPreparedForDeletion = false
    #else
    @exclusivity(unchecked) var isPreparedForDeletion = false
    #endif
    /// Attributes and to-ones set with ``setPrimitiveValue(_:forKey:)`` since the last save: written with
    /// the object's next save, but not changes of their own (not in ``changedValues()``, no event).
    #if DEBUG
    var quietIndexes = PropertyIndexSet()
    #else
    @exclusivity(unchecked) var quietIndexes = PropertyIndexSet()
    #endif
    /// Whether another object of the context stored this object's key (in a relationship): the
    /// key then stays this object's, even after it goes (see ``ObjectRegistry``).
    #if DEBUG
    var isReferenced = false
    #else
    @exclusivity(unchecked) var isReferenced = false
    #endif
    /// Property indexes changed since the last save.
    #if DEBUG
    var changedIndexes = PropertyIndexSet()
    #else
    @exclusivity(unchecked) var changedIndexes = PropertyIndexSet()
    #endif
    /// The context's edit count at this object's last edit (a value set, a link, an insert, a
    /// delete): a save's `willSave` rounds compare it with the count before a round.
    #if DEBUG
    var lastEdit: UInt64 = 0
    #else
    @exclusivity(unchecked) var lastEdit: UInt64 = 0
    #endif

    /// Creates an object. Only contexts create objects; subclasses inherit this initializer.
    public required init(_ construction: ObjectConstruction) {
        runtime = construction.runtime
        key = construction.key
        objectID = construction.objectID
        managedObjectContext = construction.context
        isFault = construction.isFault
        attributes = construction.isFault ? construction.runtime.emptyAttributes : construction.runtime.initialAttributes
        toOne = construction.runtime.emptyToOne
        committedAttributes = attributes
        committedToOne = toOne
    }

    deinit {
        managedObjectContext?.objectDidDeinit(key: key, objectID: objectID, isReferenced: isReferenced)
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

    /// Called after the object's values were read from the store: a fault fired, a fetch
    /// registered it, or a refresh or merge read it again (Core Data's `awakeFromFetch`).
    /// Set up transient state here; changes made here are not tracked as changes.
    open func awakeFromFetch() {}

    /// Called by ``ManagedObjectContext/save()`` on each inserted, updated and deleted object
    /// before validation. Values set here are saved; a save calls it again (up to ten rounds)
    /// for objects that changed in the round before, as Core Data does until nothing changes.
    open func willSave() {}

    /// Called after the save that wrote the object committed. Changes made here are pending
    /// changes of the next save.
    open func didSave() {}

    /// Called once when the object's delete is processed (at ``ManagedObjectContext/processPendingChanges()``
    /// or at save), before its delete rules run: the object still holds its relationships.
    open func prepareForDeletion() {}

    /// Called after the object turned back into a fault (``ManagedObjectContext/refresh(_:mergeChanges:)``,
    /// a merge): release anything derived from its values.
    open func didTurnIntoFault() {}
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
