import Foundation
import FerryModel

/// Where committed objects live. Contexts read rows from a store and hand it
/// each save as one ``SaveRequest``, which the store applies atomically.
///
/// Stores are shared by every context of a container, across tasks and
/// threads, so they must be `Sendable` and safe to call concurrently.
/// Ferry ships ``InMemoryStore`` and, in `FerrySQLite`, `SQLiteStore`.
public protocol PersistentStore: AnyObject, Sendable {
    /// The store's UUID, the host part of its object URIs.
    var identifier: UUID { get }
    /// The model the store was opened with.
    var model: ManagedObjectModel { get }

    /// The rows matching a request (already checked against the model), in
    /// the request's order, with its limit and offset applied.
    func fetchRows(_ request: FetchRequest) throws -> [RowSnapshot]
    /// The IDs of the rows matching a request, ordered and windowed like ``fetchRows(_:)``.
    func fetchObjectIDs(_ request: FetchRequest) throws -> [ObjectID]
    /// The IDs of the matching objects, in order, as a compact list (for batched fetches of many
    /// objects). A default implementation packs ``fetchObjectIDs(_:)``; the SQLite store reads
    /// row numbers into the list directly.
    func fetchObjectIDList(_ request: FetchRequest) throws -> ObjectIDList
    /// How many rows match a request (limit and offset applied).
    func count(_ request: FetchRequest) throws -> Int
    /// For each row matching a request (ordered and windowed like ``fetchRows(_:)``),
    /// the values at `keyPaths` — attributes or to-one relationships, reached
    /// through to-ones — with nil where there is none. A default implementation
    /// reads rows one hop at a time; the SQLite store does it in one statement.
    func fetchValues(_ request: FetchRequest, keyPaths: [String]) throws -> [[FetchedValue?]]
    /// The rows of an aggregate fetch (``FetchRequest/expressions``, ``FetchRequest/propertiesToGroupBy``,
    /// ``FetchRequest/havingPredicate``): per group, the group keys' values then each expression's
    /// (``AggregatePlan/columnNames``), sorted, offset and limited. A default implementation groups
    /// ``fetchValues(_:keyPaths:)`` in memory; the SQLite store runs one `GROUP BY` statement.
    func fetchAggregates(_ request: FetchRequest) throws -> [[FetchedValue?]]
    /// The origin URI of every object here that was inserted in another store
    /// (objects born here are named by their own URI). Empty by default.
    func originURIs() throws -> [ObjectID: String]
    /// The local ID an origin URI names: for an object from another store (or one of this
    /// store's brought back on a new row), its row's, while the row is here; for an object
    /// born here, the one its URI names. Nil when the object never arrived, or came from
    /// elsewhere and was deleted here. Nil by default.
    func localObjectID(forOriginURI uri: String) throws -> ObjectID?
    /// The current rows for these IDs; IDs whose row does not exist are absent.
    func rows(for ids: [ObjectID]) throws -> [ObjectID: RowSnapshot]
    /// The members of a to-many relationship of a saved object, in order for ordered relationships.
    func relatedObjectIDs(of id: ObjectID, relationship: String) throws -> [ObjectID]
    /// Applies a save in one transaction: all of it or nothing.
    /// - Throws: ``SaveError/conflict(objectURIs:)`` when a row's version differs
    ///   from the expected one, ``SaveError/storeFailed(_:)`` otherwise.
    func save(_ request: SaveRequest) throws -> SaveResult
}

/// A value read by a dictionary fetch: an attribute's value, or the object a
/// to-one relationship points to.
public enum FetchedValue: Sendable, Hashable {
    /// An attribute's value.
    case attribute(AttributeValue)
    /// A to-one relationship's destination.
    case object(ObjectID)
}

extension PersistentStore {
    public func fetchObjectIDList(_ request: FetchRequest) throws -> ObjectIDList {
        ObjectIDList(try fetchObjectIDs(request))
    }

    public func originURIs() throws -> [ObjectID: String] { [:] }
    public func localObjectID(forOriginURI uri: String) throws -> ObjectID? { nil }

    /// Reads the matching rows, then follows each key path's to-one hops with
    /// ``rows(for:)``, one batch per hop.
    public func fetchValues(_ request: FetchRequest, keyPaths: [String]) throws -> [[FetchedValue?]] {
        let entity = try request.validated(in: model)
        let rows = try fetchRows(request)
        var columns: [[FetchedValue?]] = []
        for keyPath in keyPaths {
            let path = try ResolvedKeyPath.resolve(keyPath, from: entity, in: model)
            var current: [RowSnapshot?] = rows
            for hop in path.hops {
                let targets = current.map { row in row.flatMap { Self.toOne(hop.name, of: $0, in: model) } }
                let found = try self.rows(for: Array(Set(targets.compactMap { $0 })))
                current = targets.map { $0.flatMap { found[$0] } }
            }
            columns.append(current.map { row -> FetchedValue? in
                guard let row, let rowEntity = model.entity(named: row.objectID.entityName),
                      let index = rowEntity.propertyIndex(named: path.final.name) else { return nil }
                switch path.final {
                case .attribute: return row.attributes[index].map(FetchedValue.attribute)
                case .relationship: return row.toOne[index].map(FetchedValue.object)
                }
            })
        }
        return rows.indices.map { index in columns.map { $0[index] } }
    }

    private static func toOne(_ name: String, of row: RowSnapshot, in model: ManagedObjectModel) -> ObjectID? {
        guard let entity = model.entity(named: row.objectID.entityName), let index = entity.propertyIndex(named: name) else { return nil }
        return row.toOne[index]
    }
}

/// The committed state of one row.
public struct RowSnapshot: Sendable, Hashable {
    /// The row's permanent ID.
    public var objectID: ObjectID
    /// The optimistic-locking version (`Z_OPT`), incremented on each update.
    public var version: Int64
    /// Attribute values by property index of the object's entity (nil for relationships and transients).
    public var attributes: [AttributeValue?]
    /// To-one destinations by property index (nil for attributes, to-many and empty to-one).
    public var toOne: [ObjectID?]

    /// Creates a snapshot.
    public init(objectID: ObjectID, version: Int64, attributes: [AttributeValue?], toOne: [ObjectID?]) {
        self.objectID = objectID
        self.version = version
        self.attributes = attributes
        self.toOne = toOne
    }
}

/// Everything one context save writes. IDs may be temporary; the store gives
/// each inserted object a permanent ID and resolves references to it.
public struct SaveRequest: Sendable {
    /// A new object with all its persistent values.
    public struct Insert: Sendable {
        /// The object's temporary ID.
        public var objectID: ObjectID
        /// Attribute values by property index.
        public var attributes: [AttributeValue?]
        /// To-one destinations by property index.
        public var toOne: [ObjectID?]
    }

    /// Changed properties of an existing object.
    public struct Update: Sendable {
        /// The object's permanent ID.
        public var objectID: ObjectID
        /// The version the context read; a different stored version is a conflict.
        public var expectedVersion: Int64
        /// New attribute values by property index.
        public var attributes: [Int: AttributeValue?]
        /// New to-one destinations by property index.
        public var toOne: [Int: ObjectID?]
    }

    /// An existing object to remove.
    public struct Delete: Sendable {
        /// The object's permanent ID.
        public var objectID: ObjectID
        /// The version the context read; a different stored version is a conflict.
        public var expectedVersion: Int64
    }

    /// A change to a to-many relationship that the store keeps itself (many-to-many,
    /// one-way to-many, or the order of an ordered to-many).
    public struct ToManyChange: Sendable {
        /// The object that owns the relationship.
        public var source: ObjectID
        /// The relationship's name on the source's entity.
        public var relationship: String
        /// Members added since the last save.
        public var added: [ObjectID]
        /// Members removed since the last save.
        public var removed: [ObjectID]
        /// For ordered relationships, the full membership in order.
        public var orderedMembers: [ObjectID]?
    }

    /// New objects, in insertion order (permanent IDs are given in this order).
    public var inserts: [Insert] = []
    /// Updated objects.
    public var updates: [Update] = []
    /// Deleted objects.
    public var deletes: [Delete] = []
    /// Relationship changes the store records apart from the rows.
    public var toManyChanges: [ToManyChange] = []
    /// Who saved (`ManagedObjectContext.transactionAuthor`).
    public var author: String?
    /// The saving context's name.
    public var contextName: String?

    /// Whether the request writes nothing.
    public var isEmpty: Bool { inserts.isEmpty && updates.isEmpty && deletes.isEmpty && toManyChanges.isEmpty }

    /// An empty request.
    package init() {}
}

/// What a replaying save carries besides its writes (see ``ReplayWriter``).
public struct ReplayAnnotation: Sendable {
    /// The change set being applied.
    public var changeSet: ChangeSet
    /// Its canonical text, recorded as received.
    public var body: String
    /// The properties the change set wrote, by object (membership facts as
    /// `relationship + " " + memberURI`).
    public var writes: [ObjectID: Set<String>] = [:]
    /// The objects the change set deleted.
    public var deletes: Set<ObjectID> = []
    /// The origin URI of each object the replay inserted, by temporary ID.
    public var originURIs: [ObjectID: String] = [:]
    /// Instead of ``originURIs``, for a request that inserts only replayed objects
    /// (a direct insert): the origin URI of each insert, in the request's order.
    package var originURIsInOrder: [String] = []
    /// Deleted objects this store never had: tombstones only.
    public var tombstonesOnly: [DeletedObject] = []
    /// Objects the change set inserted that a delete rule removed at once (a
    /// reference to an object deleted here, with Cascade): recorded as deletes
    /// of a new local change set, so every replica deletes them too.
    public var repairDeletes: [DeletedObject] = []
    /// Positions in ordered relationships that the change set wrote and that won here, by
    /// owner: relationship → member origin URI → position key. The save's order already follows them.
    public var positions: [ObjectID: [String: [String: String]]] = [:]
    /// Duplicates this save merges: merges the change set made, and those this store found
    /// (objects of different origins with one unique key). Each loser's row goes without a
    /// tombstone; its origin URI becomes an alias of the survivor.
    public var merges: [MergedDuplicate] = []
    /// Clocks merged values keep, by survivor and property: the loser's, where its value won.
    public var mergeStamps: [ObjectID: [String: WriteStamp]] = [:]
    /// What merges changed, by object (properties, membership keys): recorded by the merge
    /// itself, not as changes of this store.
    public var mergeTouched: [ObjectID: Set<String>] = [:]
    /// Rules of the model the store breaks once this change set is applied, though the change set
    /// is valid on its own (it meets concurrent changes here): the save is made all the same, so
    /// that no replica's state depends on arrival order, and the change set's record keeps them.
    /// Empty: the save is validated as usual.
    public var leftInvalid: [ValidationError] = []
    /// Whether this applies a change set quarantined earlier (its record is updated, not added).
    public var isRetry = false
    /// Objects inserted to bring back a deleted origin URI (by a restore, or to
    /// honour a Deny rule); their tombstones are removed.
    public var resurrected: Set<ObjectID> = []
    /// Objects to record as restored in a new local change set: a delete here
    /// was refused by Deny, or a deleted object came back for a Deny reference.
    public var restored: Set<ObjectID> = []
    /// Changes this store made to repair a rule the merge broke (members past a to-many's
    /// maximum count removed): recorded in the new local change set as they are, even where
    /// the save's rows show no change (a member the change set added and the repair removed).
    public var repairs: [RepairChange] = []
    /// Values merged duplicates bring to survivors whose entity lacks the attribute (by survivor origin
    /// URI, then attribute): kept for later merges (``CarriedValue``). A merged loser's own are dropped.
    public var carried: [String: [String: CarriedValue]] = [:]

    /// The clock key of an object's existence (set by restores, compared by deletes).
    public static let existenceKey = "#exists"

    /// Whether the replay only inserts objects new here: no writes to clock, no
    /// deletes, tombstones, repairs, resurrections or restores to record.
    package var insertsNewObjectsOnly: Bool {
        writes.isEmpty && positions.isEmpty && merges.isEmpty && deletes.isEmpty && tombstonesOnly.isEmpty && repairDeletes.isEmpty
            && resurrected.isEmpty && restored.isEmpty && repairs.isEmpty && carried.isEmpty
    }

    /// Creates an annotation for `changeSet`.
    public init(changeSet: ChangeSet, body: String) {
        self.changeSet = changeSet
        self.body = body
    }
}

/// One change a replaying save makes to repair a rule of the model (see ``ReplayAnnotation/repairs``):
/// an update of one object (its URI, values and removed members), and the clock keys it writes.
public struct RepairChange: Sendable, Equatable {
    /// The object (temporary, for one the save inserts).
    public var objectID: ObjectID
    /// The update, as recorded.
    public var change: ObjectChange
    /// The properties and membership facts whose clocks the repair sets.
    public var clocked: [String]

    public init(objectID: ObjectID, change: ObjectChange, clocked: [String]) {
        self.objectID = objectID
        self.change = change
        self.clocked = clocked
    }
}

/// What a store reports after a save.
public struct SaveResult: Sendable {
    /// The permanent ID given to each inserted object, in the order of ``SaveRequest/inserts``.
    /// Inserted rows start at version 1.
    public var permanentIDs: [ObjectID]
    /// The new version of each updated row, in the order of ``SaveRequest/updates``.
    public var updatedVersions: [Int64]
    /// The sequence number of the change set of this store's own that the save recorded (nil when it
    /// recorded none, or for a replaying save): how a container tells its own saves from other
    /// writers' when it reads the history (``PersistentContainer/changes()``).
    public var recordedSequence: Int64?

    /// Creates a result.
    public init(permanentIDs: [ObjectID], updatedVersions: [Int64], recordedSequence: Int64? = nil) {
        self.permanentIDs = permanentIDs
        self.updatedVersions = updatedVersions
        self.recordedSequence = recordedSequence
    }

    /// The result of an empty request.
    public static let empty = SaveResult(permanentIDs: [], updatedVersions: [])
}
