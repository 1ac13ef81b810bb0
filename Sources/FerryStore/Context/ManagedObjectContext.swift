import Foundation
import FerryModel

/// A scratch pad of objects: inserts, updates and deletes are tracked in
/// memory until ``save()`` writes them to the store in one transaction.
///
/// ## Concurrency
/// A context is **not** `Sendable`. It belongs to the isolation domain that
/// created it (a task, an actor, the main thread) and so do all its objects;
/// Swift 6's checks stop you from sending either across domains. To work in
/// parallel, give each task its own context from
/// ``PersistentContainer/newContext()`` and pass ``ObjectID``s (which are
/// `Sendable`) between them. Store calls are synchronous: a fetch or save
/// blocks the calling thread for the duration of the SQLite work, like Core
/// Data's `performAndWait`.
///
/// Like ``ManagedObject``'s, the registry's exclusivity checks are off in
/// release builds only (see the performance note there).
public final class ManagedObjectContext {
    /// The container the context reads from and saves to.
    public let container: PersistentContainer
    /// A name recorded with each save (Core Data's `name`).
    public var name: String?
    /// The author recorded with each save (Core Data's `transactionAuthor`).
    public var transactionAuthor: String?
    /// What a save does when objects would share the values of a uniqueness constraint
    /// (``MergePolicy/error``, the default, refuses the save).
    public var mergePolicy: MergePolicy = .error
    /// The conflicts with other writers that the last save resolved by its ``mergePolicy``
    /// (empty when it met none, or under ``MergePolicy/error``, which fails instead).
    public internal(set) var lastResolvedConflicts: [MergeConflict] = []
    /// Records changes for ``undo()`` and ``redo()``; nil (the default) records nothing.
    public var undoManager: ContextUndoManager?

    #if DEBUG
    var registry = ObjectRegistry()
    #else
    @exclusivity(unchecked) var registry = ObjectRegistry()
    #endif
    /// Keys whose object went away while other objects still name the key: the ID to make a fault
    /// from when the key is next read (``self.object(forKey:)``).
    var departedIDs: [Int: ObjectID] = [:]
    /// How many departed IDs wait before ``sweepDepartedIDsIfNeeded()`` looks for unnamed ones.
    var departedSweepThreshold = 4_096
    /// Whether every registered object is held strongly, changed or not (Core Data's
    /// `retainsRegisteredObjects`). Off by default: objects without pending changes stay registered
    /// only while something else holds them, so a long-lived context's memory follows what the
    /// application keeps, not everything it ever loaded.
    public var retainsRegisteredObjects = false {
        didSet {
            guard retainsRegisteredObjects != oldValue else { return }
            if retainsRegisteredObjects {
                for object in registry.objects { registry.pin(object.key) }
            } else {
                let pending = Set(insertedKeys).union(deletedKeys).union(updatedKeys)
                var released: [ManagedObject] = []
                for object in registry.objects where !pending.contains(object.key) {
                    if let strong = registry.unpin(object.key) { released.append(strong) }
                }
                released.removeAll()
            }
        }
    }
    #if DEBUG
    private var indexedKeys: [ObjectID: Int] = [:]
    #else
    @exclusivity(unchecked) private var indexedKeys: [ObjectID: Int] = [:]
    #endif
    /// Objects saved since the last ID lookup, not yet in `indexedKeys`: indexing
    /// waits until a lookup needs it, so bulk saves do not pay for it.
    private var unindexedKeys: [Int] = []
    /// Inserted objects in insertion order (may include ones deleted since).
    #if DEBUG
    var insertedKeys: [Int] = []
    #else
    @exclusivity(unchecked) var insertedKeys: [Int] = []
    #endif
    /// Deleted objects in deletion order.
    #if DEBUG
    var deletedKeys: [Int] = []
    #else
    @exclusivity(unchecked) var deletedKeys: [Int] = []
    #endif
    /// Saved objects with changed properties.
    #if DEBUG
    var updatedKeys = Set<Int>()
    #else
    @exclusivity(unchecked) var updatedKeys = Set<Int>()
    #endif
    /// How many edits objects of this context have had (see ``noteEdit(_:)``).
    #if DEBUG
    var editCount: UInt64 = 0
    #else
    @exclusivity(unchecked) var editCount: UInt64 = 0
    #endif
    /// Temporary IDs are this UUID plus a counter.
    let temporaryNamespace = UUID.systemRandom()
    /// Subscribers to this context's events (``changes()``).
    let events = ChangeBroadcaster()
    /// How far objects-did-change events have told the pending changes.
    var notified = NotifiedChanges()
    /// Events of others waiting to be merged, when ``automaticallyMergesChangesFromStore`` is on.
    var inbox: ChangeInbox?
    var inboxKey: Int?

    /// The context a child saves into (``newChildContext()``); nil for a context of the store.
    public let parent: ManagedObjectContext?
    /// Where this context reads and saves: the container's store, or for a child its parent.
    let store: any PersistentStore

    init(container: PersistentContainer, parent: ManagedObjectContext? = nil) {
        self.container = container
        self.parent = parent
        self.store = parent.map { ParentContextStore(parent: $0) } ?? container.store
    }

    /// A context whose store is this one (Core Data's child context, `parent`): it sees this
    /// context's objects with their unsaved changes, and its ``save()`` hands its changes to this
    /// context — as unsaved changes here, written to the store when this context saves. Dropping a
    /// child without saving it discards its edits. Children nest to any depth.
    ///
    /// A child belongs to this context's isolation domain. Objects are passed between the two by
    /// ID (``object(with:)``); objects a child inserted keep, after its save, the temporary ID of
    /// their copy here until this context saves them. Uniqueness constraints and optimistic-locking
    /// conflicts are checked when the changes reach the store, as in Core Data; the
    /// objects' validation runs at each save. Other contexts hear of a child's save only once its
    /// changes reach the store.
    public func newChildContext() -> ManagedObjectContext {
        ManagedObjectContext(container: container, parent: self)
    }

    /// Whether `id` is a temporary ID given out by this context (another context's temporary IDs —
    /// a parent's inserted objects, seen from a child — are looked up like permanent ones).
    func isOwnTemporary(_ id: ObjectID) -> Bool {
        guard case .temporary(let namespace, _) = id.kind else { return false }
        return namespace == temporaryNamespace
    }

    deinit {
        if let inboxKey { container.broadcaster.remove(inbox: inboxKey) }
        for object in registry.objects { object.managedObjectContext = nil }
    }

    var model: ManagedObjectModel { container.model }

    // MARK: - State

    /// Whether there are unsaved inserts, updates or deletes.
    public var hasChanges: Bool {
        insertedKeys.contains { self.object(forKey: $0)?.isDeleted == false }
            || deletedKeys.contains { self.object(forKey: $0)?.isInserted == false }
            || updatedKeys.contains { self.object(forKey: $0).map { !$0.changedIndexes.isEmpty && !$0.isDeleted } ?? false }
    }

    /// Objects inserted since the last save (and not deleted again).
    public var insertedObjects: Set<ManagedObject> {
        Set(insertedKeys.compactMap { self.object(forKey: $0) }.filter { !$0.isDeleted })
    }

    /// Saved objects with unsaved changes.
    public var updatedObjects: Set<ManagedObject> {
        Set(updatedKeys.compactMap { self.object(forKey: $0) }.filter(\.isUpdated))
    }

    /// Saved objects scheduled for deletion (unsaved objects that were deleted are simply dropped).
    public var deletedObjects: Set<ManagedObject> {
        Set(deletedKeys.compactMap { self.object(forKey: $0) }.filter { !$0.isInserted })
    }

    /// Every object the context currently holds, faults included.
    /// Objects without pending changes are registered only while something holds them
    /// (see ``retainsRegisteredObjects``).
    public var registeredObjects: Set<ManagedObject> { Set(registry.objects) }

    // MARK: - Lookup

    /// The object registered for `id`, or nil (the row may still exist in the store).
    public func registeredObject(for id: ObjectID) -> ManagedObject? {
        if case .temporary(let namespace, let counter) = id.kind, namespace == temporaryNamespace {
            guard counter < registry.keyCount, let object = self.object(forKey: counter),
                  object.objectID == id else { return nil }
            return object
        }
        return key(forPermanentID: id).flatMap { self.object(forKey: $0) }
    }

    /// The registry key of a permanent ID, indexing recently saved objects first.
    private func key(forPermanentID id: ObjectID) -> Int? {
        if !unindexedKeys.isEmpty {
            indexedKeys.reserveCapacity(indexedKeys.count + unindexedKeys.count)
            for key in unindexedKeys {
                guard let object = self.object(forKey: key), !isOwnTemporary(object.objectID) else { continue }
                indexedKeys[object.objectID] = key
            }
            unindexedKeys.removeAll(keepingCapacity: true)
        }
        return indexedKeys[id]
    }

    /// Records that the object at `key` now has a permanent ID.
    func indexPermanentID(ofKey key: Int) {
        unindexedKeys.append(key)
    }

    /// The object for `id`: the registered one, or a fault that loads its values
    /// on first access. Never fails; accessing a fault whose row does not exist
    /// throws ``ContextError/objectInaccessible(_:)`` (or traps, for typed accessors).
    public func object(with id: ObjectID) -> ManagedObject {
        if let object = registeredObject(for: id) { return object }
        return registerFault(for: id)
    }

    /// The object for `id`, loaded from the store if needed.
    /// - Throws: ``ContextError/objectNotFound(_:)`` when neither the context nor the store has it.
    public func existingObject(with id: ObjectID) throws(ContextError) -> ManagedObject {
        mergeWaitingChanges()
        if let object = registeredObject(for: id) {
            if object.isFault {
                do { try fulfillFault(object) } catch { throw ContextError.objectNotFound(id.uriString) }
            }
            return object
        }
        guard !isOwnTemporary(id), model.entity(named: id.entityName) != nil else {
            throw ContextError.objectNotFound(id.uriString)
        }
        let rows: [ObjectID: RowSnapshot]
        do { rows = try store.rows(for: [id]) } catch { throw ContextError.objectNotFound(id.uriString) }
        guard let row = rows[id] else { throw ContextError.objectNotFound(id.uriString) }
        return register(row)
    }

    /// Loads and registers the objects of these IDs that the context does not
    /// hold yet, in one store read (replay looks up many objects per change set).
    package func registerExisting(_ ids: [ObjectID]) throws {
        let missing = ids.filter { !isOwnTemporary($0) && registeredObject(for: $0) == nil }
        guard !missing.isEmpty else { return }
        for row in try store.rows(for: missing).values where registeredObject(for: row.objectID) == nil {
            register(row)
        }
    }

    /// Resolves a URI (permanent form) and returns the existing object.
    public func existingObject(withURI uri: String) throws(ContextError) -> ManagedObject {
        try existingObject(with: container.managedObjectID(forURIString: uri))
    }

    // MARK: - Insert and delete

    /// Inserts a new object of `entityName`, with the model's default values.
    /// - Throws: ``ContextError/unknownEntity(_:)`` or ``ContextError/abstractEntity(_:)``.
    @discardableResult
    public func insert(entityName: String) throws(ContextError) -> ManagedObject {
        guard let runtime = container.runtimes[entityName] else { throw ContextError.unknownEntity(entityName) }
        return try insert(runtime: runtime)
    }

    /// Inserts a new object of the runtime's entity (for callers that resolved the entity already).
    func insert(runtime: EntityRuntime, awake: Bool = true) throws(ContextError) -> ManagedObject {
        guard !runtime.entity.isAbstract else { throw ContextError.abstractEntity(runtime.name) }
        let key = registry.freshKey
        let object = makeObject(runtime: runtime, id: .temporary(entityName: runtime.name, namespace: temporaryNamespace, counter: key), isFault: false,
                                key: key, pinned: true)
        object.isInserted = true
        object.unloadedToManyIsEmpty = true
        insertedKeys.append(object.key)
        noteEdit(object)
        recordUndo(.insert(object))
        if awake { object.awakeFromInsert() }
        return object
    }

    /// Inserts a new object of the subclass `type`, registered with the container
    /// for one entity (or for `entityName` when it is registered for several).
    public func insert<Object: ManagedObject>(_ type: Object.Type, entityName: String? = nil) throws(ContextError) -> Object {
        let name: String
        if let entityName { name = entityName } else { name = try container.entityName(for: type) }
        let object = try insert(entityName: name)
        if ObjectIdentifier(Swift.type(of: object)) == ObjectIdentifier(Object.self) {
            return unsafeDowncast(object, to: Object.self)
        }
        guard let typed = object as? Object else {
            throw ContextError.wrongClass(entity: name, expected: "\(Object.self)", actual: "\(Swift.type(of: object))")
        }
        return typed
    }

    /// Marks an object for deletion. Delete rules and Deny checks run at ``save()``.
    /// Deleting an unsaved object just drops it at the next save.
    public func delete(_ object: ManagedObject) {
        guard object.managedObjectContext === self, !object.isDeleted else { return }
        object.isDeleted = true
        registry.pin(object.key)
        deletedKeys.append(object.key)
        noteEdit(object)
        recordUndo(.delete(object))
    }

    // MARK: - Rollback and reset

    /// Discards every unsaved change: inserted objects are unregistered, deleted
    /// ones are restored, updated ones get their committed values back.
    public func rollback() {
        undoManager?.removeAllActions()
        for key in insertedKeys {
            guard let object = self.object(forKey: key) else { continue }
            unregister(object)
        }
        for key in deletedKeys {
            guard let object = self.object(forKey: key) else { continue }
            object.isDeleted = false
            object.isPreparedForDeletion = false
        }
        for key in updatedKeys {
            guard let object = self.object(forKey: key) else { continue }
            object.attributes = object.committedAttributes
            object.toOne = object.committedToOne
            object.toMany.removeAll()
            object.unloadedToManyIsEmpty = false
            object.changedIndexes.removeAll()
        }
        // To-many sets of untouched objects may hold objects that were just unregistered.
        for object in registry.objects where !object.toMany.isEmpty {
            if object.toMany.values.contains(where: { $0.ordered.contains { self.object(forKey: $0) == nil } }) {
                object.toMany.removeAll()
                object.unloadedToManyIsEmpty = false
            }
        }
        releasePending()
        notified = NotifiedChanges()
    }

    /// Empties the pending-change lists, and stops holding their objects strongly (unless
    /// ``retainsRegisteredObjects``). Objects nothing else holds go then.
    func releasePending() {
        var released: [ManagedObject] = []
        if !retainsRegisteredObjects {
            for key in insertedKeys { if let object = registry.unpin(key) { released.append(object) } }
            for key in deletedKeys { if let object = registry.unpin(key) { released.append(object) } }
            for key in updatedKeys { if let object = registry.unpin(key) { released.append(object) } }
        }
        insertedKeys.removeAll()
        deletedKeys.removeAll()
        updatedKeys.removeAll()
        released.removeAll()
    }

    /// Forgets every object, saved or not. Objects fetched before are detached.
    public func reset() {
        undoManager?.removeAllActions()
        for object in registry.objects { object.managedObjectContext = nil }
        var released = registry.removeAll()
        departedIDs.removeAll()
        indexedKeys.removeAll()
        unindexedKeys.removeAll()
        insertedKeys.removeAll()
        deletedKeys.removeAll()
        updatedKeys.removeAll()
        notified = NotifiedChanges()
        released.removeAll()
    }

    // MARK: - Registration

    /// Registers a new object. Temporary IDs are not indexed: their
    /// counter is the registry key (see ``registeredObject(for:)``).
    func makeObject(runtime: EntityRuntime, id: ObjectID, isFault: Bool, key: Int, pinned: Bool = false) -> ManagedObject {
        let object = runtime.objectClass.init(ObjectConstruction(runtime: runtime, key: key, objectID: id, context: self, isFault: isFault))
        registry.place(object, at: key, pinned: pinned || retainsRegisteredObjects)
        if !isOwnTemporary(id) { indexedKeys[id] = key }
        return object
    }

    func registerFault(for id: ObjectID) -> ManagedObject {
        if let object = registeredObject(for: id) { return object }
        let runtime = container.runtimes[id.entityName] ?? container.placeholderRuntime(for: id.entityName)
        return makeObject(runtime: runtime, id: id, isFault: true, key: registry.reusableKey())
    }

    /// A fault for `id` registered at the key other objects know it by: ``registeredObject(for:)``
    /// and ``registerFault(for:)``, by way of ``self.object(forKey:)``.
    func referencedFault(for id: ObjectID) -> ManagedObject {
        if let object = registeredObject(for: id) {
            object.isReferenced = true
            return object
        }
        let object = registerFault(for: id)
        object.isReferenced = true
        return object
    }

    /// Called from a registered object's `deinit`: clears its slot; keeps its ID while other
    /// objects may still name its key, else lets the key be given out again.
    func objectDidDeinit(key: Int, objectID: ObjectID, isReferenced: Bool) {
        _ = registry.clear(key)
        if isReferenced && !isOwnTemporary(objectID) {
            departedIDs[key] = objectID
            indexedKeys[objectID] = key
        } else {
            if !isOwnTemporary(objectID), indexedKeys[objectID] == key { indexedKeys[objectID] = nil }
            registry.free(key)
        }
    }

    /// Registers a row, or fills the registered fault; objects already loaded keep their in-context values.
    @discardableResult
    func register(_ row: RowSnapshot) -> ManagedObject {
        let object = registerFault(for: row.objectID)
        if object.isFault { fill(object, from: row) }
        return object
    }

    func fill(_ object: ManagedObject, from row: RowSnapshot) {
        var attributes = row.attributes
        for (index, kind) in object.runtime.kinds.enumerated() {
            if case .attribute(let attribute) = kind, attribute.isTransient { attributes[index] = attribute.defaultValue }
        }
        var toOne = [Int?](repeating: nil, count: row.toOne.count)
        for index in object.runtime.toOneIndexes {
            if let id = row.toOne[index] { toOne[index] = referencedFault(for: id).key }
        }
        object.attributes = attributes
        object.toOne = toOne
        object.committedAttributes = attributes
        object.committedToOne = toOne
        object.version = row.version
        object.isFault = false
        if object.runtime.hasCustomClass { object.awakeFromFetch() }
    }

    /// Loads a fault's values from the store.
    func fulfillFault(_ object: ManagedObject) throws(ContextError) {
        guard object.isFault else { return }
        guard !isOwnTemporary(object.objectID), container.runtimes[object.objectID.entityName] != nil else {
            throw ContextError.objectInaccessible(object.objectID.uriString)
        }
        let rows: [ObjectID: RowSnapshot]
        do { rows = try store.rows(for: [object.objectID]) } catch {
            throw ContextError.objectInaccessible(object.objectID.uriString)
        }
        guard let row = rows[object.objectID] else {
            throw ContextError.objectInaccessible(object.objectID.uriString)
        }
        fill(object, from: row)
    }

    func unregister(_ object: ManagedObject) {
        if !isOwnTemporary(object.objectID), key(forPermanentID: object.objectID) == object.key {
            indexedKeys[object.objectID] = nil
        }
        object.managedObjectContext = nil
        if !isOwnTemporary(object.objectID) { departedIDs[object.key] = nil }
        _ = registry.clear(object.key)
    }

    /// Forgets the IDs of departed objects that no live object names any more, and lets their keys
    /// be given out again, once there are more of them than at the last sweep (at least 4,096):
    /// without it, reading millions of linked objects one batch at a time would keep one entry
    /// for each object ever referenced. Called where no registry access is under way.
    func sweepDepartedIDsIfNeeded() {
        guard departedIDs.count > departedSweepThreshold else { return }
        var named = Set<Int>()
        for object in registry.objects {
            for key in object.toOne { if let key { named.insert(key) } }
            for key in object.committedToOne { if let key { named.insert(key) } }
            for members in object.toMany.values {
                named.formUnion(members.ordered)
                named.formUnion(members.committed)
            }
        }
        named.formUnion(undoManager?.namedKeys ?? [])
        for (key, id) in departedIDs where !named.contains(key) {
            departedIDs[key] = nil
            if indexedKeys[id] == key { indexedKeys[id] = nil }
            registry.free(key)
        }
        departedSweepThreshold = Swift.max(4_096, departedIDs.count * 2)
    }

    /// The object at `key`: the live one, or — when it went away while other objects still name
    /// the key — a new fault for it at the same key.
    @inline(__always)
    func object(forKey key: Int) -> ManagedObject? {
        if let object = registry[key] { return object }
        guard !departedIDs.isEmpty, let id = departedIDs.removeValue(forKey: key) else { return nil }
        let runtime = container.runtimes[id.entityName] ?? container.placeholderRuntime(for: id.entityName)
        let object = makeObject(runtime: runtime, id: id, isFault: true, key: key)
        object.isReferenced = true
        return object
    }

    /// Stamps an object with the context's next edit count. Every edit of an object's values or of
    /// its pending state calls it, so that whether a `willSave` round changed an object is one comparison.
    func noteEdit(_ object: ManagedObject) {
        editCount &+= 1
        object.lastEdit = editCount
    }

    /// Records that an object's property changed (and, for a saved object, that it is updated).
    func markChanged(_ object: ManagedObject, _ index: Int) {
        noteEdit(object)
        guard !object.isInserted else { return }
        // An object with changes is already in `updatedKeys` (both are cleared together).
        if object.changedIndexes.isEmpty {
            updatedKeys.insert(object.key)
            registry.pin(object.key)
        }
        object.changedIndexes.insert(index)
    }
}

@available(*, unavailable, message: "a context belongs to one isolation domain; give each task its own context")
extension ManagedObjectContext: Sendable {}
