import Foundation
import GRDB
import FerryModel
import FerryStore
import FerrySigning

extension SQLiteStore {
    /// The store's UUID, model hash and version vector.
    public func historyState() throws -> HistoryState {
        let store = identifier
        let vector = try read { db in try HistoryLog(db: db, store: store).vector() }
        return HistoryState(store: identifier, modelHash: modelVersionHash, vector: vector)
    }

    /// The change sets not covered by `vector`, as canonical JSON lines, in
    /// the order this store took them in (which can be applied as is).
    public func changeSetLines(after vector: VersionVector = [:], limit: Int? = nil) throws -> [String] {
        let store = identifier
        return try read { db in try HistoryLog(db: db, store: store).bodies(after: vector, limit: limit) }
    }

    /// ``changeSetLines(after:limit:)`` without holding them: `body` gets each line as it is read, in
    /// the order this store took them in, all from one read transaction (one state of the history,
    /// whatever is saved or purged meanwhile). A line of 1 MiB or more comes in its stored form,
    /// made a piece at a time as it is read: what is held at once is one line, not the history.
    /// - Throws: ``FerryStore/HistoryError/purged(origin:needed:purgedThrough:)`` when `vector` lacks
    ///   change sets this store has purged; what `body` throws, which ends the reading.
    public func forEachChangeSetLine(after vector: VersionVector = [:], _ body: (ChangeSetPage.Line) throws -> Void) throws {
        let store = identifier
        try read { db in try HistoryLog(db: db, store: store).forEachLine(after: vector, body) }
    }

    /// One page of ``changeSetLines(after:limit:)``: at most `limit` lines
    /// taken in after position `cursor` (0 for the start), and the cursor for
    /// the next page. Serving a long history page by page keeps memory flat; a
    /// line of 1 MiB or more stays compressed until it is read, a piece at a time.
    /// With `maximumBytes`, only the first lines whose texts, a newline after each,
    /// add up to at most that, and always the first (what one push request may carry);
    /// the lines past that are not read (a compressed body records its length: none is
    /// inflated).
    public func changeSetPage(after vector: VersionVector, cursor: Int64, limit: Int, maximumBytes: Int?) throws -> ChangeSetPage {
        let store = identifier
        let page = try read { db in
            try HistoryLog(db: db, store: store).page(after: vector, cursor: cursor, limit: limit, maximumBytes: maximumBytes)
        }
        return ChangeSetPage(lines: page.lines, cursor: page.cursor)
    }

    /// The change sets not covered by `vector`, decoded.
    public func changeSets(after vector: VersionVector = [:], limit: Int? = nil) throws -> [ChangeSet] {
        // (Change sets of an earlier model version come translated to the store's; see changeSetInKnownVersion.)
        try changeSetLines(after: vector, limit: limit).compactMap { line in
            if case .changeSet(let changeSet) = try ChangeSetCodec.decode(line, model: model, versionHash: modelVersionHash) { return changeSet }
            return changeSetInKnownVersion(line)
        }
    }
}

/// What the replay engine (`FerrySync`) needs from the store (``ReplicaStore``),
/// one short read or write transaction each.
extension SQLiteStore: ReplicaStore {
    public func saveReplay(_ request: SaveRequest, recording replay: ReplayAnnotation) throws -> SaveResult {
        try write(request, replay: replay)
    }

    /// The local ID of an object named by origin URI: this store's own URIs
    /// directly, others through the identity map; nil when it never arrived.
    public func localObjectID(forOriginURI uri: String) throws -> ObjectID? {
        let layout = self.layout
        let store = identifier
        // One read (an application waiting for a replicated object asks this after every commit):
        // a merged duplicate's URI names its survivor; then the map, which also holds this store's
        // own objects that were deleted and brought back (on a new row).
        let (survivor, mapped) = try read { db in
            let log = HistoryLog(db: db, store: store)
            let survivor = try log.survivors(of: [uri])[uri] ?? uri
            return (survivor, try log.row(of: survivor, layout: layout))
        }
        if let mapped {
            return .permanent(entityName: mapped.entity, store: store, primaryKey: mapped.key)
        }
        guard case .success(let parts) = ObjectURIComponents.parse(survivor), let origin = parts.store, model.entity(named: parts.entityName) != nil else {
            return nil
        }
        guard origin == identifier, let id = ownObjectID(parts) else { return nil }
        // A row that holds an object from elsewhere is not named by its number.
        return try lookUp(originURIs: [survivor]).own[survivor] == id ? id : nil
    }

    /// The ID an object URI of this store names by itself (no lookup: the row may
    /// be gone, or the object may have been brought back on another row).
    public func ownObjectID(forURI uri: String) -> ObjectID? {
        guard case .success(let parts) = ObjectURIComponents.parse(uri), parts.store == identifier else { return nil }
        return ownObjectID(parts)
    }

    private func ownObjectID(_ parts: ObjectURIComponents) -> ObjectID? {
        parts.primaryKey.map { .permanent(entityName: parts.entityName, store: identifier, primaryKey: $0) }
    }

    /// A deleted object's tombstone: entity, last values and the delete's clock.
    public func tombstone(of uri: String) throws -> Tombstone? {
        let store = identifier
        guard let found = try read({ db in try HistoryLog(db: db, store: store).tombstone(uri) }) else { return nil }
        return tombstone(entity: found.entity, text: found.text, clock: found.clock)
    }

    /// The deleted objects whose last values or memberships name `uri`.
    public func tombstones(referringTo uri: String) throws -> [String: Tombstone] {
        let store = identifier
        var result: [String: Tombstone] = [:]
        // A tombstone buried before an entity rename names the object as it was then called.
        let spellings = [uri] + versionTranslator.earlierSpellings(of: uri)
        let found = try read { db in
            try spellings.flatMap { spelling in try HistoryLog(db: db, store: store).tombstones(naming: spelling) }
        }
        for found in found where result[found.uri] == nil {
            let tombstone = tombstone(entity: found.entity, text: found.text, clock: found.clock)
            if tombstone.names(uri) { result[found.uri] = tombstone }
        }
        return result
    }

    private func tombstone(entity: String, text: String, clock: WriteClock) -> Tombstone {
        var values: [String: ChangeValue] = [:], memberships: [String: [String]] = [:]
        // (A tombstone made before an upgrade is read in the version it was made with, translated.)
        if let changeSet = changeSetInKnownVersion(text), let change = changeSet.changes.first {
            values = change.values
            memberships = change.added
        }
        return Tombstone(entity: entity, values: values, memberships: memberships, timestamp: clock.timestamp, origin: clock.origin)
    }

    /// Whether an object (by origin URI) was deleted here.
    public func isBuried(_ uri: String) throws -> Bool {
        let store = identifier
        return try read { db in try HistoryLog(db: db, store: store).isBuried(uri) }
    }

    /// The (timestamp, origin) of the last write of a property after the object's insert.
    public func lastWrite(of id: ObjectID, property: String) throws -> WriteStamp? {
        guard let root = layout.plans[id.entityName]?.rootNumber, let key = id.primaryKey else { return nil }
        let store = identifier
        return try read { db in try HistoryLog(db: db, store: store).clock(root: root, key: key, property: property) }
            .map { WriteStamp(timestamp: $0.timestamp, origin: $0.origin) }
    }

    /// The position keys of the members of an ordered to-many relationship of an object, by member origin URI.
    public func positions(of id: ObjectID, relationship: String) throws -> [String: String] {
        guard let root = layout.plans[id.entityName]?.rootNumber, let key = id.primaryKey else { return [:] }
        let store = identifier
        return try read { db in try HistoryLog(db: db, store: store).positions(root: root, key: key, relationship: relationship) }
    }

    /// For each merged URI among `uris`, the survivor it stands for now.
    public func aliases(of uris: [String]) throws -> [String: String] {
        let store = identifier
        return try read { db in try HistoryLog(db: db, store: store).survivors(of: uris) }
    }

    /// The change sets that restored each of `uris` that was ever restored.
    public func restores(of uris: [String]) throws -> [String: Set<ChangeSetMark>] {
        let store = identifier
        return try read { db in try HistoryLog(db: db, store: store).restores(of: uris) }
    }

    /// Every clock of an object's properties.
    public func lastWrites(of id: ObjectID) throws -> [String: WriteStamp] {
        guard let root = layout.plans[id.entityName]?.rootNumber, let key = id.primaryKey else { return [:] }
        let store = identifier
        return try read { db in try HistoryLog(db: db, store: store).clocks(root: root, key: key) }
            .mapValues { WriteStamp(timestamp: $0.timestamp, origin: $0.origin) }
    }

    /// The values merged duplicates carried to the object `uri` names.
    public func carriedValues(of uri: String) throws -> [String: CarriedValue] {
        let store = identifier, model = self.model
        return try read { db in try HistoryLog(db: db, store: store).carried(of: uri, model: model) }
    }

    /// Every object with a clock for `property`, with that clock.
    public func writes(of property: String) throws -> [ObjectID: WriteStamp] {
        let store = identifier, layout = self.layout
        return try read { db in try HistoryLog(db: db, store: store).clocks(of: property, layout: layout) }
            .mapValues { WriteStamp(timestamp: $0.timestamp, origin: $0.origin) }
    }

    /// The origin URI of a local object: the URI it was born with elsewhere, or its own.
    public func originURI(of id: ObjectID) throws -> String {
        let layout = self.layout
        return try read { db in
            var names = OriginNames(layout: layout, db: db)
            return try names.uri(of: id)
        }
    }

    /// Records a replayed change set without data changes: applied with no
    /// effect, or quarantined with its reason.
    public func recordReceived(_ changeSet: ChangeSet, body: String, as record: ReceivedRecord) throws {
        let recorder = ChangeRecorder(layout: layout, store: identifier, signing: signing)
        let compressedBody = try StoredBody.compressed(body)  // (before taking the writer)
        try write { db in
            try recorder.recordReceived(changeSet, body: body, compressedBody: compressedBody,
                                        status: record.quarantineReason == nil ? HistorySchema.applied : HistorySchema.quarantined,
                                        reason: record.quarantineReason, writes: record.writes, tombstones: record.tombstones,
                                        repairDeletes: record.repairDeletes, retry: record.isRetry, in: db)
        }
    }

    /// Forgets every change set of `origin`: its history, its place in the vector, the held ones.
    public func removeOrigin(_ origin: UUID) throws -> Int {
        guard origin != identifier else { throw HistoryError.ownOrigin(origin) }
        var removed = 0
        try write { db in
            try db.execute(sql: "DELETE FROM Z_FERRY_CHANGESET WHERE Z_ORIGIN = ?", arguments: [origin.uuidString])
            removed = db.changesCount
            try db.execute(sql: "DELETE FROM Z_FERRY_VECTOR WHERE Z_ORIGIN = ?", arguments: [origin.uuidString])
            try db.execute(sql: "DELETE FROM Z_FERRY_PENDING WHERE Z_ORIGIN = ?", arguments: [origin.uuidString])
            removed += db.changesCount
            try db.execute(sql: "DELETE FROM Z_FERRY_HORIZON WHERE Z_ORIGIN = ?", arguments: [origin.uuidString])
            try db.execute(sql: "DELETE FROM Z_FERRY_PURGE_MARK WHERE Z_ORIGIN = ?", arguments: [origin.uuidString])
        }
        return removed
    }

    /// Keeps a received change set that cannot be applied yet (a predecessor is
    /// missing, or it was made with another model version).
    public func hold(_ changeSet: HeldChangeSet) throws {
        try write { db in
            try db.execute(sql: "INSERT OR REPLACE INTO Z_FERRY_PENDING (Z_ORIGIN, Z_SEQ, Z_REASON, Z_BODY) VALUES (?, ?, ?, ?)",
                           arguments: [changeSet.origin.uuidString, changeSet.sequence, changeSet.reason, changeSet.body])
        }
    }

    /// The change sets held back, with why.
    public func heldChangeSets() throws -> [HeldChangeSet] {
        try read(Self.held)
    }

    /// How many change sets are held back and how many quarantined (two counts, no bodies read).
    public func backlog() throws -> Backlog {
        try read { db in
            Backlog(waiting: try Int.fetchOne(db.cachedStatement(sql: "SELECT count(*) FROM Z_FERRY_PENDING")) ?? 0,
                    quarantined: try Int.fetchOne(db.cachedStatement(sql: "SELECT count(*) FROM Z_FERRY_CHANGESET WHERE Z_STATUS = ?"),
                                                  arguments: [HistorySchema.quarantined]) ?? 0,
                    leftInvalid: try Int.fetchOne(db.cachedStatement(sql: "SELECT count(*) FROM Z_FERRY_CHANGESET WHERE Z_STATUS = ? AND Z_REASON IS NOT NULL"),
                                                  arguments: [HistorySchema.applied]) ?? 0,
                    waitingForModel: try Int.fetchOne(db.cachedStatement(sql: "SELECT count(*) FROM Z_FERRY_PENDING WHERE substr(Z_REASON, 1, ?) = ?"),
                                                      arguments: [Backlog.modelReasonPrefix.utf8.count, Backlog.modelReasonPrefix]) ?? 0)
        }
    }

    /// The version vector and the held change sets, in one read transaction.
    public func replayStart() throws -> ReplayStart {
        let store = identifier
        // (On the writer's connection: the replay writes next; see readOnWriter.)
        return try readOnWriter { db in
            let log = HistoryLog(db: db, store: store)
            let horizon = try log.horizon()
            return ReplayStart(vector: try log.vector(), held: try Self.held(db), horizon: horizon.vector, horizonTime: horizon.time)
        }
    }

    private static func held(_ db: Database) throws -> [HeldChangeSet] {
        try Row.fetchAll(db.cachedStatement(sql: "SELECT Z_ORIGIN, Z_SEQ, Z_REASON, Z_BODY FROM Z_FERRY_PENDING ORDER BY Z_ORIGIN, Z_SEQ")).compactMap { row in
            guard let text: String = row[0], let origin = UUID(parsing: text) else { return nil }
            return HeldChangeSet(origin: origin, sequence: row[1], reason: row[2], body: row[3])
        }
    }

    /// Forgets a held change set (it was applied, or turned out a duplicate).
    public func release(origin: UUID, sequence: Int64) throws {
        try write { db in
            try db.execute(sql: "DELETE FROM Z_FERRY_PENDING WHERE Z_ORIGIN = ? AND Z_SEQ = ?", arguments: [origin.uuidString, sequence])
        }
    }

    /// The quarantined change sets, with their reasons, in the order received.
    /// The change sets applied although they left the store breaking a rule of the model.
    public func changeSetsLeftInvalid() throws -> [HeldChangeSet] {
        try read { db in
            try Row.fetchAll(db, sql: "SELECT Z_ORIGIN, Z_SEQ, Z_REASON, Z_BODY FROM Z_FERRY_CHANGESET " +
                                 "WHERE Z_STATUS = ? AND Z_REASON IS NOT NULL ORDER BY Z_RANK",
                             arguments: [HistorySchema.applied]).compactMap { row in
                guard let text: String = row[0], let origin = UUID(parsing: text) else { return nil }
                return HeldChangeSet(origin: origin, sequence: row[1], reason: row[2], body: try StoredBody.text(row[3]))
            }
        }
    }

    public func quarantinedChangeSets() throws -> [HeldChangeSet] {
        try read { db in
            try Row.fetchAll(db, sql: "SELECT Z_ORIGIN, Z_SEQ, Z_REASON, Z_BODY FROM Z_FERRY_CHANGESET WHERE Z_STATUS = ? ORDER BY Z_RANK",
                             arguments: [HistorySchema.quarantined]).compactMap { row in
                guard let text: String = row[0], let origin = UUID(parsing: text) else { return nil }
                return HeldChangeSet(origin: origin, sequence: row[1], reason: row[2] ?? "", body: try StoredBody.text(row[3]))
            }
        }
    }

    func write(_ body: (Database) throws -> Void) throws {
        do {
            try writeTransaction(body)
        } catch {
            throw StoreError.storeFailure(Self.failure(error))
        }
    }
}

extension SQLiteStore {
    public func originURIs() throws -> [ObjectID: String] {
        let store = identifier
        return try read { db in
            var result: [ObjectID: String] = [:]
            for (uri, row) in try IdentityMap(db: db).all() {
                guard case .success(let parts) = ObjectURIComponents.parse(uri) else { continue }
                result[.permanent(entityName: parts.entityName, store: store, primaryKey: row.key)] = uri
            }
            return result
        }
    }
}

extension SQLiteStore {
    /// One read-only connection to the file at `path`, without Ferry's set-up: for looking at a
    /// file before (or without) opening it as a store.
    static func readOnlyQueue(_ path: String) throws -> DatabaseQueue {
        var configuration = Configuration()
        configuration.readonly = true
        return try DatabaseQueue(path: path, configuration: configuration)
    }

    /// The state of the store file at `path` without its model: UUID, the model
    /// hash it was last opened with, its version vector, and the keys it holds. Opens read-only.
    /// - Throws: ``StoreError`` when the file is missing or not a Ferry store.
    /// With `keyFile` (by default the one beside the store), a store that has not recorded its own
    /// key yet (not opened since it got its key file) shows the key file's public half: what
    /// `ferry state` prints.
    public static func historyState(atPath path: String, keyFile: String? = nil) throws(StoreError) -> HistoryState {
        var state = try historyState(reading: path)
        if state.publicKey == nil {
            state.publicKey = (try? StoreSigningKey(contentsOf: keyFile ?? StoreSigningKey.defaultPath(forStore: path)))?.publicKey
        }
        return state
    }

    private static func historyState(reading path: String) throws(StoreError) -> HistoryState {
        guard FileManager.default.fileExists(atPath: path) else {
            throw StoreError.cannotOpen(path: path, reason: "no store file here; create one with `ferry init --store \(path) --model MODEL`")
        }
        do {
            return try readOnlyQueue(path).read { db in
                guard try db.tableExists("Z_METADATA"),
                      let row = try Row.fetchOne(db, sql: "SELECT Z_UUID, Z_PLIST FROM Z_METADATA WHERE Z_VERSION = 1"),
                      let text: String = row[0], let store = UUID(parsing: text), let plist: Data = row[1],
                      let metadata = try? JSONDecoder().decode(StoreOpener.Metadata.self, from: plist) else {
                    throw StoreError.cannotOpen(path: path, reason: "the file is not a Ferry store (no valid Z_METADATA)")
                }
                var vector: VersionVector = [:]
                if try db.tableExists("Z_FERRY_CHANGESET") {
                    vector = try HistoryLog(db: db, store: store).vector()
                }
                var state = HistoryState(store: store, modelHash: metadata.modelVersionHash, vector: vector)
                if try db.tableExists("Z_FERRY_KEY") {
                    let keys = try originKeys(in: db)
                    state.keys = keys.map(PublishedKey.init)
                    state.publicKey = keys.last(where: { $0.origin == store })?.publicKey
                }
                return state
            }
        } catch let error as StoreError {
            throw error
        } catch {
            throw StoreError.cannotOpen(path: path, reason: describe(error), cause: error)
        }
    }
}

extension SQLiteStore {
    /// For a batch of origin URIs, in one read: which were deleted here, and
    /// the local IDs of those mapped to rows (objects born elsewhere, or brought back).
    /// `uris` must not repeat a URI.
    public func lookUp(originURIs uris: [String]) throws -> OriginLookup {
        guard !uris.isEmpty else { return OriginLookup() }
        return try read { db in try lookUp(uris, in: db) }
    }

    /// ``lookUp(originURIs:)`` on the writer's connection (``readOnWriter(_:)``): for a replay, which writes next.
    public func lookUpForReplay(originURIs uris: [String]) throws -> OriginLookup {
        guard !uris.isEmpty else { return OriginLookup() }
        return try readOnWriter { db in try lookUp(uris, in: db) }
    }

    private func lookUp(_ uris: [String], in db: Database) throws -> OriginLookup {
        let store = identifier
        var buried = Set<String>()
        var mapped: [String: ObjectID] = [:]
        if try Bool.fetchOne(db.cachedStatement(sql: "SELECT EXISTS (SELECT 1 FROM Z_FERRY_TOMBSTONE)")) == true {
            // The URIs go in as one JSON array, so that one cached statement serves any number of them;
            // json_each drives the join (a probe per URI), rather than SQLite building a list of them first.
            let argument = JSONArgument(strings: uris, capacity: uris.count * 64)
            let tombstones = try db.cachedStatement(sql: "SELECT t.Z_URI FROM json_each(?) AS j JOIN Z_FERRY_TOMBSTONE AS t ON t.Z_URI = j.value")
            for uri in try String.fetchAll(tombstones, arguments: [argument.json]) {
                buried.insert(uri)
            }
        }
        let identity = IdentityMap(db: db)
        for (uri, row) in try identity.rows(of: uris) {
            guard case .success(let parts) = ObjectURIComponents.parse(uri) else { continue }
            mapped[uri] = .permanent(entityName: parts.entityName, store: store, primaryKey: row.key)
        }
        // This store's own URIs name their row only when the row was born here.
        var own: [String: ObjectID] = [:]
        let anyForeign = try !identity.isEmpty()
        for uri in uris where mapped[uri] == nil && !buried.contains(uri) {
            guard let id = ownObjectID(forURI: uri) else { continue }
            if anyForeign, let root = layout.plans[id.entityName]?.rootNumber, let key = id.primaryKey,
               try identity.uri(of: IdentityMap.Row(root: root, key: key)) != nil { continue }
            own[uri] = id
        }
        // Merged duplicates (their rows are gone; the URIs stand for their survivors).
        var aliased = Set<String>()
        if try Bool.fetchOne(db.cachedStatement(sql: "SELECT EXISTS (SELECT 1 FROM Z_FERRY_ALIAS)")) == true {
            let argument = JSONArgument(strings: uris, capacity: uris.count * 64)
            let aliases = try db.cachedStatement(sql: "SELECT a.Z_URI FROM json_each(?) AS j JOIN Z_FERRY_ALIAS AS a ON a.Z_URI = j.value")
            aliased.formUnion(try String.fetchAll(aliases, arguments: [argument.json]))
        }
        return OriginLookup(buried: buried, mapped: mapped, own: own, aliased: aliased)
    }
}
