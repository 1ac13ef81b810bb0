import Foundation
import GRDB
import GRDBSQLite
import FerryModel
import FerryStore

/// Reads and writes the history tables inside the caller's transaction.
struct HistoryLog {
    let db: Database
    let store: UUID
    /// The model hash tombstones are written with (so they decode with the model).
    var modelHash = "-"

    // MARK: - Clock

    /// The next timestamp of this store's hybrid logical clock (stored, so
    /// every process on the file shares one clock).
    func tick(now: Date = Date()) throws -> HybridTimestamp {
        let next = HybridTimestamp.next(after: try lastTimestamp(), now: now)
        try storeTimestamp(next)
        return next
    }

    /// Takes in a timestamp seen in a replayed change set, so later local
    /// timestamps come after it.
    func receive(_ timestamp: HybridTimestamp) throws {
        let last = try lastTimestamp()
        let taken = HybridTimestamp.taking(in: timestamp, after: last)
        guard taken > last else { return }
        try storeTimestamp(taken)
    }

    /// Stores the clock's last timestamp in place. (`INSERT OR REPLACE` would delete the row
    /// and insert it again under a new rowid, which rewrites a page of the key's index as
    /// well: one more WAL frame in every save and every replay.)
    private func storeTimestamp(_ timestamp: HybridTimestamp) throws {
        try db.cachedStatement(sql: """
            INSERT INTO Z_FERRY_STATE (Z_KEY, Z_VALUE) VALUES ('hlc', ?)
            ON CONFLICT (Z_KEY) DO UPDATE SET Z_VALUE = excluded.Z_VALUE
            """).execute(arguments: [timestamp.rawValue])
    }

    func lastTimestamp() throws -> HybridTimestamp {
        HybridTimestamp(rawValue: try Int64.fetchOne(db.cachedStatement(sql: "SELECT Z_VALUE FROM Z_FERRY_STATE WHERE Z_KEY = 'hlc'")) ?? 0)
    }

    // MARK: - Change sets

    func lastSequence(of origin: UUID) throws -> Int64 {
        try Int64.fetchOne(db.cachedStatement(sql: "SELECT Z_SEQ FROM Z_FERRY_VECTOR WHERE Z_ORIGIN = ?"),
                           arguments: [origin.uuidString]) ?? 0
    }

    /// For each origin, the highest sequence number taken in (applied or quarantined).
    func vector() throws -> VersionVector {
        var vector: VersionVector = [:]
        for row in try Row.fetchAll(db.cachedStatement(sql: "SELECT Z_ORIGIN, Z_SEQ FROM Z_FERRY_VECTOR")) {
            guard let text: String = row[0], let origin = UUID(parsing: text) else { continue }
            vector[origin] = row[1]
        }
        return vector
    }

    /// For each origin, the last sequence number purged from the history.
    func purgedVector() throws -> VersionVector {
        var vector: VersionVector = [:]
        for row in try Row.fetchAll(db.cachedStatement(sql: "SELECT Z_ORIGIN, Z_PURGED FROM Z_FERRY_VECTOR WHERE Z_PURGED > 0")) {
            guard let text: String = row[0], let origin = UUID(parsing: text) else { continue }
            vector[origin] = row[1]
        }
        return vector
    }

    /// Deletes the change sets every vector of `policy.acknowledged` covers and made before its
    /// retention cutoff (applied ones without a note only: quarantined and left-invalid ones stay
    /// listed), then forgets the tombstones of deletes made before its horizon.
    func purge(_ policy: PurgePolicy) throws -> PurgeReport {
        var report = PurgeReport()
        // Per origin, tombstones of its deletes made before this clock are forgotten: the horizon, or,
        // where the peers' cap holds the horizon back, just after the last change set the cap covers.
        var forgetBefore: [UUID: Int64] = [:]
        if let horizon = policy.tombstonesMadeBefore {
            // What a change set must know of from now on: per origin, the last change set made before the
            // horizon, read before this purge deletes any (one origin's clocks grow with its sequence, so
            // those made before the horizon are a prefix); of those purged earlier, the last one's clock
            // is kept (`Z_FERRY_PURGE_MARK`) and counts once it is past the horizon.
            for (origin, _) in try vector() {
                let stored = try Int64.fetchOne(db, sql: "SELECT MAX(Z_SEQ) FROM Z_FERRY_CHANGESET WHERE Z_ORIGIN = ? AND Z_HLC < ?",
                                                arguments: [origin.uuidString, horizon.rawValue]) ?? 0
                let purged = try Int64.fetchOne(db, sql: "SELECT Z_SEQ FROM Z_FERRY_PURGE_MARK WHERE Z_ORIGIN = ? AND Z_HLC < ?",
                                                arguments: [origin.uuidString, horizon.rawValue]) ?? 0
                let beforeHorizon = max(stored, purged)
                // Never more than every peer has taken in: a delete is forgotten, and change sets are asked
                // to know it, only once nothing made without knowing it can still be on its way.
                let needed = min(beforeHorizon, policy.knownToPeers.map { $0[origin, default: 0] }.min() ?? beforeHorizon)
                forgetBefore[origin] = needed == beforeHorizon ? horizon.rawValue : try clock(of: origin, sequence: needed).map { $0 + 1 } ?? 0
                guard needed > 0 else { continue }
                try db.execute(sql: """
                    INSERT INTO Z_FERRY_HORIZON (Z_ORIGIN, Z_SEQ) VALUES (?, ?)
                    ON CONFLICT (Z_ORIGIN) DO UPDATE SET Z_SEQ = max(Z_SEQ, excluded.Z_SEQ)
                    """, arguments: [origin.uuidString, needed])
            }
            try db.execute(sql: """
                INSERT INTO Z_FERRY_STATE (Z_KEY, Z_VALUE) VALUES ('horizon', ?)
                ON CONFLICT (Z_KEY) DO UPDATE SET Z_VALUE = max(Z_VALUE, excluded.Z_VALUE)
                """, arguments: [horizon.rawValue])
        }
        if !policy.acknowledged.isEmpty {
            let purged = try purgedVector()
            for (origin, last) in try vector() {
                var floor = min(last, policy.acknowledged.map { $0[origin, default: 0] }.min() ?? 0)
                if let cutoff = policy.changeSetsMadeBefore,
                   let young = try Int64.fetchOne(db, sql: "SELECT MIN(Z_SEQ) FROM Z_FERRY_CHANGESET WHERE Z_ORIGIN = ? AND Z_HLC >= ?",
                                                  arguments: [origin.uuidString, cutoff.rawValue]) {
                    floor = min(floor, young - 1)
                }
                guard floor > purged[origin, default: 0] else { continue }
                if let clock = try Int64.fetchOne(db, sql: "SELECT Z_HLC FROM Z_FERRY_CHANGESET WHERE Z_ORIGIN = ? AND Z_SEQ = ?",
                                                  arguments: [origin.uuidString, floor]) {
                    try db.execute(sql: "INSERT OR REPLACE INTO Z_FERRY_PURGE_MARK (Z_ORIGIN, Z_SEQ, Z_HLC) VALUES (?, ?, ?)",
                                   arguments: [origin.uuidString, floor, clock])
                }
                try db.execute(sql: "DELETE FROM Z_FERRY_CHANGESET WHERE Z_ORIGIN = ? AND Z_SEQ <= ? AND Z_STATUS = ? AND Z_REASON IS NULL",
                               arguments: [origin.uuidString, floor, HistorySchema.applied])
                report.changeSets += db.changesCount
                try db.execute(sql: "UPDATE Z_FERRY_VECTOR SET Z_PURGED = max(Z_PURGED, ?) WHERE Z_ORIGIN = ?", arguments: [floor, origin.uuidString])
            }
        }
        if let horizon = policy.tombstonesMadeBefore {
            for (origin, cut) in forgetBefore where cut > 0 {
                // The deleted objects' identity-map entries go with their tombstones: otherwise the map
                // would grow with every object ever inserted here (the million-save soak found it).
                let forgotten = try String.fetchAll(db, sql: "SELECT Z_URI FROM Z_FERRY_TOMBSTONE WHERE Z_ORIGIN = ? AND Z_HLC < ?",
                                                    arguments: [origin.uuidString, cut])
                guard !forgotten.isEmpty else { continue }
                try IdentityMap(db: db).unmap(forgotten)
                try db.execute(sql: "DELETE FROM Z_FERRY_TOMBSTONE WHERE Z_ORIGIN = ? AND Z_HLC < ?", arguments: [origin.uuidString, cut])
                report.tombstones += db.changesCount
            }
            // An alias keeps no origin: it goes once every origin's cut has passed its merge.
            let aliasCut = forgetBefore.values.min().map { min($0, horizon.rawValue) } ?? horizon.rawValue
            try db.execute(sql: "DELETE FROM Z_FERRY_ALIAS WHERE Z_HLC < ?", arguments: [aliasCut])
            report.aliases = db.changesCount
        }
        return report
    }

    /// The clock of `origin`'s change set `sequence`, kept or the last purged; nil when neither.
    private func clock(of origin: UUID, sequence: Int64) throws -> Int64? {
        guard sequence > 0 else { return nil }
        if let kept = try Int64.fetchOne(db, sql: "SELECT Z_HLC FROM Z_FERRY_CHANGESET WHERE Z_ORIGIN = ? AND Z_SEQ = ?",
                                         arguments: [origin.uuidString, sequence]) {
            return kept
        }
        return try Int64.fetchOne(db, sql: "SELECT Z_HLC FROM Z_FERRY_PURGE_MARK WHERE Z_ORIGIN = ? AND Z_SEQ = ?",
                                  arguments: [origin.uuidString, sequence])
    }

    /// Per origin, the last change set made before the tombstone horizon (see ``purge(_:)``), and the horizon.
    func horizon() throws -> (vector: VersionVector, time: HybridTimestamp?) {
        var vector: VersionVector = [:]
        for row in try Row.fetchAll(db.cachedStatement(sql: "SELECT Z_ORIGIN, Z_SEQ FROM Z_FERRY_HORIZON")) {
            guard let text: String = row[0], let origin = UUID(parsing: text) else { continue }
            vector[origin] = row[1]
        }
        return (vector, try horizonTime())
    }

    /// The tombstone horizon: deletes made before it are forgotten (nil: none forgotten yet).
    func horizonTime() throws -> HybridTimestamp? {
        try Int64.fetchOne(db.cachedStatement(sql: "SELECT Z_VALUE FROM Z_FERRY_STATE WHERE Z_KEY = 'horizon'")).map(HybridTimestamp.init(rawValue:))
    }

    /// How much history the store keeps.
    func size() throws -> HistorySize {
        let row = try Row.fetchOne(db, sql: """
            SELECT count(*), ifnull(sum(CASE typeof(Z_BODY) WHEN 'blob' THEN length(Z_BODY) ELSE length(CAST(Z_BODY AS BLOB)) END), 0)
            FROM Z_FERRY_CHANGESET
            """)
        let tombstones = try Int.fetchOne(db, sql: "SELECT count(*) FROM Z_FERRY_TOMBSTONE") ?? 0
        let purged = try purgedVector()
        return HistorySize(changeSets: row?[0] ?? 0, bytes: row?[1] ?? 0, tombstones: tombstones,
                           purgedThrough: Dictionary(uniqueKeysWithValues: purged.map { ($0.key.uuidString, $0.value) }),
                           horizon: try horizonTime())
    }

    func append(_ changeSet: ChangeSet, status: Int, reason: String?) throws {
        try append(origin: changeSet.origin, sequence: changeSet.sequence, timestamp: changeSet.timestamp,
                   body: ChangeSetCodec.encode(changeSet), status: status, reason: reason)
    }

    /// Records a received change set, or (`retry`) updates the record of one quarantined before.
    /// `compressedBody`, when given, is `body` already compressed (``StoredBody/compressed(_:)-(String)``).
    func record(origin: UUID, sequence: Int64, timestamp: HybridTimestamp, body: String, compressedBody: [UInt8]? = nil,
                status: Int, reason: String?, retry: Bool) throws {
        guard retry else {
            if let compressedBody {
                return try insert(origin: origin, sequence: sequence, timestamp: timestamp, body: .blob(compressedBody), status: status, reason: reason)
            }
            return try append(origin: origin, sequence: sequence, timestamp: timestamp, body: body, status: status, reason: reason)
        }
        try db.execute(sql: "UPDATE Z_FERRY_CHANGESET SET Z_STATUS = ?, Z_REASON = ? WHERE Z_ORIGIN = ? AND Z_SEQ = ?",
                       arguments: [status, reason, origin.uuidString, sequence])
    }

    func append(origin: UUID, sequence: Int64, timestamp: HybridTimestamp, body: String, status: Int, reason: String?) throws {
        var body = body
        try body.withUTF8 { bytes in
            try insert(origin: origin, sequence: sequence, timestamp: timestamp, body: .text(bytes), status: status, reason: reason)
        }
    }

    /// Appends a change set whose text is given as UTF-8 bytes (a local save's, as the recorder
    /// wrote it), stored as TEXT exactly like ``append(origin:sequence:timestamp:body:status:reason:)``,
    /// without making (and validating) a `String` of a large change set first.
    /// `compressedPrefix`, when given, has compressed the body's beginning already; only the rest is compressed here.
    func append(origin: UUID, sequence: Int64, timestamp: HybridTimestamp, bodyBytes body: [UInt8], compressedPrefix: CompressedPrefix? = nil,
                status: Int) throws {
        try body.withUnsafeBufferPointer { bytes in
            if let compressed = try compressedPrefix?.finish(bytes) {
                try insert(origin: origin, sequence: sequence, timestamp: timestamp, body: .blob(compressed), status: status, reason: nil)
            } else {
                try insert(origin: origin, sequence: sequence, timestamp: timestamp, body: .text(bytes), status: status, reason: nil)
            }
        }
    }

    /// A body to store: text (compressed here when long, see ``StoredBody``), or compressed already.
    private enum Body {
        case text(UnsafeBufferPointer<UInt8>)
        case blob([UInt8])
    }

    /// The log row and the vector. A text body is bound with the C API without a copy (GRDB would
    /// copy it; change sets run to hundreds of KB); the statement is a plain INSERT in the
    /// caller's open transaction, as the bulk inserts of `SaveWriter.bindAndRun` are.
    private func insert(origin: UUID, sequence: Int64, timestamp: HybridTimestamp, body: Body,
                        status: Int, reason: String?) throws {
        let sql = "INSERT INTO Z_FERRY_CHANGESET (Z_ORIGIN, Z_SEQ, Z_HLC, Z_STATUS, Z_REASON, Z_BODY) VALUES (?, ?, ?, ?, ?, ?)"
        let handle = try db.cachedStatement(sql: sql).sqliteStatement
        sqlite3_reset(handle)
        var binder = ValueBinder(statement: handle)
        binder.bind(.string(origin.uuidString))
        binder.bind(sequence)
        binder.bind(timestamp.rawValue)
        binder.bind(Int64(status))
        binder.bind(reason.map(AttributeValue.string))
        switch body {
        case .text(let text):
            if let compressed = try StoredBody.compressed(text) { binder.bindBlob(compressed) } else { binder.bindText(text) }
        case .blob(let compressed):
            binder.bindBlob(compressed)
        }
        try binder.run(sql: sql)
        try advanceVector(origin: origin, to: sequence)
    }

    /// Moves this store's vector entry for `origin` up to `sequence` (never down).
    private func advanceVector(origin: UUID, to sequence: Int64) throws {
        try db.cachedStatement(sql: """
            INSERT INTO Z_FERRY_VECTOR (Z_ORIGIN, Z_SEQ) VALUES (?, ?) ON CONFLICT (Z_ORIGIN) DO UPDATE SET Z_SEQ = max(Z_SEQ, excluded.Z_SEQ)
            """).execute(arguments: [origin.uuidString, sequence])
    }

    /// The bodies of the change sets not covered by `vector`, in the order this
    /// store took them in (an order that can be applied as is).
    func bodies(after vector: VersionVector, limit: Int? = nil) throws -> [String] {
        try changeSets(after: vector, cursor: 0, limit: limit, maximumBytes: nil, StoredBody.text).lines
    }

    /// The change sets not covered by `vector` with a rank above `cursor`, in rank order, and the
    /// rank of the last one (the cursor for the next page). A large one stays in its stored form,
    /// made into text a piece at a time as it is read (``StoredBody/line(_:)``). With `maximumBytes`,
    /// only the first ones whose texts, a newline after each, add up to at most that (always the first).
    func page(after vector: VersionVector, cursor: Int64, limit: Int?, maximumBytes: Int?) throws -> (lines: [ChangeSetPage.Line], cursor: Int64) {
        try changeSets(after: vector, cursor: cursor, limit: limit, maximumBytes: maximumBytes, StoredBody.line)
    }

    /// Hands `body` each change set not covered by `vector`, in the order this store took them in,
    /// as it is read: a large one in its stored form (``StoredBody/line(_:)``), so that what is held
    /// at once is one line, however long the history.
    func forEachLine(after vector: VersionVector, _ body: (ChangeSetPage.Line) throws -> Void) throws {
        try forEachUncovered(by: vector, after: 0) { row in
            try body(try StoredBody.line(row[2]))
            return true
        }
    }

    /// ``page(after:cursor:limit:maximumBytes:)``, each stored body made into a `Line` by `line`; with
    /// `maximumBytes`, ending before a line that would take the texts past it (after the first).
    private func changeSets<Line>(after vector: VersionVector, cursor: Int64, limit: Int?, maximumBytes: Int?,
                                  _ line: (DatabaseValue) throws -> Line) throws -> (lines: [Line], cursor: Int64) {
        var result: [Line] = []
        var last = cursor
        var budget = ReadBudget(maximum: maximumBytes)
        let started = try forEachUncovered(by: vector, after: cursor) { row in
            guard try budget.admits(try StoredBody.length(row[2]) + 1) else { return false }
            result.append(try line(row[2]))
            last = row[3]
            if let limit, result.count >= limit { return false }
            return true
        }
        return (result, max(last, started))
    }

    /// Calls `body` with each row (origin, sequence, body, rank) of a change set not covered by
    /// `vector` whose rank is above `cursor`, in rank order, until it returns false. Returns the rank
    /// the scan started after (`cursor`, or just before the first uncovered change set when that is later).
    /// - Throws: ``HistoryError/purged(origin:needed:purgedThrough:)`` when `vector` lacks change sets
    ///   this store has purged.
    @discardableResult
    private func forEachUncovered(by vector: VersionVector, after cursor: Int64, _ body: (Row) throws -> Bool) throws -> Int64 {
        for (origin, purged) in try purgedVector() where vector[origin, default: 0] < purged {
            throw HistoryError.purged(origin: origin, needed: vector[origin, default: 0] + 1, purgedThrough: purged)
        }
        guard let first = try firstUncoveredRank(by: vector) else { return cursor }
        let start = max(cursor, first - 1)
        let sql = "SELECT Z_ORIGIN, Z_SEQ, Z_BODY, Z_RANK FROM Z_FERRY_CHANGESET WHERE Z_RANK > ? ORDER BY Z_RANK"
        let rows = try Row.fetchCursor(db.cachedStatement(sql: sql), arguments: [start])
        while let row = try rows.next() {
            guard let text: String = row[0], let origin = UUID(parsing: text) else { continue }
            let sequence: Int64 = row[1]
            if sequence <= vector[origin, default: 0] { continue }
            guard try body(row) else { break }
        }
        return start
    }

    /// The position of the first change set `vector` does not cover, or nil when it covers them all.
    /// Each origin's change sets are in this log in sequence order without gaps (purges remove a
    /// prefix), so for each origin that is the one numbered one past the vector's: one index probe per
    /// origin, however long the history — a peer that is nearly up to date costs nearly nothing.
    private func firstUncoveredRank(by vector: VersionVector) throws -> Int64? {
        var first: Int64?
        let probe = try db.cachedStatement(sql: "SELECT Z_RANK FROM Z_FERRY_CHANGESET WHERE Z_ORIGIN = ? AND Z_SEQ = ?")
        for (origin, have) in try self.vector() where vector[origin, default: 0] < have {
            guard let rank = try Int64.fetchOne(probe, arguments: [origin.uuidString, vector[origin, default: 0] + 1]) else {
                return 0  // not where it should be (an older store): scan from the start
            }
            first = min(first ?? rank, rank)
        }
        return first
    }

    // MARK: - Merge metadata

    func setClock(root: Int, key: Int64, property: String, timestamp: HybridTimestamp, origin: UUID) throws {
        try db.cachedStatement(sql: "INSERT OR REPLACE INTO Z_FERRY_CLOCK (Z_ROOT, Z_PK, Z_PROPERTY, Z_HLC, Z_ORIGIN) VALUES (?, ?, ?, ?, ?)")
            .execute(arguments: [root, key, property, timestamp.rawValue, origin.uuidString])
    }

    /// The (timestamp, origin) of the last write of a property after the insert, if any.
    func clock(root: Int, key: Int64, property: String) throws -> WriteClock? {
        guard let row = try Row.fetchOne(db.cachedStatement(sql: "SELECT Z_HLC, Z_ORIGIN FROM Z_FERRY_CLOCK WHERE Z_ROOT = ? AND Z_PK = ? AND Z_PROPERTY = ?"),
                                         arguments: [root, key, property]),
              let text: String = row[1], let origin = UUID(parsing: text) else { return nil }
        return WriteClock(timestamp: HybridTimestamp(rawValue: row[0]), origin: origin)
    }

    /// Forgets a deleted row's clocks and the positions in its ordered relationships.
    func forgetClocks(root: Int, key: Int64) throws {
        try db.cachedStatement(sql: "DELETE FROM Z_FERRY_CLOCK WHERE Z_ROOT = ? AND Z_PK = ?").execute(arguments: [root, key])
        try db.cachedStatement(sql: "DELETE FROM Z_FERRY_POSITION WHERE Z_ROOT = ? AND Z_PK = ?").execute(arguments: [root, key])
    }

    /// Every clock of a row, by property.
    func clocks(root: Int, key: Int64) throws -> [String: WriteClock] {
        var result: [String: WriteClock] = [:]
        let rows = try Row.fetchCursor(db.cachedStatement(sql: "SELECT Z_PROPERTY, Z_HLC, Z_ORIGIN FROM Z_FERRY_CLOCK WHERE Z_ROOT = ? AND Z_PK = ?"),
                                       arguments: [root, key])
        while let row = try rows.next() {
            guard let text: String = row[2], let origin = UUID(parsing: text) else { continue }
            result[row[0]] = WriteClock(timestamp: HybridTimestamp(rawValue: row[1]), origin: origin)
        }
        return result
    }

    /// Every row with a clock for `property`, with that clock (a scan of the clocks).
    func clocks(of property: String, layout: StoreLayout) throws -> [ObjectID: WriteClock] {
        var result: [ObjectID: WriteClock] = [:]
        let rows = try Row.fetchAll(db, sql: "SELECT Z_ROOT, Z_PK, Z_HLC, Z_ORIGIN FROM Z_FERRY_CLOCK WHERE Z_PROPERTY = ?", arguments: [property])
        for row in rows {
            let root: Int = row[0], key: Int64 = row[1]
            guard let text: String = row[3], let origin = UUID(parsing: text),
                  let table = layout.entityNames[root].flatMap({ layout.plans[$0]?.table }),
                  let number = try Int.fetchOne(db.cachedStatement(sql: "SELECT Z_ENT FROM \(table) WHERE Z_PK = ?"), arguments: [key]),
                  let entity = layout.entityNames[number] else { continue }
            result[.permanent(entityName: entity, store: store, primaryKey: key)] = WriteClock(timestamp: HybridTimestamp(rawValue: row[2]), origin: origin)
        }
        return result
    }

    /// Makes a merged duplicate's origin URI (and every alias of it) an alias of the survivor's.
    func alias(_ uri: String, to survivor: String, at timestamp: HybridTimestamp) throws {
        try db.cachedStatement(sql: "UPDATE Z_FERRY_ALIAS SET Z_SURVIVOR = ? WHERE Z_SURVIVOR = ?").execute(arguments: [survivor, uri])
        try db.cachedStatement(sql: "INSERT OR REPLACE INTO Z_FERRY_ALIAS (Z_URI, Z_SURVIVOR, Z_HLC) VALUES (?, ?, ?)")
            .execute(arguments: [uri, survivor, timestamp.rawValue])
    }

    /// Keeps a value a merge carried to a survivor whose entity lacks the attribute.
    func carry(_ property: String, of uri: String, _ carried: CarriedValue) throws {
        let value: AttributeValue? = if case .attribute(let value) = carried.value { value } else { nil }
        try db.cachedStatement(sql: "INSERT OR REPLACE INTO Z_FERRY_CARRIED (Z_URI, Z_PROPERTY, Z_ENTITY, Z_VALUE, Z_HLC, Z_ORIGIN) VALUES (?, ?, ?, ?, ?, ?)")
            .execute(arguments: [uri, property, carried.entity, AttributeJSON.encode(value).text, carried.stamp?.timestamp.rawValue,
                                 carried.stamp?.origin.uuidString])
    }

    /// Forgets the values carried to `uri` (merged into another object, which took them).
    func forgetCarried(of uri: String) throws {
        try db.cachedStatement(sql: "DELETE FROM Z_FERRY_CARRIED WHERE Z_URI = ?").execute(arguments: [uri])
    }

    /// The values carried to `uri`, by attribute, decoded by the type the model gives the attribute.
    func carried(of uri: String, model: ManagedObjectModel) throws -> [String: CarriedValue] {
        var result: [String: CarriedValue] = [:]
        for row in try Row.fetchAll(db.cachedStatement(sql: "SELECT Z_PROPERTY, Z_ENTITY, Z_VALUE, Z_HLC, Z_ORIGIN FROM Z_FERRY_CARRIED WHERE Z_URI = ?"),
                                    arguments: [uri]) {
            let property: String = row[0], entity: String = row[1], text: String = row[2]
            guard let type = model.entity(named: entity)?.attribute(named: property)?.type, let json = try? JSONValue.parse(text),
                  case .success(let value) = AttributeJSON.decode(json, as: type) else { continue }
            var stamp: WriteStamp?
            if let hlc: Int64 = row[3], let text: String = row[4], let origin = UUID(parsing: text) {
                stamp = WriteStamp(timestamp: HybridTimestamp(rawValue: hlc), origin: origin)
            }
            result[property] = CarriedValue(entity: entity, value: value.map(ChangeValue.attribute) ?? .null, stamp: stamp)
        }
        return result
    }

    /// The survivors of the merged URIs among `uris`.
    func survivors(of uris: [String]) throws -> [String: String] {
        var result: [String: String] = [:]
        // Most stores never merge a duplicate: one look at the table spares a lookup per URI.
        guard !uris.isEmpty, try Bool.fetchOne(db.cachedStatement(sql: "SELECT EXISTS (SELECT 1 FROM Z_FERRY_ALIAS)")) == true else { return result }
        let statement = try db.cachedStatement(sql: "SELECT Z_SURVIVOR FROM Z_FERRY_ALIAS WHERE Z_URI = ?")
        for uri in uris {
            if let survivor = try String.fetchOne(statement, arguments: [uri]) { result[uri] = survivor }
        }
        return result
    }

    /// Sets the position key of `member` (an origin URI) in an ordered relationship of a row.
    func setPosition(root: Int, key: Int64, relationship: String, member: String, position: String) throws {
        try db.cachedStatement(sql: "INSERT OR REPLACE INTO Z_FERRY_POSITION (Z_ROOT, Z_PK, Z_RELATIONSHIP, Z_MEMBER, Z_KEY) VALUES (?, ?, ?, ?, ?)")
            .execute(arguments: [root, key, relationship, member, position])
    }

    /// The position keys of the members of an ordered relationship of a row, by member origin URI.
    func positions(root: Int, key: Int64, relationship: String) throws -> [String: String] {
        var result: [String: String] = [:]
        let rows = try Row.fetchCursor(
            db.cachedStatement(sql: "SELECT Z_MEMBER, Z_KEY FROM Z_FERRY_POSITION WHERE Z_ROOT = ? AND Z_PK = ? AND Z_RELATIONSHIP = ?"),
            arguments: [root, key, relationship])
        while let row = try rows.next() { result[row[0]] = row[1] }
        return result
    }

    /// Keeps a deleted object's tombstone, so nothing brings it back by accident.
    func bury(uri: String, entity: String, values: [String: ChangeValue], memberships: [String: [String]] = [:],
              timestamp: HybridTimestamp, origin: UUID) throws {
        let change = ObjectChange(kind: .delete, uri: uri, entity: entity, values: values, added: memberships)
        let text = ChangeSetCodec.encode(ChangeSet(origin: origin, sequence: 1, timestamp: timestamp, modelHash: modelHash, changes: [change]))
        try db.cachedStatement(sql: "INSERT OR REPLACE INTO Z_FERRY_TOMBSTONE (Z_URI, Z_ENTITY, Z_HLC, Z_ORIGIN, Z_VALUES) VALUES (?, ?, ?, ?, ?)")
            .execute(arguments: [uri, entity, timestamp.rawValue, origin.uuidString, text])
    }

    /// A deleted object's tombstone: its entity, last values and memberships (as a one-change
    /// change set text) and the clock of the delete.
    func tombstone(_ uri: String) throws -> (entity: String, text: String, clock: WriteClock)? {
        guard let row = try Row.fetchOne(db.cachedStatement(sql: "SELECT Z_ENTITY, Z_VALUES, Z_HLC, Z_ORIGIN FROM Z_FERRY_TOMBSTONE WHERE Z_URI = ?"),
                                         arguments: [uri]),
              let text: String = row[3], let origin = UUID(parsing: text) else { return nil }
        return (row[0], row[1], WriteClock(timestamp: HybridTimestamp(rawValue: row[2]), origin: origin))
    }

    /// The tombstones whose text names `uri` (by origin URI): a scan of them all, for repairs.
    func tombstones(naming uri: String) throws -> [(uri: String, entity: String, text: String, clock: WriteClock)] {
        var result: [(uri: String, entity: String, text: String, clock: WriteClock)] = []
        let rows = try Row.fetchCursor(db, sql: "SELECT Z_URI, Z_ENTITY, Z_VALUES, Z_HLC, Z_ORIGIN FROM Z_FERRY_TOMBSTONE WHERE instr(Z_VALUES, ?) > 0",
                                       arguments: [uri])
        while let row = try rows.next() {
            guard let text: String = row[4], let origin = UUID(parsing: text) else { continue }
            result.append((row[0], row[1], row[2], WriteClock(timestamp: HybridTimestamp(rawValue: row[3]), origin: origin)))
        }
        return result
    }

    func unbury(_ uri: String) throws {
        try db.cachedStatement(sql: "DELETE FROM Z_FERRY_TOMBSTONE WHERE Z_URI = ?").execute(arguments: [uri])
    }

    /// Notes the objects a change set taken in (or made) here restores.
    func noteRestores(of uris: [String], by origin: UUID, sequence: Int64) throws {
        for uri in uris {
            try db.cachedStatement(sql: "INSERT OR IGNORE INTO Z_FERRY_RESTORE (Z_URI, Z_ORIGIN, Z_SEQ) VALUES (?, ?, ?)")
                .execute(arguments: [uri, origin.uuidString, sequence])
        }
    }

    /// The change sets that restored each of `uris` (those ever restored).
    func restores(of uris: [String]) throws -> [String: Set<ChangeSetMark>] {
        var result: [String: Set<ChangeSetMark>] = [:]
        // Most stores never restore an object: one look at the table spares a lookup per URI.
        guard !uris.isEmpty, try Bool.fetchOne(db.cachedStatement(sql: "SELECT EXISTS (SELECT 1 FROM Z_FERRY_RESTORE)")) == true else { return result }
        let statement = try db.cachedStatement(sql: "SELECT Z_ORIGIN, Z_SEQ FROM Z_FERRY_RESTORE WHERE Z_URI = ?")
        for uri in uris {
            let rows = try Row.fetchCursor(statement, arguments: [uri])
            while let row = try rows.next() {
                guard let text: String = row[0], let origin = UUID(parsing: text) else { continue }
                result[uri, default: []].insert(ChangeSetMark(origin: origin, sequence: row[1]))
            }
        }
        return result
    }

    func isBuried(_ uri: String) throws -> Bool {
        try Bool.fetchOne(db.cachedStatement(sql: "SELECT EXISTS (SELECT 1 FROM Z_FERRY_TOMBSTONE WHERE Z_URI = ?)"), arguments: [uri]) ?? false
    }

    // MARK: - Identity

    /// The origin URI ↔ local row map, in this transaction.
    var identity: IdentityMap { IdentityMap(db: db) }

    /// The local row (concrete entity and key) of an origin URI mapped here, if its row exists.
    func row(of uri: String, layout: StoreLayout) throws -> (entity: String, key: Int64)? {
        guard let row = try identity.row(of: uri),
              let table = layout.entityNames[row.root].flatMap({ layout.plans[$0]?.table }),
              let number = try Int.fetchOne(db.cachedStatement(sql: "SELECT Z_ENT FROM \(table) WHERE Z_PK = ?"), arguments: [row.key]),
              let entity = layout.entityNames[number] else { return nil }
        return (entity, row.key)
    }
}

/// Who wrote a value last: ordered by timestamp, then by origin UUID.
struct WriteClock: Comparable {
    var timestamp: HybridTimestamp
    var origin: UUID

    static func < (lhs: WriteClock, rhs: WriteClock) -> Bool {
        if lhs.timestamp != rhs.timestamp { return lhs.timestamp < rhs.timestamp }
        return lhs.origin.uuidString < rhs.origin.uuidString
    }
}
