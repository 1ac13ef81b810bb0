import Foundation
import FerryModel

/// What replication needs of a store, beyond ``PersistentStore``: every role of
/// ReplicaRoles.swift — its history (``ChangeSetLog``, ``HistoryMaintenance``), the keys of
/// its origins (``OriginKeyRing``), the change sets it holds back or took in without effect
/// (``HoldingArea``, ``ReceivedRecords``), and the merge metadata of the rules in docs/SYNC.md
/// (``ReplicaObjects``, ``Graveyard``, ``MergeClocks``), writing replays (``ReplayWriter``) —
/// and the model versions it reads.
///
/// The replay engine, the peer client and the HTTP server (FerrySync, FerryServer) see a store
/// through these protocols. `SQLiteStore` and `InMemoryStore` conform.
public protocol ReplicaStore: PersistentStore, ChangeSetLog, HistoryMaintenance, OriginKeyRing, HoldingArea, ReceivedRecords,
                              ReplicaObjects, Graveyard, MergeClocks, ReplayWriter {
    /// The version hash of the store's model, worked out once.
    var modelVersionHash: String { get }
    /// Earlier versions of the store's model it knows (the bundle's, and those it was opened
    /// with before): change sets made with one of them are translated and applied
    /// (``ChangeSetTranslation``); those of a version it does not know wait.
    var earlierModels: [ManagedObjectModel] { get }
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

extension ChangeSetLog {
    /// ``changeSetPage(after:cursor:limit:maximumBytes:)`` without a bound on its bytes.
    public func changeSetPage(after vector: VersionVector, cursor: Int64, limit: Int) throws -> ChangeSetPage {
        try changeSetPage(after: vector, cursor: cursor, limit: limit, maximumBytes: nil)
    }
}

extension ReplicaObjects {
    public func lookUpForReplay(originURIs uris: [String]) throws -> OriginLookup {
        try lookUp(originURIs: uris)
    }
}

extension HistoryMaintenance {
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
