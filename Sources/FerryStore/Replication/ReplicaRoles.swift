import Foundation
import FerryModel

// What replication needs of a store, one role per protocol (a handful of requirements each):
// ``ReplicaStore`` is all of them together. A part of replication that needs one role takes
// only that one (``OriginTrust`` the key ring, the change feed the log).

/// The store's history as its readers see it: its vector, pages of change sets after a vector,
/// what took effect after a rank, and a signal after each commit.
public protocol ChangeSetLog: Sendable {
    /// The store's UUID, model hash and version vector.
    func historyState() throws -> HistoryState
    /// The change sets `vector` does not cover, as canonical JSON lines, in an order that applies as is.
    func changeSetLines(after vector: VersionVector, limit: Int?) throws -> [String]
    /// One page of those lines, after position `cursor` (0 to start). A store may give a large line
    /// in pieces (``ChangeSetPage/Line``), so that serving or pushing it holds little of it at a time.
    /// With `maximumBytes`, only the first lines whose texts, a newline after each, add up to at most
    /// that, and always the first (what one push request may carry); the lines past them are not read.
    /// - Throws: ``HistoryError/purged(origin:needed:purgedThrough:)`` when some were purged.
    func changeSetPage(after vector: VersionVector, cursor: Int64, limit: Int, maximumBytes: Int?) throws -> ChangeSetPage
    /// The rank of the newest change set in the history (0 when there is none): where a reader of
    /// ``appliedChangeSets(afterRank:limit:maximumBytes:)`` starts to see only what comes next.
    func lastChangeSetRank() throws -> Int64
    /// The change sets that took effect here (made here or applied; not quarantined ones) recorded
    /// after `rank`, in the order recorded, at most `limit`, and the rank of the last one read
    /// (`rank` when none). With `maximumBytes`, only the first ones whose texts add up to at most
    /// that (always the first): the rest are not read. What ``PersistentContainer/changes()`` reads
    /// after each commit, a few megabytes at a time, however large a backlog the store took in.
    func appliedChangeSets(afterRank rank: Int64, limit: Int, maximumBytes: Int?) throws -> (changeSets: [ChangeSet], lastRank: Int64)
    /// A signal after each commit to the store, by this process or another.
    func commits() -> AsyncStream<Void>
}

/// Keeping the history bounded and whole: purges, its size, removing a bogus origin, snapshots.
public protocol HistoryMaintenance: Sendable {
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
    /// A consistent snapshot of the store, written to a file of its own (docs/SYNC.md,
    /// "Snapshots"): a new store installs it to start from what this one holds. The file is
    /// already unlinked; it goes when the handle is closed.
    /// - Throws: ``StoreError`` when it cannot be written; a store that keeps no file (in
    ///   memory) makes none.
    func writeSnapshot() throws -> SnapshotFile
}

/// The public keys of the origins a store knows, its own among them (docs/SYNC.md, "Signed change sets").
public protocol OriginKeyRing: Sendable {
    /// The store's UUID: the origin whose key is its own.
    var identifier: UUID { get }
    /// The public keys the store holds, its own and other origins' (docs/SYNC.md, "Signed change
    /// sets"), by origin and first sequence number.
    func originKeys() throws -> [OriginKey]
    /// Records `key`, replacing the one of the same origin and public key.
    func recordOriginKey(_ key: OriginKey) throws
}

/// Received change sets that cannot be applied yet, and where an apply starts from.
public protocol HoldingArea: Sendable {
    /// What an apply starts from, in one read: the version vector and the change sets held back.
    func replayStart() throws -> ReplayStart
    /// Keeps a received change set that cannot be applied yet.
    func hold(_ changeSet: HeldChangeSet) throws
    /// The change sets held back, with why.
    func heldChangeSets() throws -> [HeldChangeSet]
    /// Forgets a held change set (applied, or a duplicate).
    func release(origin: UUID, sequence: Int64) throws
    /// How many change sets are held back and how many quarantined, without reading them.
    func backlog() throws -> Backlog
}

/// Received change sets that took no effect here: applied without effect, quarantined, or applied
/// though they left a rule broken.
public protocol ReceivedRecords: Sendable {
    /// Records a received change set that changed no rows: applied without effect, or quarantined.
    func recordReceived(_ changeSet: ChangeSet, body: String, as record: ReceivedRecord) throws
    /// The quarantined change sets, with their reasons, in the order received.
    func quarantinedChangeSets() throws -> [HeldChangeSet]
    /// The change sets applied although they left the store breaking a rule of the model (they met
    /// concurrent changes here; see ``ReplayAnnotation/leftInvalid``), in the order taken in, with what broke.
    func changeSetsLeftInvalid() throws -> [HeldChangeSet]
}

/// Finding replicated objects: by origin URI (through merges), by their own URI, and by the
/// values of a uniqueness constraint.
public protocol ReplicaObjects: Sendable {
    /// The ID a URI of this store's own namespace names by itself (no lookup).
    func ownObjectID(forURI uri: String) -> ObjectID?
    /// For a batch of distinct origin URIs, in one read: which were deleted here, and the local IDs of those mapped to rows.
    func lookUp(originURIs uris: [String]) throws -> OriginLookup
    /// ``lookUp(originURIs:)`` for a replay, which writes next: the store may read where it writes
    /// (`SQLiteStore`: on its writer's connection, whose cache holds what the last replay wrote).
    /// The same answer; by default, ``lookUp(originURIs:)``.
    func lookUpForReplay(originURIs uris: [String]) throws -> OriginLookup
    /// The origin URI of a local object: the URI it was born with elsewhere, or its own.
    func originURI(of id: ObjectID) throws -> String
    /// For each of `uris` that was merged into another object, the survivor it stands for
    /// now (followed through later merges); URIs never merged are absent.
    func aliases(of uris: [String]) throws -> [String: String]
    /// Whether an object (of the constraint's entity or a subentity) holds any of these attribute
    /// values of `constraint`, in its properties' order. A default answers with fetch requests.
    func holdsAny(of keys: [[AttributeValue]], for constraint: UniquenessConstraint) throws -> Bool
}

/// What a store remembers of deleted and merged objects: whether an origin URI was deleted here,
/// its tombstone, and the values merged duplicates carried.
public protocol Graveyard: Sendable {
    /// Whether an object (by origin URI) was deleted here.
    func isBuried(_ uri: String) throws -> Bool
    /// A deleted object's tombstone.
    func tombstone(of uri: String) throws -> Tombstone?
    /// The deleted objects (by origin URI) whose tombstone's values or memberships name `uri`: the former
    /// members of its to-many relationships. Read only for repairs
    /// (a to-many left below its minimum), so it may look at every tombstone.
    func tombstones(referringTo uri: String) throws -> [String: Tombstone]
    /// The values merged duplicates brought to the object `uri` names (an origin URI) for attributes its
    /// entity lacks, by attribute name: kept for a later merge of it into an object that has them.
    func carriedValues(of uri: String) throws -> [String: CarriedValue]
}

/// The clocks the merge rules compare (docs/SYNC.md): who last wrote a property, positions in
/// ordered relationships, and the change sets that restored an object.
public protocol MergeClocks: Sendable {
    /// Who last wrote a property of an object after its insert.
    func lastWrite(of id: ObjectID, property: String) throws -> WriteStamp?
    /// Every clock of an object's properties (and membership facts, positions, existence).
    func lastWrites(of id: ObjectID) throws -> [String: WriteStamp]
    /// Every object with a clock for `property` (a membership fact `relationship member-URI`), with
    /// that clock. A scan of every clock: for merges of duplicates only.
    func writes(of property: String) throws -> [ObjectID: WriteStamp]
    /// The position keys of the members of an ordered to-many relationship of an object,
    /// by member origin URI (see `docs/SYNC.md`, "Ordered relationships").
    func positions(of id: ObjectID, relationship: String) throws -> [String: String]
    /// For each of `uris` that was ever restored after a delete, the change sets that restored it
    /// (received or made here); URIs never restored are absent. A change that knows none of them was
    /// made concurrently with the delete they undid (docs/SYNC.md, "Restored objects").
    func restores(of uris: [String]) throws -> [String: Set<ChangeSetMark>]
}

/// Writes a replayed change set: the rows of `request` and, in the same transaction, the
/// change set as received (not a new local one), its writes stamped with its clock, and what
/// else the save did here (delete propagation, repairs) as a new local change set. The one
/// write path of replays: an application's ``PersistentStore/save(_:)`` carries no replay.
public protocol ReplayWriter: Sendable {
    /// Saves `request` as the replay `replay` describes; recorded even when it writes no row (a
    /// restore, a count repair, a duplicate merged away at once).
    /// - Throws: ``SaveError/conflict(objectURIs:)`` when another writer changed the same rows
    ///   (nothing is written), ``SaveError/storeFailed(_:)`` when the store cannot write.
    func saveReplay(_ request: SaveRequest, recording replay: ReplayAnnotation) throws -> SaveResult
}
