import Foundation

/// What changed, as a context (``ManagedObjectContext/changes()``) or a container
/// (``PersistentContainer/changes()``) publishes it: Core Data's
/// `NSManagedObjectContextObjectsDidChange`, `NSManagedObjectContextDidSave` and
/// `NSPersistentStoreRemoteChange` notifications as one `Sendable` value.
///
/// ```swift
/// for await event in container.changes() where event.kind != .objectsDidChange {
///     context.mergeChanges(from: event)          // refreshes what the context holds
///     if case .replay(let origin) = event.source { log("\(event.updated.count) objects from \(origin)") }
/// }
/// ```
public struct ObjectChangeEvent: Sendable, Hashable {
    /// When the event is published.
    public enum Kind: Sendable, Hashable {
        /// A context's objects changed in memory: published by ``ManagedObjectContext/processPendingChanges()``
        /// (which every save calls first), by ``ManagedObjectContext/refresh(_:mergeChanges:)`` and by merges.
        /// Seen only on the context's own ``ManagedObjectContext/changes()``.
        case objectsDidChange
        /// A context of this container saved; published after the store committed, with permanent IDs.
        case didSave
        /// Someone else changed the store: another process (or another container on the same file)
        /// saved, or a change set of another store was replayed into it — by the daemon or by any
        /// other process. Read from the store's history after its commit.
        case storeChangedRemotely
    }

    /// When the event is published.
    public var kind: Kind
    /// Who made the change.
    public var source: ChangeSource
    /// Objects inserted.
    public var inserted: Set<ObjectID>
    /// Objects updated, with the keys of the properties that changed (relationships included).
    public var updated: [ObjectID: Set<String>]
    /// Objects deleted.
    public var deleted: Set<ObjectID>
    /// Objects whose values were refreshed from the store (``Kind/objectsDidChange`` only).
    public var refreshed: Set<ObjectID>
    /// For ``Kind/storeChangedRemotely``: entities of deleted objects whose local ID could no longer be
    /// worked out (an object born in another store keeps its local ID only while its row exists). A
    /// context merging the event checks which of its objects of these entities are gone.
    public var deletedWithoutID: Set<String>
    /// For ``Kind/storeChangedRemotely`` and for saves: the change set of the store's history that
    /// recorded the change (origin and sequence), when there is one.
    public var changeSet: ChangeSetMark?

    /// Creates an event.
    public init(kind: Kind, source: ChangeSource, inserted: Set<ObjectID> = [], updated: [ObjectID: Set<String>] = [:],
                deleted: Set<ObjectID> = [], refreshed: Set<ObjectID> = [], deletedWithoutID: Set<String> = [],
                changeSet: ChangeSetMark? = nil) {
        self.kind = kind
        self.source = source
        self.inserted = inserted
        self.updated = updated
        self.deleted = deleted
        self.refreshed = refreshed
        self.deletedWithoutID = deletedWithoutID
        self.changeSet = changeSet
    }

    /// Whether the event names no object.
    public var isEmpty: Bool {
        inserted.isEmpty && updated.isEmpty && deleted.isEmpty && refreshed.isEmpty && deletedWithoutID.isEmpty
    }

    /// Whether `context` made the change.
    public func isFrom(_ context: ManagedObjectContext) -> Bool {
        if case .context(let identity) = source { return identity == context.identity }
        return false
    }
}

/// Who made a change (``ObjectChangeEvent/source``).
public enum ChangeSource: Sendable, Hashable {
    /// A context of this container (this process): compare with ``ManagedObjectContext/identity``.
    case context(ContextIdentity)
    /// A save of this store made elsewhere: another process on the same file (an application, the
    /// `ferry` command), another container in this process, or the daemon's own bookkeeping after a
    /// replay (author `ferry-replay`). Author and context name as the saving context set them.
    case otherProcess(author: String?, contextName: String?)
    /// A change set of another store (its origin), replayed into this one by the daemon or any process.
    case replay(origin: UUID)
}

/// A context's identity in events: unique per context, with its ``ManagedObjectContext/name`` when the event was made.
public struct ContextIdentity: Sendable, Hashable, CustomStringConvertible {
    let id: UUID
    /// The context's name when the event was made.
    public let name: String?

    public static func == (lhs: ContextIdentity, rhs: ContextIdentity) -> Bool { lhs.id == rhs.id }
    public func hash(into hasher: inout Hasher) { hasher.combine(id) }
    public var description: String { name.map { "context '\($0)'" } ?? "context \(id.uuidString.prefix(8))" }
}
