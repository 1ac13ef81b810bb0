import Foundation
import FerryModel

/// Ties a model, a store, the classes of typed objects and custom validators
/// together, and hands out contexts.
///
/// A container is immutable and `Sendable`: create it once, share it between
/// tasks, and give each task its own ``newContext()``.
///
/// ```swift
/// let store = try SQLiteStore(path: "app.sqlite", model: model)   // FerrySQLite
/// let container = try PersistentContainer(store: store, classes: ["Person": Person.self])
/// let context = container.newContext()
/// ```
public final class PersistentContainer: Sendable {
    /// The model every context of this container uses.
    public let model: ManagedObjectModel
    /// The store the contexts read from and save to.
    public let store: any PersistentStore

    let runtimes: [String: EntityRuntime]
    /// Whether the model has derived attributes (saves compute them; see `ManagedObjectContext+Derivations.swift`).
    let hasDerivations: Bool
    private let validatorsByEntity: [String: [EntityValidator]]
    private let classEntities: [ObjectIdentifier: [String]]
    private let regularExpressions: [String: NSRegularExpression]
    /// Subscribers to the container's events (``changes()``) and automatically merging contexts.
    let broadcaster = ChangeBroadcaster()
    /// Reads other writers' commits from the store's history, once someone listens.
    let feed = StoreChangeFeed()

    /// Creates a container.
    /// - Parameters:
    ///   - store: an open store; the container uses its model.
    ///   - classes: the ``ManagedObject`` subclass to instantiate per entity name.
    ///     Subentities without an entry of their own use their parent's class.
    ///   - validators: custom validation rules, run at save after the model's rules.
    /// - Throws: ``ContextError/unknownEntity(_:)`` for a class or validator naming no entity.
    public init(store: any PersistentStore, classes: [String: ManagedObject.Type] = [:], validators: [EntityValidator] = []) throws(ContextError) {
        let model = store.model
        for name in classes.keys where model.entity(named: name) == nil { throw ContextError.unknownEntity(name) }
        for validator in validators where model.entity(named: validator.entityName) == nil {
            throw ContextError.unknownEntity(validator.entityName)
        }
        self.model = model
        self.store = store
        var runtimes: [String: EntityRuntime] = [:]
        var classEntities: [ObjectIdentifier: [String]] = [:]
        var expressions: [String: NSRegularExpression] = [:]
        for entity in model.entities {
            let objectClass = entity.ancestry.reversed().lazy.compactMap { classes[$0] }.first ?? ManagedObject.self
            runtimes[entity.name] = EntityRuntime(entity: entity, model: model, objectClass: objectClass)
            if classes[entity.name] != nil { classEntities[ObjectIdentifier(objectClass), default: []].append(entity.name) }
            for attribute in entity.attributes {
                if let pattern = attribute.validation.regularExpression {
                    expressions[pattern] = try? NSRegularExpression(pattern: pattern)
                }
            }
        }
        self.runtimes = runtimes
        self.hasDerivations = runtimes.values.contains { !$0.derivations.isEmpty }
        self.classEntities = classEntities
        self.regularExpressions = expressions
        var byEntity: [String: [EntityValidator]] = [:]
        for validator in validators { byEntity[validator.entityName, default: []].append(validator) }
        self.validatorsByEntity = byEntity
    }

    /// What changed in the store from now on, as ``ObjectChangeEvent``s: a
    /// ``ObjectChangeEvent/Kind/didSave`` after each save of a context of this container, and a
    /// ``ObjectChangeEvent/Kind/storeChangedRemotely`` after each commit of anyone else — another
    /// process on the same file, or a replay of another store's change set (the daemon's), read from
    /// the store's history after the commit (Core Data's `NSPersistentStoreRemoteChange`, with the
    /// history already read). Ends when the iterating task is cancelled.
    ///
    /// ```swift
    /// let context = container.newContext()
    /// for await event in container.changes() {
    ///     context.mergeChanges(from: event)
    ///     if case .replay(let origin) = event.source { print("\(event.inserted.count) new from \(origin)") }
    /// }
    /// ```
    ///
    /// A store that keeps no history (not a ``ReplicaStore``) reports this container's saves only.
    public func changes() -> AsyncStream<ObjectChangeEvent> {
        startChangeFeed()
        return broadcaster.subscribe()
    }

    deinit { feed.stop() }

    func startChangeFeed() {
        if let source = store as? any ChangeFeedSource { feed.start(store: source, broadcaster: broadcaster) }
    }

    /// A new, empty context. Use one context per task or isolation domain.
    public func newContext() -> ManagedObjectContext {
        ManagedObjectContext(container: self)
    }

    /// Turns a permanent object URI back into an ID (Core Data's
    /// `managedObjectID(forURIRepresentation:)`). It accepts both forms: this
    /// store's own URIs and the origin URIs of objects that came from other
    /// stores (change sets and `ferry dump` name objects by origin URI). Like Core
    /// Data it does not check that the row exists; ``ManagedObjectContext/existingObject(with:)`` does.
    /// - Throws: ``ContextError/invalidURI(_:)`` for a malformed or temporary URI,
    ///   a URI of another store that never reached this one, or an unknown entity;
    ///   ``ContextError/objectInaccessible(_:)`` for an object that came from another store
    ///   and was deleted here (its row is gone; this store keeps its tombstone);
    ///   ``ContextError/storeFailed(_:)`` when the store could not be read to look it up.
    public func managedObjectID(forURIString uri: String) throws(ContextError) -> ObjectID {
        let components: ObjectURIComponents
        switch ObjectURIComponents.parse(uri) {
        case .success(let parsed): components = parsed
        case .failure(let error): throw ContextError.invalidURI(error)
        }
        guard let storeID = components.store, let key = components.primaryKey else {
            throw ContextError.invalidURI(.temporary(uri))
        }
        guard let entity = model.entity(named: components.entityName) else {
            throw ContextError.invalidURI(.unknownEntity(uri, entity: components.entityName))
        }
        guard !entity.isAbstract else {
            throw ContextError.invalidURI(.malformed(uri, "entity '\(entity.name)' is abstract, so no object has it as its entity"))
        }
        // Origin URIs: an object that came from another store, or one of ours brought back on a new row.
        // (A failed read is said as such: it once read as "belongs to another store".)
        if let mapped = try lookingUp(uri, { try store.localObjectID(forOriginURI: uri) }) {
            return mapped
        }
        guard storeID == store.identifier else {
            // An object that came from elsewhere and was deleted here has no row left to name.
            if let graveyard = store as? any Graveyard, try lookingUp(uri, { try graveyard.tombstone(of: uri) }) != nil {
                throw ContextError.objectInaccessible(uri)
            }
            throw ContextError.invalidURI(.foreignStore(uri, expected: store.identifier))
        }
        return ObjectID.permanent(entityName: entity.name, store: storeID, primaryKey: key)
    }

    /// Runs one of the store's reads about `uri`; its failure is a store failure that says so.
    private func lookingUp<T>(_ uri: String, _ read: () throws -> T) throws(ContextError) -> T {
        do {
            return try read()
        } catch {
            let failure = StoreFailure(error)
            throw ContextError.storeFailed(StoreFailure("looking up '\(uri)': \(failure.message)", cause: error, isRetryable: failure.isRetryable))
        }
    }

    /// Same as ``managedObjectID(forURIString:)`` for a URL.
    public func managedObjectID(forURIRepresentation uri: URL) throws(ContextError) -> ObjectID {
        try managedObjectID(forURIString: uri.absoluteString)
    }

    // MARK: - Internals

    func validators(for runtime: EntityRuntime, phase: ValidationPhase) -> [EntityValidator] {
        guard !validatorsByEntity.isEmpty else { return [] }
        return runtime.ancestry.flatMap { validatorsByEntity[$0] ?? [] }.filter { $0.phases.contains(phase) }
    }

    func entityName(for type: ManagedObject.Type) throws(ContextError) -> String {
        guard let names = classEntities[ObjectIdentifier(type)], let first = names.first else {
            throw ContextError.wrongClass(entity: "?", expected: "\(type)",
                                          actual: "no entity registered for this class; pass classes: [\"Entity\": \(type).self] to the container")
        }
        return first
    }

    func regularExpression(_ pattern: String) -> NSRegularExpression? { regularExpressions[pattern] }

    func placeholderRuntime(for entityName: String) -> EntityRuntime {
        EntityRuntime(entity: EntityDescription(name: entityName), model: model, objectClass: ManagedObject.self)
    }
}
