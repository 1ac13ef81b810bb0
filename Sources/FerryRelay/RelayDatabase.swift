import Foundation
import Logging
import NIOCore
import PostgresNIO
import FerryModel
import FerryStore
import FerryServer

/// The relay's change sets in PostgreSQL: what every relay of a fleet shares.
///
/// Tables (created at start when missing, under an advisory lock so that relays starting together
/// do not race):
/// - `ferry_relay`: one row, the database's UUID (what `/v1/state` calls the relay's `store`, the
///   same for every relay on it, so a peer failing over sees one peer);
/// - `ferry_changesets`: every change set taken in, keyed by origin and sequence number (so two
///   relays taking the same change set at once store it once), its line byte for byte, its clock,
///   its dependencies, and `position`, the order it arrived in;
/// - `ferry_changeset_pieces`: the text of every change set of ``largeBytes`` or more, in pieces of
///   ``pieceBytes`` (its `ferry_changesets` row then holds an empty `line` and the count in `pieces`): a pull
///   serves such a change set a piece at a time, so that a relay holds a piece per pull, not the whole;
/// - `ferry_origins`: per origin, `contiguous` (every change set from the first to it is here: the
///   relay's version vector), and `purged` (the last one dropped by retention);
/// - `ferry_peers`: per store that pulls, the vector it last pulled with and when (retention waits for them);
/// - `ferry_keys`: key rotations daemons offered (`PUT /v1/keys`), each endorsed by a key the relay
///   trusted (taken with the keys of the configuration);
/// - `ferry_snapshots` and `ferry_snapshot_chunks`: the newest snapshot a daemon uploaded (its SQLite
///   file in chunks of 1 MiB), what new stores start from.
///
/// A push commits with `NOTIFY ferry_changesets`, which wakes the long polls of every relay on the database.
struct RelayDatabase: Sendable {
    let client: PostgresClient
    let logger: Logger
    /// `host:port/name`, for the status an admin sees and for errors (never the password).
    let place: String

    /// The channel a push notifies on commit.
    static let channel = "ferry_changesets"
    /// The schema this relay writes; a database with a newer one is refused.
    /// Schema 2 added `ferry_changeset_pieces` and the `pieces` and `size` columns of
    /// `ferry_changesets`; a relay of schema 1 would serve a change set stored in pieces as an empty
    /// line, so a relay of schema 2 marks the database as such, and older relays refuse to start on it.
    static let schemaVersion = 2
    /// Change sets of this many bytes or more (an answer's worth: such a change set goes alone in an
    /// answer, ``RelayPull``) are stored, and served, in pieces.
    static let largeBytes = PullRoute.answerBytes
    /// The size of those pieces: about what a pull of such a change set holds of it at a time, besides
    /// what its socket holds (the daemon's pull route writes 256 KiB at a time too).
    static let pieceBytes = 256 << 10

    /// One stored change set, as a pull serves it.
    struct StoredChangeSet: Sendable {
        var origin: UUID
        var sequence: Int64
        var dependencies: VersionVector
        /// Its text; nil when it is stored in pieces, or was not read (past a page's bytes).
        var line: ByteBuffer?
        /// How many pieces hold its text (0: `line` does).
        var pieces: Int32 = 0
        /// The length of its text.
        var byteCount: Int
    }

    /// Creates the tables when missing; returns the database's UUID.
    /// - Throws: ``RelayError`` when the database holds a newer schema or cannot be set up.
    func prepare() async throws -> UUID {
        try await client.withTransaction(logger: logger) { connection in
            // (Any constant: relays starting together take turns here.)
            try await connection.query("SELECT pg_advisory_xact_lock(7400240001)", logger: logger)
            try await connection.query("""
                CREATE TABLE IF NOT EXISTS ferry_relay (
                    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
                    fleet uuid NOT NULL,
                    schema_version integer NOT NULL,
                    created timestamptz NOT NULL DEFAULT now())
                """, logger: logger)
            try await connection.query("""
                CREATE TABLE IF NOT EXISTS ferry_origins (
                    origin uuid PRIMARY KEY,
                    contiguous bigint NOT NULL DEFAULT 0,
                    purged bigint NOT NULL DEFAULT 0)
                """, logger: logger)
            try await connection.query("""
                CREATE TABLE IF NOT EXISTS ferry_changesets (
                    origin uuid NOT NULL,
                    seq bigint NOT NULL,
                    position bigserial NOT NULL,
                    hlc bigint NOT NULL,
                    deps text NOT NULL,
                    changes integer NOT NULL,
                    line bytea NOT NULL,
                    received timestamptz NOT NULL DEFAULT now(),
                    PRIMARY KEY (origin, seq))
                """, logger: logger)
            // Schema 2: large change sets in pieces. (Looked for first: an ALTER would wait for every running pull.)
            let columns = try await connection.query("""
                SELECT count(*) FROM pg_attribute WHERE attrelid = 'ferry_changesets'::regclass AND attname IN ('pieces', 'size') AND NOT attisdropped
                """, logger: logger)
            var present: Int64 = 0
            for try await count in columns.decode(Int64.self) { present = count }
            if present < 2 {
                try await connection.query("ALTER TABLE ferry_changesets ADD COLUMN IF NOT EXISTS pieces integer NOT NULL DEFAULT 0", logger: logger)
                try await connection.query("ALTER TABLE ferry_changesets ADD COLUMN IF NOT EXISTS size bigint NOT NULL DEFAULT 0", logger: logger)
            }
            try await connection.query("""
                CREATE TABLE IF NOT EXISTS ferry_changeset_pieces (
                    origin uuid NOT NULL,
                    seq bigint NOT NULL,
                    index integer NOT NULL,
                    data bytea NOT NULL,
                    PRIMARY KEY (origin, seq, index),
                    FOREIGN KEY (origin, seq) REFERENCES ferry_changesets (origin, seq) ON DELETE CASCADE)
                """, logger: logger)
            try await connection.query("""
                CREATE TABLE IF NOT EXISTS ferry_peers (
                    store uuid PRIMARY KEY,
                    vector text NOT NULL,
                    seen timestamptz NOT NULL)
                """, logger: logger)
            try await connection.query("""
                CREATE TABLE IF NOT EXISTS ferry_keys (
                    origin uuid NOT NULL,
                    key text NOT NULL,
                    from_seq bigint NOT NULL,
                    endorsement text NOT NULL,
                    PRIMARY KEY (origin, key))
                """, logger: logger)
            try await connection.query("""
                CREATE TABLE IF NOT EXISTS ferry_snapshots (
                    id bigserial PRIMARY KEY,
                    source uuid NOT NULL,
                    size bigint NOT NULL DEFAULT 0,
                    complete boolean NOT NULL DEFAULT false,
                    taken timestamptz NOT NULL DEFAULT now())
                """, logger: logger)
            try await connection.query("""
                CREATE TABLE IF NOT EXISTS ferry_snapshot_chunks (
                    snapshot bigint NOT NULL REFERENCES ferry_snapshots (id) ON DELETE CASCADE,
                    index integer NOT NULL,
                    data bytea NOT NULL,
                    PRIMARY KEY (snapshot, index))
                """, logger: logger)
            // Chunks of a SQLite file are stored as they are (TOAST's compression would cost CPU on every
            // upload for little); set once, when the table is new (the ALTER would wait for a running download).
            let storage = try await connection.query("""
                SELECT attstorage::text FROM pg_attribute WHERE attrelid = 'ferry_snapshot_chunks'::regclass AND attname = 'data'
                """, logger: logger)
            var mode = ""
            for try await value in storage.decode(String.self) { mode = value }
            if mode != "e" {
                try await connection.query("ALTER TABLE ferry_snapshot_chunks ALTER COLUMN data SET STORAGE EXTERNAL", logger: logger)
            }
            let fresh = UUID()
            try await connection.query("""
                INSERT INTO ferry_relay (fleet, schema_version) VALUES (\(fresh), \(Self.schemaVersion)) ON CONFLICT DO NOTHING
                """, logger: logger)
            let rows = try await connection.query("SELECT fleet, schema_version FROM ferry_relay", logger: logger)
            var found: (fleet: UUID, version: Int)?
            for try await (fleet, version) in rows.decode((UUID, Int).self) { found = (fleet, version) }
            if let (fleet, version) = found {
                guard version <= Self.schemaVersion else {
                    throw RelayError(.newerSchema, "the database holds relay tables of schema \(version); " +
                                     "this Ferry writes schema \(Self.schemaVersion): upgrade Ferry on this relay")
                }
                if version < Self.schemaVersion {
                    // (Relays of the older schema still running go on until they restart; docs/FLEET.md, "Upgrading relays".)
                    try await connection.query("UPDATE ferry_relay SET schema_version = \(Self.schemaVersion)", logger: logger)
                    let message = "upgraded the relay tables from schema \(version) to \(Self.schemaVersion); " +
                        "relays of an older Ferry now refuse this database"
                    logger.notice("\(message)")
                }
                return fleet
            }
            throw RelayError(.database, "the database's ferry_relay table has no row")
        }
    }

    // MARK: - Taking change sets in

    /// What storing a batch did.
    struct StoreResult: Sendable {
        /// Change sets new here.
        var stored = 0
        /// Change sets already here (sent twice, or by two peers).
        var duplicate = 0
        /// The object changes of the new ones.
        var objects = 0
        /// Of the new ones, those stored past a gap in their origin's sequence (served once it fills).
        var waiting = 0
    }

    /// Stores `entries` (each change set once, whoever sent it first) in one transaction, advances
    /// each origin's contiguous sequence number, and notifies the long polls of every relay.
    func store(_ entries: [(envelope: ChangeSetEnvelope, line: String)]) async throws -> StoreResult {
        guard !entries.isEmpty else { return StoreResult() }
        // What is already here is counted, not written: a push of nothing new (a peer forwarding what
        // others pushed first) costs one read, no transaction and no commit.
        let held = try await alreadyHeld(entries.map(\.envelope))
        let fresh = entries.filter { !held.contains(Key(origin: $0.envelope.origin, sequence: $0.envelope.sequence)) }
        guard !fresh.isEmpty else {
            var result = StoreResult()
            result.duplicate = entries.count
            return result
        }
        var result = try await storeNew(fresh)
        result.duplicate += entries.count - fresh.count
        return result
    }

    private struct Key: Hashable {
        var origin: UUID
        var sequence: Int64
    }

    /// Which of `envelopes` the database holds already.
    private func alreadyHeld(_ envelopes: [ChangeSetEnvelope]) async throws -> Set<Key> {
        let origins = envelopes.map(\.origin)
        let sequences = envelopes.map(\.sequence)
        let rows = try await client.query("""
            SELECT c.origin, c.seq FROM unnest(\(origins)::uuid[], \(sequences)::int8[]) AS t(origin, seq)
            JOIN ferry_changesets c ON c.origin = t.origin AND c.seq = t.seq
            """, logger: logger)
        var held: Set<Key> = []
        for try await (origin, sequence) in rows.decode((UUID, Int64).self) { held.insert(Key(origin: origin, sequence: sequence)) }
        return held
    }

    private func storeNew(_ entries: [(envelope: ChangeSetEnvelope, line: String)]) async throws -> StoreResult {
        var origins: [UUID] = []
        var sequences: [Int64] = []
        var clocks: [Int64] = []
        var dependencies: [String] = []
        var changeCounts: [Int32] = []
        var lines: [ByteBuffer] = []
        var pieceCounts: [Int32] = []
        var sizes: [Int64] = []
        var large: [Key: String] = [:]
        for (envelope, line) in entries {
            origins.append(envelope.origin)
            sequences.append(envelope.sequence)
            clocks.append(envelope.timestamp.rawValue)
            dependencies.append(envelope.dependencies.isEmpty ? "" : ChangeSetCodec.encode(envelope.dependencies))
            changeCounts.append(Int32(clamping: envelope.changeCount))
            let size = line.utf8.count
            sizes.append(Int64(size))
            if size >= Self.largeBytes {
                lines.append(ByteBuffer())
                pieceCounts.append(Int32(clamping: (size + Self.pieceBytes - 1) / Self.pieceBytes))
                large[Key(origin: envelope.origin, sequence: envelope.sequence)] = line
            } else {
                lines.append(ByteBuffer(string: line))
                pieceCounts.append(0)
            }
        }
        // Origins in one order in every transaction, so that two pushes lock them without deadlock.
        let touched = Array(Set(origins)).sorted { $0.uuidString < $1.uuidString }
        return try await retryingConflicts {
            try await client.withTransaction(logger: logger) { connection in
                try await connection.query("""
                    INSERT INTO ferry_origins (origin) SELECT o FROM unnest(\(touched)::uuid[]) AS t(o) ORDER BY o::text ON CONFLICT DO NOTHING
                    """, logger: logger)
                let locked = try await connection.query("""
                    SELECT origin, contiguous FROM ferry_origins WHERE origin = ANY(\(touched)::uuid[]) ORDER BY origin::text FOR UPDATE
                    """, logger: logger)
                for try await _ in locked.decode((UUID, Int64).self) {}
                let inserted = try await connection.query("""
                    INSERT INTO ferry_changesets (origin, seq, hlc, deps, changes, line, pieces, size)
                    SELECT * FROM unnest(\(origins)::uuid[], \(sequences)::int8[], \(clocks)::int8[], \(dependencies)::text[], \
                    \(changeCounts)::int4[], \(lines)::bytea[],
                                         \(pieceCounts)::int4[], \(sizes)::int8[])
                    ON CONFLICT DO NOTHING RETURNING origin, seq, changes
                    """, logger: logger)
                var result = StoreResult()
                var insertedLarge: [(Key, String)] = []
                for try await (origin, sequence, changes) in inserted.decode((UUID, Int64, Int32).self) {
                    result.stored += 1
                    result.objects += Int(changes)
                    if let line = large[Key(origin: origin, sequence: sequence)] { insertedLarge.append((Key(origin: origin, sequence: sequence), line)) }
                }
                // A large change set's text goes in a piece at a time (one piece's copy at a time, not the whole).
                for (key, line) in insertedLarge {
                    var index: Int32 = 0
                    var start = line.utf8.startIndex
                    while start < line.utf8.endIndex {
                        let end = line.utf8.index(start, offsetBy: Self.pieceBytes, limitedBy: line.utf8.endIndex) ?? line.utf8.endIndex
                        var piece = ByteBuffer()
                        piece.writeBytes(line.utf8[start..<end])
                        try await connection.query("""
                            INSERT INTO ferry_changeset_pieces (origin, seq, index, data) VALUES (\(key.origin), \(key.sequence), \(index), \(piece))
                            """, logger: logger)
                        index += 1
                        start = end
                    }
                }
                result.duplicate = entries.count - result.stored
                guard result.stored > 0 else { return result }
                // Each origin's contiguous number moves to the end of the run that starts right after it.
                let advanced = try await connection.query("""
                    UPDATE ferry_origins o SET contiguous = coalesce((
                        SELECT min(c.seq) FROM ferry_changesets c
                        WHERE c.origin = o.origin AND c.seq > o.contiguous
                          AND NOT EXISTS (SELECT 1 FROM ferry_changesets d WHERE d.origin = c.origin AND d.seq = c.seq + 1)), o.contiguous)
                    WHERE o.origin = ANY(\(touched)::uuid[])
                      AND EXISTS (SELECT 1 FROM ferry_changesets e WHERE e.origin = o.origin AND e.seq = o.contiguous + 1)
                    """, logger: logger)
                for try await _ in advanced {}
                let gaps = try await connection.query("""
                    SELECT count(*) FROM unnest(\(origins)::uuid[], \(sequences)::int8[]) AS n(origin, seq)
                    JOIN ferry_origins o ON o.origin = n.origin WHERE n.seq > o.contiguous
                    """, logger: logger)
                for try await count in gaps.decode(Int64.self) { result.waiting = Int(count) }
                try await connection.query("SELECT pg_notify(\(Self.channel), '')", logger: logger)
                return result
            }
        }
    }

    /// Runs `work` again when PostgreSQL broke a deadlock or a serialization conflict by failing it.
    private func retryingConflicts<Result: Sendable>(_ work: () async throws -> Result) async throws -> Result {
        var attempt = 0
        while true {
            do {
                return try await work()
            } catch let error where attempt < 5 && Self.isConflict(error) {
                attempt += 1
                try await Task.sleep(for: .milliseconds(5 * attempt))
            }
        }
    }

    /// Whether `error` (or, from a transaction, the error within it) is PostgreSQL breaking a deadlock
    /// or a serialization conflict.
    static func isConflict(_ error: any Error) -> Bool {
        guard let error = withinTransaction(error) as? PSQLError else { return false }
        return ["40P01", "40001"].contains(error.serverInfo?[.sqlState] ?? "")
    }

    /// The error a transaction met: PostgresNIO's `withTransaction` throws its own error around the one
    /// thrown in the transaction (or by its `BEGIN` or `COMMIT`); any other error as it is.
    static func withinTransaction(_ error: any Error) -> any Error {
        guard let wrapped = error as? PostgresTransactionError else { return error }
        return wrapped.closureError ?? wrapped.beginError ?? wrapped.commitError ?? error
    }

    // MARK: - Serving change sets

    /// Throws when the database cannot be reached.
    func ping() async throws {
        try await client.query("SELECT 1", logger: logger)
    }

    /// The relay's version vector: per origin, the last of the change sets held from its first on.
    func vector() async throws -> VersionVector {
        var vector: VersionVector = [:]
        let rows = try await client.query("SELECT origin, contiguous FROM ferry_origins WHERE contiguous > 0", logger: logger)
        for try await (origin, contiguous) in rows.decode((UUID, Int64).self) { vector[origin] = contiguous }
        return vector
    }

    /// Per origin, the last change set dropped by retention (origins with none left out).
    func purged() async throws -> VersionVector {
        var vector: VersionVector = [:]
        let rows = try await client.query("SELECT origin, purged FROM ferry_origins WHERE purged > 0", logger: logger)
        for try await (origin, purged) in rows.decode((UUID, Int64).self) { vector[origin] = purged }
        return vector
    }

    /// At most `limit` change sets `vector` does not cover, each origin's in sequence and none past its
    /// contiguous number, in the order they arrived (which, per origin and for dependencies pushed in
    /// one batch, is causal; ``RelayPull`` checks the rest). The text is read only of those that start
    /// within `maxBytes` of the page's first (the rest come with their sizes and dependencies only, for
    /// ``RelayPull`` to order): a pull of a long backlog reads about one answer's worth, not `limit`
    /// change sets whole.
    func changeSets(after vector: VersionVector, limit: Int, maxBytes: Int) async throws -> [StoredChangeSet] {
        let known = Array(vector)
        let origins = known.map(\.key)
        let sequences = known.map(\.value)
        // (`size` is 0 in rows stored by a relay of schema 1: their length is the line's.)
        let rows = try await client.query("""
            SELECT t.origin, t.seq, t.deps, CASE WHEN t.pieces = 0 AND t.running - t.bytes < \(Int64(maxBytes)) THEN t.line END, t.pieces, t.bytes
            FROM (
                SELECT c.origin, c.seq, c.deps, c.line, c.pieces, c.position, c.bytes,
                       (sum(c.bytes) OVER (ORDER BY c.position ROWS UNBOUNDED PRECEDING))::int8 AS running
                FROM ferry_origins o
                LEFT JOIN unnest(\(origins)::uuid[], \(sequences)::int8[]) AS v(origin, seq) ON v.origin = o.origin
                CROSS JOIN LATERAL (
                    SELECT x.origin, x.seq, x.position, x.deps, x.line, x.pieces,
                           CASE WHEN x.size > 0 THEN x.size ELSE octet_length(x.line)::int8 END AS bytes
                    FROM ferry_changesets x
                    WHERE x.origin = o.origin AND x.seq > coalesce(v.seq, 0) AND x.seq <= o.contiguous
                    ORDER BY x.seq LIMIT \(limit)) c
                WHERE o.contiguous > coalesce(v.seq, 0)
                ORDER BY c.position LIMIT \(limit)) t
            ORDER BY t.position
            """, logger: logger)
        var result: [StoredChangeSet] = []
        for try await (origin, sequence, deps, line, pieces, bytes) in rows.decode((UUID, Int64, String, ByteBuffer?, Int32, Int64).self) {
            let dependencies = deps.isEmpty ? [:] : ((try? ChangeSetCodec.decodeVector(deps)) ?? [:])
            result.append(StoredChangeSet(origin: origin, sequence: sequence, dependencies: dependencies, line: line, pieces: pieces,
                                          byteCount: Int(clamping: bytes)))
        }
        return result
    }

    /// The text of a change set stored whole; nil when it is not here (or is stored in pieces).
    func line(of origin: UUID, sequence: Int64) async throws -> ByteBuffer? {
        let rows = try await client.query("""
            SELECT line FROM ferry_changesets WHERE origin = \(origin) AND seq = \(sequence) AND pieces = 0
            """, logger: logger)
        for try await line in rows.decode(ByteBuffer.self) { return line }
        return nil
    }

    /// Piece `index` of a change set stored in pieces; nil when it is not there (retention dropped the
    /// change set since its row was read).
    func piece(of origin: UUID, sequence: Int64, index: Int32) async throws -> ByteBuffer? {
        let rows = try await client.query("""
            SELECT data FROM ferry_changeset_pieces WHERE origin = \(origin) AND seq = \(sequence) AND index = \(index)
            """, logger: logger)
        for try await data in rows.decode(ByteBuffer.self) { return data }
        return nil
    }

    // MARK: - Keys

    /// The key rotations taken from daemons (every relay on the database uses them).
    func learnedKeys() async throws -> [OriginKey] {
        let rows = try await client.query("SELECT origin, key, from_seq, endorsement FROM ferry_keys", logger: logger)
        var keys: [OriginKey] = []
        for try await (origin, key, from, endorsement) in rows.decode((UUID, String, Int64, String).self) {
            keys.append(OriginKey(origin: origin, publicKey: key, firstSequence: from, endorsement: endorsement, source: .rotation))
        }
        return keys
    }

    /// Records endorsed rotations and tells every relay on the database (`NOTIFY` with the payload `keys`).
    func recordKeys(_ keys: [OriginKey]) async throws {
        guard !keys.isEmpty else { return }
        let origins = keys.map(\.origin)
        let publicKeys = keys.map(\.publicKey)
        let froms = keys.map(\.firstSequence)
        let endorsements = keys.map { $0.endorsement ?? "" }
        try await client.withTransaction(logger: logger) { connection in
            try await connection.query("""
                INSERT INTO ferry_keys (origin, key, from_seq, endorsement)
                SELECT * FROM unnest(\(origins)::uuid[], \(publicKeys)::text[], \(froms)::int8[], \(endorsements)::text[]) ON CONFLICT DO NOTHING
                """, logger: logger)
            try await connection.query("SELECT pg_notify(\(Self.channel), \(Self.keysPayload))", logger: logger)
        }
    }

    /// The payload of a notification that the keys changed (a push's notification carries none).
    static let keysPayload = "keys"

    // MARK: - Snapshots

    /// The newest complete snapshot: its id, source store and size.
    func newestSnapshot() async throws -> (id: Int64, source: UUID, size: Int64)? {
        let rows = try await client.query("SELECT id, source, size FROM ferry_snapshots WHERE complete ORDER BY id DESC LIMIT 1", logger: logger)
        for try await (id, source, size) in rows.decode((Int64, UUID, Int64).self) { return (id, source, size) }
        return nil
    }

    /// Chunk `index` of snapshot `id`; nil past the last.
    func snapshotChunk(_ id: Int64, index: Int32) async throws -> ByteBuffer? {
        let rows = try await client.query("SELECT data FROM ferry_snapshot_chunks WHERE snapshot = \(id) AND index = \(index)", logger: logger)
        for try await data in rows.decode(ByteBuffer.self) { return data }
        return nil
    }

    /// Starts storing a snapshot of `source`; returns its id (chunks go in with ``storeSnapshotChunk(_:index:data:)``).
    func beginSnapshot(of source: UUID) async throws -> Int64 {
        let rows = try await client.query("INSERT INTO ferry_snapshots (source) VALUES (\(source)) RETURNING id", logger: logger)
        for try await id in rows.decode(Int64.self) { return id }
        throw RelayError(.database, "PostgreSQL returned no id for a new snapshot")
    }

    func storeSnapshotChunk(_ id: Int64, index: Int32, data: ByteBuffer) async throws {
        try await client.query("INSERT INTO ferry_snapshot_chunks (snapshot, index, data) VALUES (\(id), \(index), \(data))", logger: logger)
    }

    /// Marks snapshot `id` complete (`size` bytes) and drops every earlier one, and unfinished ones over an hour old.
    func completeSnapshot(_ id: Int64, size: Int64) async throws {
        try await client.withTransaction(logger: logger) { connection in
            try await connection.query("UPDATE ferry_snapshots SET complete = true, size = \(size) WHERE id = \(id)", logger: logger)
            try await connection.query("""
                DELETE FROM ferry_snapshots WHERE id <> \(id) AND (complete OR taken < now() - interval '1 hour')
                """, logger: logger)
        }
    }

    /// Drops an unfinished snapshot.
    func abandonSnapshot(_ id: Int64) async throws {
        try await client.query("DELETE FROM ferry_snapshots WHERE id = \(id)", logger: logger)
    }

    // MARK: - Retention

    /// Notes that each store pulled with its vector (what it has: retention waits for it), in one
    /// transaction that does not wait for the disk (a pull lost in a crash is noted again at the next).
    func recordPulls(_ pulls: [UUID: VersionVector]) async throws {
        guard !pulls.isEmpty else { return }
        let stores = Array(pulls.keys)
        let vectors = stores.map { ChangeSetCodec.encode(pulls[$0] ?? [:]) }
        try await client.withTransaction(logger: logger) { connection in
            try await connection.query("SET LOCAL synchronous_commit = off", logger: logger)
            try await connection.query("""
                INSERT INTO ferry_peers (store, vector, seen) SELECT s, v, now() FROM unnest(\(stores)::uuid[], \(vectors)::text[]) AS t(s, v)
                ON CONFLICT (store) DO UPDATE SET vector = excluded.vector, seen = excluded.seen
                """, logger: logger)
        }
    }

    /// The stores that pulled within `expiry` seconds, with the vectors they pulled with.
    func activePeers(expiry: TimeInterval) async throws -> [(store: UUID, vector: VersionVector)] {
        let rows = try await client.query("""
            SELECT store, vector FROM ferry_peers WHERE seen > now() - make_interval(secs => \(expiry))
            """, logger: logger)
        var peers: [(store: UUID, vector: VersionVector)] = []
        for try await (store, text) in rows.decode((UUID, String).self) {
            peers.append((store, (try? ChangeSetCodec.decodeVector(text)) ?? [:]))
        }
        return peers
    }

    /// Drops, per origin, the change sets up to `through[origin]` that arrived more than `keep`
    /// seconds ago, and notes the last one dropped; returns how many went.
    func purge(through: VersionVector, keep: TimeInterval) async throws -> Int {
        guard !through.isEmpty else { return 0 }
        let pairs = Array(through)
        let origins = pairs.map(\.key)
        let sequences = pairs.map(\.value)
        return try await retryingConflicts {
            try await client.withTransaction(logger: logger) { connection in
                // Per origin, a prefix only: up to the bound, and short of the first change set that came in
                // within `keep` (one that filled a gap late keeps everything after it).
                let deleted = try await connection.query("""
                    WITH bounds AS (
                        SELECT t.origin, least(t.seq, coalesce((
                            SELECT min(r.seq) - 1 FROM ferry_changesets r
                            WHERE r.origin = t.origin AND r.received >= now() - make_interval(secs => \(keep))), t.seq)) AS seq
                        FROM unnest(\(origins)::uuid[], \(sequences)::int8[]) AS t(origin, seq))
                    DELETE FROM ferry_changesets c USING bounds b
                    WHERE c.origin = b.origin AND c.seq <= b.seq
                    RETURNING c.origin, c.seq
                    """, logger: logger)
                var last: [UUID: Int64] = [:]
                var count = 0
                for try await (origin, sequence) in deleted.decode((UUID, Int64).self) {
                    count += 1
                    last[origin] = max(last[origin] ?? 0, sequence)
                }
                // A prefix goes per origin: the last purged is the end of what is gone from the first on.
                let purgedOrigins = Array(last.keys)
                let purgedThrough = purgedOrigins.map { last[$0] ?? 0 }
                try await connection.query("""
                    UPDATE ferry_origins o SET purged = greatest(o.purged, t.seq)
                    FROM unnest(\(purgedOrigins)::uuid[], \(purgedThrough)::int8[]) AS t(origin, seq) WHERE o.origin = t.origin
                    """, logger: logger)
                return count
            }
        }
    }

    /// How much the database holds: change sets and their bytes on disk (tables and indexes).
    func size() async throws -> (changeSets: Int64, bytes: Int64, origins: Int64) {
        let rows = try await client.query("""
            SELECT (SELECT coalesce(sum(contiguous - purged), 0)::int8 FROM ferry_origins),
                   (pg_total_relation_size('ferry_changesets') + pg_total_relation_size('ferry_changeset_pieces'))::int8,
                   (SELECT count(*) FROM ferry_origins)::int8
            """, logger: logger)
        for try await (changeSets, bytes, origins) in rows.decode((Int64, Int64, Int64).self) { return (changeSets, bytes, origins) }
        return (0, 0, 0)
    }
}

/// The relay cannot go on: what happened and what to do.
public struct RelayError: FerryError, Sendable {
    /// The kinds of fault that stop the relay (or cut an answer short).
    public enum Code: String, Hashable, Sendable {
        /// The tokens file (`server.tokens_file`) cannot be used.
        case tokens
        /// The certificate or key (`server.tls`) cannot be used.
        case tls
        /// The database's password file (`database.password_file`) cannot be read.
        case passwordFile
        /// The database holds relay tables of a newer schema than this Ferry writes.
        case newerSchema
        /// The database does not hold or return what it must (its `ferry_relay` row, a new snapshot's id).
        case database
        /// A piece of a change set being sent was dropped by retention meanwhile; the puller asks again.
        case pieceGone
    }

    /// The kind of fault.
    public let code: Code
    /// What happened and what to do.
    public let description: String
    /// The error met, when there was one.
    public let cause: (any Error)?

    /// A fault of kind `code` saying `description`; `cause` is the error met, when there was one.
    init(_ code: Code, _ description: String, cause: (any Error)? = nil) {
        self.code = code
        self.description = description
        self.cause = cause
    }

    /// Only for a piece dropped while it was sent: a pull asked again gets what the database holds now.
    public var isRetryable: Bool { code == .pieceGone }
}
