import Foundation
import FerryModel

/// What replication needs of a store, beyond ``PersistentStore``: its history
/// (the version vector, pages of change sets after a vector), the change sets it
/// holds back or quarantined, the merge metadata of the rules in docs/SYNC.md
/// (last-write clocks, tombstones, the map from origin URIs to local objects),
/// recording a received change set, purging, and a signal after each commit.
///
/// The replay engine, the peer client and the HTTP server (FerrySync,
/// FerryServer) see a store only through this protocol. `SQLiteStore` conforms.
public protocol ReplicaStore: PersistentStore {
    /// The version hash of the store's model, worked out once.
    var modelVersionHash: String { get }
    /// Earlier versions of the store's model it knows (the bundle's, and those it was opened
    /// with before): change sets made with one of them are translated and applied
    /// (``ChangeSetTranslation``); those of a version it does not know wait.
    var earlierModels: [ManagedObjectModel] { get }

    // MARK: History

    /// The store's UUID, model hash and version vector.
    func historyState() throws -> HistoryState
    /// The public keys the store holds, its own and other origins' (docs/SYNC.md, "Signed change
    /// sets"), by origin and first sequence number.
    func originKeys() throws -> [OriginKey]
    /// Records `key`, replacing the one of the same origin and public key.
    func recordOriginKey(_ key: OriginKey) throws
    /// The change sets `vector` does not cover, as canonical JSON lines, in an order that applies as is.
    func changeSetLines(after vector: VersionVector, limit: Int?) throws -> [String]
    /// One page of those lines, after position `cursor` (0 to start). A store may give a large line
    /// in pieces (``ChangeSetPage/Line``), so that serving or pushing it holds little of it at a time.
    /// With `maximumBytes`, only the first lines whose texts, a newline after each, add up to at most
    /// that, and always the first (what one push request may carry); the lines past them are not read.
    /// - Throws: ``HistoryError/purged(origin:needed:purgedThrough:)`` when some were purged.
    func changeSetPage(after vector: VersionVector, cursor: Int64, limit: Int, maximumBytes: Int?) throws -> ChangeSetPage
    /// Drops what `policy` allows: change sets every peer has and old enough, tombstones past the
    /// horizon (docs/SYNC.md, "Bounded history").
    func purgeHistory(_ policy: PurgePolicy) throws -> PurgeReport
    /// How much history the store keeps.
    func historySize() throws -> HistorySize
    /// Forgets every change set of `origin` (its history, its place in the vector, the ones
    /// held back): an operator's way to remove a bogus origin. The objects its change sets
    /// made stay. Returns how many change sets went.
    /// - Throws: ``HistoryError/ownOrigin`` for this store's own origin.
    func removeOrigin(_ origin: UUID) throws -> Int
    /// A signal after each commit to the store, by this process or another.
    func commits() -> AsyncStream<Void>
    /// The rank of the newest change set in the history (0 when there is none): where a reader of
    /// ``appliedChangeSets(afterRank:limit:maximumBytes:)`` starts to see only what comes next.
    func lastChangeSetRank() throws -> Int64
    /// The change sets that took effect here (made here or applied; not quarantined ones) recorded
    /// after `rank`, in the order recorded, at most `limit`, and the rank of the last one read
    /// (`rank` when none). With `maximumBytes`, only the first ones whose texts add up to at most
    /// that (always the first): the rest are not read. What ``PersistentContainer/changes()`` reads
    /// after each commit, a few megabytes at a time, however large a backlog the store took in.
    func appliedChangeSets(afterRank rank: Int64, limit: Int, maximumBytes: Int?) throws -> (changeSets: [ChangeSet], lastRank: Int64)
    /// A consistent snapshot of the store, written to a file of its own (docs/SYNC.md,
    /// "Snapshots"): a new store installs it to start from what this one holds. The file is
    /// already unlinked; it goes when the handle is closed.
    /// - Throws: ``StoreError`` when it cannot be written; a store that keeps no file (in
    ///   memory) makes none.
    func writeSnapshot() throws -> SnapshotFile

    // MARK: Received change sets that wait or were refused

    /// What an apply starts from, in one read: the version vector and the change sets held back.
    func replayStart() throws -> ReplayStart
    /// Keeps a received change set that cannot be applied yet.
    func hold(_ changeSet: HeldChangeSet) throws
    /// The change sets held back, with why.
    func heldChangeSets() throws -> [HeldChangeSet]
    /// Forgets a held change set (applied, or a duplicate).
    func release(origin: UUID, sequence: Int64) throws
    /// The quarantined change sets, with their reasons, in the order received.
    func quarantinedChangeSets() throws -> [HeldChangeSet]
    /// The change sets applied although they left the store breaking a rule of the model (they met
    /// concurrent changes here; see ``ReplayAnnotation/leftInvalid``), in the order taken in, with what broke.
    func changeSetsLeftInvalid() throws -> [HeldChangeSet]
    /// How many change sets are held back and how many quarantined, without reading them.
    func backlog() throws -> Backlog
    /// Records a received change set that changed no rows: applied without effect, or quarantined.
    func recordReceived(_ changeSet: ChangeSet, body: String, as record: ReceivedRecord) throws

    // MARK: Merge metadata

    /// The local ID of an object named by origin URI (see ``PersistentStore/localObjectID(forOriginURI:)``);
    /// nil when it never arrived, and when an object from another store was deleted here.
    func localObjectID(forOriginURI uri: String) throws -> ObjectID?
    /// The ID a URI of this store's own namespace names by itself (no lookup).
    func ownObjectID(forURI uri: String) -> ObjectID?
    /// For a batch of distinct origin URIs, in one read: which were deleted here, and the local IDs of those mapped to rows.
    func lookUp(originURIs uris: [String]) throws -> OriginLookup
    /// ``lookUp(originURIs:)`` for a replay, which writes next: the store may read where it writes
    /// (`SQLiteStore`: on its writer's connection, whose cache holds what the last replay wrote).
    /// The same answer; by default, ``lookUp(originURIs:)``.
    func lookUpForReplay(originURIs uris: [String]) throws -> OriginLookup
    /// Whether an object (by origin URI) was deleted here.
    func isBuried(_ uri: String) throws -> Bool
    /// A deleted object's tombstone.
    func tombstone(of uri: String) throws -> Tombstone?
    /// The deleted objects (by origin URI) whose tombstone's values or memberships name `uri`: the former
    /// members of its to-many relationships. Read only for repairs
    /// (a to-many left below its minimum), so it may look at every tombstone.
    func tombstones(referringTo uri: String) throws -> [String: Tombstone]
    /// Who last wrote a property of an object after its insert.
    func lastWrite(of id: ObjectID, property: String) throws -> WriteStamp?
    /// The position keys of the members of an ordered to-many relationship of an object,
    /// by member origin URI (see `docs/SYNC.md`, "Ordered relationships").
    func positions(of id: ObjectID, relationship: String) throws -> [String: String]
    /// The origin URI of a local object: the URI it was born with elsewhere, or its own.
    func originURI(of id: ObjectID) throws -> String
    /// For each of `uris` that was merged into another object, the survivor it stands for
    /// now (followed through later merges); URIs never merged are absent.
    func aliases(of uris: [String]) throws -> [String: String]
    /// Every clock of an object's properties (and membership facts, positions, existence).
    func lastWrites(of id: ObjectID) throws -> [String: WriteStamp]
    /// The values merged duplicates brought to the object `uri` names (an origin URI) for attributes its
    /// entity lacks, by attribute name: kept for a later merge of it into an object that has them.
    func carriedValues(of uri: String) throws -> [String: CarriedValue]
    /// Every object with a clock for `property` (a membership fact `relationship member-URI`), with
    /// that clock. A scan of every clock: for merges of duplicates only.
    func writes(of property: String) throws -> [ObjectID: WriteStamp]
    /// For each of `uris` that was ever restored after a delete, the change sets that restored it
    /// (received or made here); URIs never restored are absent. A change that knows none of them was
    /// made concurrently with the delete they undid (docs/SYNC.md, "Restored objects").
    func restores(of uris: [String]) throws -> [String: Set<ChangeSetMark>]
    /// Whether an object (of the constraint's entity or a subentity) holds any of these attribute
    /// values of `constraint`, in its properties' order. A default answers with fetch requests.
    func holdsAny(of keys: [[AttributeValue]], for constraint: UniquenessConstraint) throws -> Bool
}

/// How many received change sets wait, and how many were quarantined (``ReplicaStore/backlog()``).
public struct Backlog: Sendable, Equatable {
    public var waiting: Int
    public var quarantined: Int
    /// Change sets applied although they left the store breaking a rule of the model
    /// (``ReplicaStore/changeSetsLeftInvalid()``).
    public var leftInvalid: Int
    /// Of the waiting ones, those made with a model version this store cannot read yet (they
    /// apply once it is upgraded).
    public var waitingForModel: Int

    public init(waiting: Int, quarantined: Int, leftInvalid: Int = 0, waitingForModel: Int = 0) {
        self.waiting = waiting
        self.quarantined = quarantined
        self.leftInvalid = leftInvalid
        self.waitingForModel = waitingForModel
    }

    /// The reason a change set held for its model version starts with.
    package static let modelReasonPrefix = "made with model "
}

/// What an apply starts from (``ReplicaStore/replayStart()``).
public struct ReplayStart: Sendable {
    /// The store's version vector.
    public var vector: VersionVector
    /// The change sets held back, in origin and sequence order.
    public var held: [HeldChangeSet]
    /// What a change set taken in must know of (in its causal past): per origin, the last change set
    /// made before the tombstone horizon; empty while no tombstone was forgotten.
    public var horizon: VersionVector
    /// When the horizon is (deletes made before it are forgotten).
    public var horizonTime: HybridTimestamp?

    public init(vector: VersionVector, held: [HeldChangeSet], horizon: VersionVector = [:], horizonTime: HybridTimestamp? = nil) {
        self.vector = vector
        self.held = held
        self.horizon = horizon
        self.horizonTime = horizonTime
    }
}

/// A received change set kept outside the history: held (waiting) or quarantined.
public struct HeldChangeSet: Sendable, Equatable {
    public var origin: UUID
    public var sequence: Int64
    /// Why it is held or quarantined.
    public var reason: String
    /// Its canonical text.
    public var body: String

    public init(origin: UUID, sequence: Int64, reason: String, body: String) {
        self.origin = origin
        self.sequence = sequence
        self.reason = reason
        self.body = body
    }
}

/// How a received change set that changed no rows is recorded.
public struct ReceivedRecord: Sendable {
    /// Why it was quarantined; nil when it was applied (without effect on rows).
    public var quarantineReason: String?
    /// The properties it won, per object (their clocks are stamped).
    public var writes: [ObjectID: Set<String>]
    /// Objects it deleted that were not here: tombstones only.
    public var tombstones: [DeletedObject]
    /// Deletes this store must record as a repair change set of its own.
    public var repairDeletes: [DeletedObject]
    /// Whether it is a retry of a quarantined change set.
    public var isRetry: Bool

    public init(quarantineReason: String? = nil, writes: [ObjectID: Set<String>] = [:], tombstones: [DeletedObject] = [],
                repairDeletes: [DeletedObject] = [], isRetry: Bool = false) {
        self.quarantineReason = quarantineReason
        self.writes = writes
        self.tombstones = tombstones
        self.repairDeletes = repairDeletes
        self.isRetry = isRetry
    }
}

/// What one batched look-up of origin URIs found.
public struct OriginLookup: Sendable, Equatable {
    /// The URIs of objects deleted here.
    public var buried: Set<String>
    /// The URIs mapped to local rows (objects born elsewhere, or brought back).
    public var mapped: [String: ObjectID]
    /// URIs of this store's own namespace that name a row born here, by that row's ID (whether
    /// the row still exists is the caller's to check). A row that holds an object from elsewhere
    /// is never named by its number: such a URI is in none of the three.
    public var own: [String: ObjectID]
    /// The URIs of merged duplicates: they stand for their survivors (``ReplicaStore/aliases(of:)``).
    public var aliased: Set<String>

    public init(buried: Set<String> = [], mapped: [String: ObjectID] = [:], own: [String: ObjectID] = [:], aliased: Set<String> = []) {
        self.buried = buried
        self.mapped = mapped
        self.own = own
        self.aliased = aliased
    }
}

/// A snapshot written to a file that is no longer in any folder: read it through `handle`
/// (from the start), and close it when done.
public struct SnapshotFile: Sendable {
    /// The open file.
    public let handle: FileHandle
    /// Its size in bytes.
    public let size: Int64

    public init(handle: FileHandle, size: Int64) {
        self.handle = handle
        self.size = size
    }
}

extension ReplicaStore {
    /// ``changeSetPage(after:cursor:limit:maximumBytes:)`` without a bound on its bytes.
    public func changeSetPage(after vector: VersionVector, cursor: Int64, limit: Int) throws -> ChangeSetPage {
        try changeSetPage(after: vector, cursor: cursor, limit: limit, maximumBytes: nil)
    }

    public func lookUpForReplay(originURIs uris: [String]) throws -> OriginLookup {
        try lookUp(originURIs: uris)
    }

    /// Deletes the change sets every vector of `peers` covers, whatever their age; returns how many went.
    @discardableResult
    public func purgeChangeSets(acknowledgedBy peers: [VersionVector]) throws -> Int {
        try purgeHistory(PurgePolicy(acknowledged: peers)).changeSets
    }
}

/// A deleted object's tombstone: its entity, last values, and the delete's clock.
public struct Tombstone: Sendable, Equatable {
    public var entity: String
    public var values: [String: ChangeValue]
    /// Its last memberships in many-to-many relationships whose other side has a minimum count
    /// (both sides, by relationship name): see ``ManagedObjectModel/tombstoneMemberships(of:)``.
    public var memberships: [String: [String]]
    public var timestamp: HybridTimestamp
    public var origin: UUID

    public init(entity: String, values: [String: ChangeValue], memberships: [String: [String]] = [:],
                timestamp: HybridTimestamp, origin: UUID) {
        self.entity = entity
        self.values = values
        self.memberships = memberships
        self.timestamp = timestamp
        self.origin = origin
    }

    /// Whether its last values or memberships name `uri`.
    public func names(_ uri: String) -> Bool {
        values.values.contains(.object(uri)) || memberships.values.contains { $0.contains(uri) }
    }
}

/// A value of an attribute that a merged duplicate had and its survivor's entity lacks (a sibling
/// entity under one constraint of their parent), kept beside the survivor with the clock of its last
/// write (nil: never written since the insert), so that merging the survivor into an object that has
/// the attribute weighs it as if the duplicates had merged there directly.
public struct CarriedValue: Sendable, Equatable {
    /// The entity that has the attribute.
    public var entity: String
    public var value: ChangeValue
    public var stamp: WriteStamp?

    public init(entity: String, value: ChangeValue, stamp: WriteStamp?) {
        self.entity = entity
        self.value = value
        self.stamp = stamp
    }
}

/// One change set, named by its origin and sequence number.
public struct ChangeSetMark: Sendable, Hashable, Comparable {
    public var origin: UUID
    public var sequence: Int64

    public init(origin: UUID, sequence: Int64) {
        self.origin = origin
        self.sequence = sequence
    }

    public static func < (lhs: ChangeSetMark, rhs: ChangeSetMark) -> Bool {
        (lhs.origin.uuidString, lhs.sequence) < (rhs.origin.uuidString, rhs.sequence)
    }
}

extension ChangeSet {
    /// Whether `mark` is in this change set's causal past: an earlier change set of its own
    /// origin, or one its origin had applied when it saved (its `deps`).
    public func knows(_ mark: ChangeSetMark) -> Bool {
        if mark.origin == origin { return mark.sequence < sequence }
        return dependencies[mark.origin, default: 0] >= mark.sequence
    }

    /// The clock every write of this change set carries.
    public var stamp: WriteStamp { WriteStamp(timestamp: timestamp, origin: origin) }

    /// The objects this change set restores, by origin URI.
    public var restoredURIs: [String] {
        changes.filter { $0.kind == .restore }.map(\.uri)
    }
}

/// Who wrote a value last: a timestamp and the origin that made it. Later is greater: by
/// timestamp, ties broken by origin UUID as text (docs/SYNC.md, "Merge rules").
public struct WriteStamp: Sendable, Equatable, Comparable {
    public var timestamp: HybridTimestamp
    public var origin: UUID

    public init(timestamp: HybridTimestamp, origin: UUID) {
        self.timestamp = timestamp
        self.origin = origin
    }

    public static func < (lhs: WriteStamp, rhs: WriteStamp) -> Bool {
        if lhs.timestamp != rhs.timestamp { return lhs.timestamp < rhs.timestamp }
        return lhs.origin.uuidString < rhs.origin.uuidString
    }
}

/// Two objects of different origins that had one unique key, merged into one (docs/SYNC.md,
/// "Uniqueness constraints across replicas"): the loser's row goes, and its origin URI becomes
/// an alias of the survivor's, so change sets naming it land on the survivor.
public struct MergedDuplicate: Sendable, Hashable {
    /// The loser's local row (gone after the save).
    public var loser: ObjectID
    /// The loser's origin URI.
    public var loserURI: String
    /// The survivor's origin URI.
    public var survivorURI: String
    /// Whether the replayed change set made the merge; else this store found the duplicate,
    /// and records the merge in a change set of its own.
    public var isReplayed: Bool

    public init(loser: ObjectID, loserURI: String, survivorURI: String, isReplayed: Bool) {
        self.loser = loser
        self.loserURI = loserURI
        self.survivorURI = survivorURI
        self.isReplayed = isReplayed
    }
}

extension ReplicaStore {
    /// ``appliedChangeSets(afterRank:limit:maximumBytes:)`` bounded by count alone.
    public func appliedChangeSets(afterRank rank: Int64, limit: Int) throws -> (changeSets: [ChangeSet], lastRank: Int64) {
        try appliedChangeSets(afterRank: rank, limit: limit, maximumBytes: nil)
    }
}
