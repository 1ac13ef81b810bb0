import Foundation
import FerryModel

/// One save, as recorded in a store's history and sent to peers: who made it,
/// where it stands in its origin's sequence, and what it changed, with every
/// object named by its origin URI.
public struct ChangeSet: Sendable, Hashable {
    /// The newest wire format version this library reads and writes. A change set is
    /// written in format 1 unless it carries positions of ordered to-many members
    /// (``ObjectChange/positions``), merges of duplicates (``ObjectChange/Kind/merge``) or
    /// memberships of a deleted object (``ObjectChange/added`` of a delete), which need format 2; so peers that read only format 1 still read every change set
    /// of a model without ordered relationships or uniqueness constraints.
    public static let formatVersion = 2
    /// The format versions this library reads.
    public static let readableFormats: ClosedRange<Int> = 1...2

    /// The store where the save happened.
    public var origin: UUID
    /// The save's place in its origin's history: 1, 2, 3, … without gaps.
    public var sequence: Int64
    /// When it happened, on the origin's hybrid logical clock.
    public var timestamp: HybridTimestamp
    /// `ManagedObjectContext.transactionAuthor` of the saving context.
    public var author: String?
    /// `ManagedObjectContext.name` of the saving context.
    public var contextName: String?
    /// The version hash of the model the origin saved with.
    public var modelHash: String
    /// The origin's version vector when it saved, for the other origins it had
    /// applied: a replica applies this set only after those.
    public var dependencies: [UUID: Int64]
    /// The changes, in the order they were made.
    public var changes: [ObjectChange]
    /// The origin's Ed25519 signature (base64) over the line's bytes before it
    /// (``ChangeSetSignature``); nil for a change set recorded before its origin had a key.
    /// Changing any other field makes it wrong.
    public var signature: String?

    /// Creates a change set.
    public init(origin: UUID, sequence: Int64, timestamp: HybridTimestamp, author: String? = nil, contextName: String? = nil,
                modelHash: String, dependencies: [UUID: Int64] = [:], changes: [ObjectChange], signature: String? = nil) {
        self.signature = signature
        self.origin = origin
        self.sequence = sequence
        self.timestamp = timestamp
        self.author = author
        self.contextName = contextName
        self.modelHash = modelHash
        self.dependencies = dependencies
        self.changes = changes
    }
}

/// What one change set did to one object.
public struct ObjectChange: Sendable, Hashable {
    /// The kind of change.
    public enum Kind: String, Sendable, Hashable {
        /// A new object, with all its persistent values.
        case insert
        /// Changed properties of an existing object.
        case update
        /// A removed object, with its last values (the tombstone).
        case delete
        /// An object brought back after a delete that a Deny rule refused
        /// somewhere, with all its values; it wins over deletes older than it.
        case restore
        /// An object merged into another of a different origin with the same unique key
        /// (``ObjectChange/mergedInto``): its origin URI becomes an alias of the survivor.
        /// Needs change-set format 2.
        case merge
    }

    /// Insert, update or delete.
    public var kind: Kind
    /// The object's origin URI.
    public var uri: String
    /// The object's entity.
    public var entity: String
    /// Attribute and to-one values: all of them for an insert or a restore, the
    /// changed ones for an update, the last ones for a delete. To-one relationships appear
    /// only on the side that stores them (the canonical side).
    public var values: [String: ChangeValue]
    /// Members added to to-many relationships kept on this side (many-to-many
    /// and one-way to-many), by relationship name. A restore carries all its join-table
    /// memberships here, both sides; a delete carries its memberships in the many-to-many
    /// relationships whose other side has a minimum count (both sides, needs format 2): the
    /// tombstone's memberships, for bringing a member back to that minimum.
    public var added: [String: [String]]
    /// Members removed from such relationships.
    public var removed: [String: [String]]
    /// New positions of members of this object's ordered to-many relationships: relationship
    /// name → member origin URI → position key (see `docs/SYNC.md`, "Ordered relationships").
    /// Recorded on the object that owns the ordered relationship, whichever side records
    /// the membership itself. Needs change-set format 2.
    public var positions: [String: [String: String]]
    /// For a merge, the origin URI of the object this one was merged into (the survivor).
    public var mergedInto: String?

    /// Creates an object change.
    public init(kind: Kind, uri: String, entity: String, values: [String: ChangeValue] = [:],
                added: [String: [String]] = [:], removed: [String: [String]] = [:], positions: [String: [String: String]] = [:],
                mergedInto: String? = nil) {
        self.kind = kind
        self.uri = uri
        self.entity = entity
        self.values = values
        self.added = added
        self.removed = removed
        self.positions = positions
        self.mergedInto = mergedInto
    }

    /// Whether reading this change needs format 2 (positions, merges, memberships of a delete).
    var needsFormat2: Bool { !positions.isEmpty || kind == .merge || (kind == .delete && !added.isEmpty) }
}

/// An object deleted (or to be deleted) by URI: a tombstone without values, or a delete a
/// replica records as a repair.
public struct DeletedObject: Sendable, Hashable {
    /// The object's origin URI.
    public var uri: String
    /// Its entity.
    public var entity: String

    public init(uri: String, entity: String) {
        self.uri = uri
        self.entity = entity
    }
}

/// A property value in a change set.
public enum ChangeValue: Sendable, Hashable {
    /// No value (nil attribute, empty to-one).
    case null
    /// An attribute value.
    case attribute(AttributeValue)
    /// A to-one destination, by origin URI.
    case object(String)
}

/// A store's progress: for each origin, the highest sequence number such that
/// every change set up to it has been received.
public typealias VersionVector = [UUID: Int64]
