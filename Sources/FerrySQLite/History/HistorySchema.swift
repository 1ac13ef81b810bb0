import Foundation
import GRDB
import FerryStore

/// The tables behind change sets, identity and merging, created with every
/// store (and added to stores made before them):
///
/// - `Z_FERRY_CHANGESET`: every change set this store has — its own and those
///   it received — in the order it took them in (`Z_RANK`), with its status
///   (applied or quarantined, with the reason) and its JSON body.
/// - `Z_FERRY_PENDING`: received change sets not taken in yet: waiting for a
///   predecessor, or made with another model version.
/// - `Z_FERRY_RANGE` and `Z_FERRY_OBJECT`: origin URI ↔ local row, for objects
///   inserted elsewhere, as runs of consecutive URIs and rows, and single
///   entries (``IdentityMap`` explains the two).
/// - `Z_FERRY_CLOCK`: per (row, property) the (timestamp, origin) of the last
///   write after the insert, for last-writer-wins merging.
/// - `Z_FERRY_POSITION`: per (row, ordered to-many relationship, member origin URI)
///   the member's position key (``OrderedPositions``); its clock is in `Z_FERRY_CLOCK`.
/// - `Z_FERRY_ALIAS`: origin URIs of merged duplicates → the survivor's origin URI, with the merge's
///   clock (dropped past the tombstone horizon, as tombstones are).
/// - `Z_FERRY_CARRIED`: values merged duplicates brought to survivors whose entity lacks the
///   attribute, by survivor origin URI and attribute (``CarriedValue``): the entity that has the
///   attribute, the value as JSON, and the clock of its last write.
/// - `Z_FERRY_TOMBSTONE`: deleted objects by origin URI, with their last values.
/// - `Z_FERRY_RESTORE`: objects restored after a delete (by origin URI) and the change sets
///   that restored them, taken in or made here.
/// - `Z_FERRY_STATE`: the hybrid logical clock's last timestamp, and the tombstone horizon.
/// - `Z_FERRY_HORIZON`: per origin, the last change set made before the tombstone horizon: what
///   every change set taken in must know of (docs/SYNC.md, "Bounded history").
/// - `Z_FERRY_PURGE_MARK`: per origin, the last change set purged and its clock (for the horizon).
/// - `Z_FERRY_KEY`: the public keys the store holds (``OriginKey``): its own, and other origins'
///   pinned, trusted on first use or endorsed by a rotation, each with the first sequence number
///   it signs and, once revoked, the time from which its signatures are refused.
/// - `Z_FERRY_VECTOR`: per origin, the last sequence number taken in and the
///   last one purged (change sets up to it are no longer in the history).
enum HistorySchema {
    static let statements = [
        """
        CREATE TABLE IF NOT EXISTS Z_FERRY_CHANGESET (Z_RANK INTEGER PRIMARY KEY, Z_ORIGIN TEXT NOT NULL, Z_SEQ INTEGER NOT NULL,
            Z_HLC INTEGER NOT NULL, Z_STATUS INTEGER NOT NULL, Z_REASON TEXT, Z_BODY TEXT NOT NULL, UNIQUE (Z_ORIGIN, Z_SEQ))
        """,
        """
        CREATE TABLE IF NOT EXISTS Z_FERRY_PENDING (Z_ORIGIN TEXT NOT NULL, Z_SEQ INTEGER NOT NULL, Z_REASON TEXT NOT NULL,
            Z_BODY TEXT NOT NULL, PRIMARY KEY (Z_ORIGIN, Z_SEQ))
        """,
        // WITHOUT ROWID: the URI is the table's own key (one B-tree, not a rowid table plus a text index).
        // Stores made before keep the older shape, which works the same.
        "CREATE TABLE IF NOT EXISTS Z_FERRY_OBJECT (Z_URI TEXT PRIMARY KEY, Z_ROOT INTEGER NOT NULL, Z_PK INTEGER NOT NULL) WITHOUT ROWID",
        "CREATE UNIQUE INDEX IF NOT EXISTS Z_FERRY_OBJECT_ROW ON Z_FERRY_OBJECT (Z_ROOT, Z_PK)",
        // URIs Z_PREFIX || (Z_FIRST + i) for 0 <= i < Z_COUNT are rows (Z_ROOT, Z_PK + i).
        """
        CREATE TABLE IF NOT EXISTS Z_FERRY_RANGE (Z_PREFIX TEXT NOT NULL, Z_FIRST INTEGER NOT NULL, Z_COUNT INTEGER NOT NULL,
            Z_ROOT INTEGER NOT NULL, Z_PK INTEGER NOT NULL, PRIMARY KEY (Z_PREFIX, Z_FIRST)) WITHOUT ROWID
        """,
        "CREATE UNIQUE INDEX IF NOT EXISTS Z_FERRY_RANGE_ROW ON Z_FERRY_RANGE (Z_ROOT, Z_PK)",
        """
        CREATE TABLE IF NOT EXISTS Z_FERRY_CLOCK (Z_ROOT INTEGER NOT NULL, Z_PK INTEGER NOT NULL, Z_PROPERTY TEXT NOT NULL,
            Z_HLC INTEGER NOT NULL, Z_ORIGIN TEXT NOT NULL, PRIMARY KEY (Z_ROOT, Z_PK, Z_PROPERTY)) WITHOUT ROWID
        """,
        """
        CREATE TABLE IF NOT EXISTS Z_FERRY_POSITION (Z_ROOT INTEGER NOT NULL, Z_PK INTEGER NOT NULL, Z_RELATIONSHIP TEXT NOT NULL,
            Z_MEMBER TEXT NOT NULL, Z_KEY TEXT NOT NULL, PRIMARY KEY (Z_ROOT, Z_PK, Z_RELATIONSHIP, Z_MEMBER)) WITHOUT ROWID
        """,
        "CREATE TABLE IF NOT EXISTS Z_FERRY_ALIAS (Z_URI TEXT PRIMARY KEY, Z_SURVIVOR TEXT NOT NULL, Z_HLC INTEGER NOT NULL DEFAULT 0) WITHOUT ROWID",
        "CREATE INDEX IF NOT EXISTS Z_FERRY_ALIAS_SURVIVOR ON Z_FERRY_ALIAS (Z_SURVIVOR)",
        """
        CREATE TABLE IF NOT EXISTS Z_FERRY_CARRIED (Z_URI TEXT NOT NULL, Z_PROPERTY TEXT NOT NULL, Z_ENTITY TEXT NOT NULL,
            Z_VALUE TEXT NOT NULL, Z_HLC INTEGER, Z_ORIGIN TEXT, PRIMARY KEY (Z_URI, Z_PROPERTY)) WITHOUT ROWID
        """,
        """
        CREATE TABLE IF NOT EXISTS Z_FERRY_RESTORE (Z_URI TEXT NOT NULL, Z_ORIGIN TEXT NOT NULL, Z_SEQ INTEGER NOT NULL,
            PRIMARY KEY (Z_URI, Z_ORIGIN, Z_SEQ)) WITHOUT ROWID
        """,
        """
        CREATE TABLE IF NOT EXISTS Z_FERRY_TOMBSTONE (Z_URI TEXT PRIMARY KEY, Z_ENTITY TEXT NOT NULL, Z_HLC INTEGER NOT NULL,
            Z_ORIGIN TEXT NOT NULL, Z_VALUES TEXT NOT NULL)
        """,
        "CREATE TABLE IF NOT EXISTS Z_FERRY_STATE (Z_KEY TEXT PRIMARY KEY, Z_VALUE INTEGER NOT NULL)",
        "CREATE TABLE IF NOT EXISTS Z_FERRY_HORIZON (Z_ORIGIN TEXT PRIMARY KEY, Z_SEQ INTEGER NOT NULL)",
        "CREATE TABLE IF NOT EXISTS Z_FERRY_PURGE_MARK (Z_ORIGIN TEXT PRIMARY KEY, Z_SEQ INTEGER NOT NULL, Z_HLC INTEGER NOT NULL)",
        "CREATE TABLE IF NOT EXISTS Z_FERRY_VECTOR (Z_ORIGIN TEXT PRIMARY KEY, Z_SEQ INTEGER NOT NULL, Z_PURGED INTEGER NOT NULL DEFAULT 0)",
        "INSERT OR IGNORE INTO Z_FERRY_VECTOR (Z_ORIGIN, Z_SEQ) SELECT Z_ORIGIN, MAX(Z_SEQ) FROM Z_FERRY_CHANGESET GROUP BY Z_ORIGIN",
        """
        CREATE TABLE IF NOT EXISTS Z_FERRY_KEY (Z_ORIGIN TEXT NOT NULL, Z_KEY TEXT NOT NULL, Z_FROM INTEGER NOT NULL,
            Z_ENDORSEMENT TEXT, Z_SOURCE TEXT NOT NULL, Z_REVOKED INTEGER, PRIMARY KEY (Z_ORIGIN, Z_KEY)) WITHOUT ROWID
        """,
    ]

    /// Status values of `Z_FERRY_CHANGESET.Z_STATUS`.
    static let applied = 0
    static let quarantined = 1

    static func create(in db: Database) throws {
        for statement in statements { try db.execute(sql: statement) }
        // Aliases of stores made before they kept the merge's clock: dated now, so the horizon counts from here.
        if try !db.columns(in: "Z_FERRY_ALIAS").contains(where: { $0.name == "Z_HLC" }) {
            try db.execute(sql: "ALTER TABLE Z_FERRY_ALIAS ADD COLUMN Z_HLC INTEGER NOT NULL DEFAULT 0")
            try db.execute(sql: "UPDATE Z_FERRY_ALIAS SET Z_HLC = ?", arguments: [HybridTimestamp.wall(Date()).rawValue])
        }
    }
}
