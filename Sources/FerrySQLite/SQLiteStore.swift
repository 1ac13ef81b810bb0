import Foundation
import Synchronization
import GRDB
import GRDBSQLite
import FerryModel
import FerryStore
import FerrySigning

/// A persistent store in one SQLite file, laid out in the spirit of Core
/// Data's (`Z_PK`, `Z_ENT`, `Z_OPT`, one table per root entity, join tables,
/// `Z_PRIMARYKEY`, `Z_METADATA`).
///
/// The file is opened through a GRDB `DatabasePool` in WAL mode, so several
/// processes (an application and the Ferry daemon) may use it at once: reads
/// run concurrently, and each save is one `BEGIN IMMEDIATE` transaction.
/// A save is on disk when it returns (`synchronous=FULL`: each commit syncs the
/// write-ahead log), because a store that has told a peer "applied" must still
/// hold the change set after a power cut.
/// Opening a file made with an older model migrates additive changes
/// automatically and refuses anything else with
/// ``StoreError/incompatibleModel(path:differences:)``.
///
/// ```swift
/// let store = try SQLiteStore(path: "/var/lib/ferry/app.sqlite", model: model)
/// let container = try PersistentContainer(store: store)
/// ```
public final class SQLiteStore: PersistentStore {
    /// The store's UUID (`Z_METADATA.Z_UUID`), the host part of its object URIs.
    public let identifier: UUID
    /// The model the store was opened with.
    public let model: ManagedObjectModel
    /// The file path.
    public let path: String
    /// Whether the store was opened with ``Options/readOnly``.
    public let isReadOnly: Bool
    /// What opening the store migrated, when it did (the model differed from the store's).
    public let migration: MigrationReport?
    /// The other model versions this store knows: ``Options/earlierModels`` and every version it
    /// was opened with before (``knownModels()``). Change sets made with one of them are
    /// translated on replay; see ``ReplicaStore/earlierModels``.
    public let earlierModels: [ManagedObjectModel]
    /// Reads text of the earlier versions (history, tombstones, change sets received) in the model's.
    package let versionTranslator: VersionTranslator
    /// The model's version hash, worked out once when the store opened (computing it
    /// hashes every entity), for decoding many change sets against the model.
    public var modelVersionHash: String { layout.modelVersionHash }

    let pool: DatabasePool
    /// The connections ``read(_:)`` runs on (the pool's readers when all are busy).
    private let readers: ReadConnections
    /// The file the store opened, for ``refuseWritesToReplacedFile()``.
    let openedFile: FileIdentity?
    /// The folder of a store opened read-only on a read-only file system: reads stop when it turns writable.
    private let readOnlyFolder: String?
    /// What a read-only view on a read-only file system cannot read, when it cannot read everything:
    /// a write-ahead log left beside the file without its -shm file (the view reads the file alone).
    /// Nil for every other store.
    public let readOnlyViewLimitation: String?
    /// Checkpoints the write-ahead log off the saving thread (writable stores only).
    let checkpointer: BackgroundCheckpointer?
    let layout: StoreLayout
    /// How the change sets this store records are signed.
    public let signing: ChangeSetSigning
    /// Wakes ``commits()``'s subscribers; made on the first subscription.
    private let watcher = Mutex<CommitWatcher?>(nil)
    /// Set by ``close()``.
    private let isClosed = Atomic<Bool>(false)

    /// How to open a store.
    public struct Options: Sendable {
        /// Create the file when it does not exist (default true).
        public var createIfMissing: Bool
        /// How long a writer waits for another connection's transaction, in seconds (at least;
        /// it tries again every 0.2 ms meanwhile).
        public var busyTimeout: TimeInterval
        /// The UUID a newly created store gets; random when nil (the default).
        /// Fixed UUIDs are for reproducible tests: two stores must never share one.
        public var newStoreIdentifier: UUID?
        /// Open without writing anything (default false): no file is created, no schema set up
        /// or migrated, and saves fail. The store must exist and have been made with exactly
        /// this model. On a read-only file system, where SQLite cannot create the -wal and
        /// -shm files even a reader needs, the file is opened as immutable (SQLite's
        /// `immutable=1`: what the last checkpoint left in the file) — unless a write-ahead log
        /// and its -shm file were left beside it (a process that ended with the store open),
        /// which SQLite then reads, indexing the log in memory; a log left without its -shm
        /// cannot be read, and ``SQLiteStore/readOnlyViewLimitation`` says so. Its reads fail
        /// once the file system is writable again, as another process could then change the file.
        public var readOnly: Bool
        /// Earlier versions of the model (the other versions of its `.xcdatamodeld` bundle, see
        /// ``XcodeModelReader/readVersions(at:)``). A store last opened with one of them migrates to
        /// the model by every rule of lightweight migration, removals included. A store of any
        /// other model migrates only where nothing is lost (additions, renames, widened types,
        /// defaults): opening a store with the wrong model file must never delete its objects, so,
        /// as Core Data does without the source version (134130), the open is refused instead.
        public var earlierModels: [ManagedObjectModel]
        /// Hears each step of a migration as it starts (what it does, its number, how many there
        /// are), for a progress line on a terminal: a migration that rewrites a large store runs
        /// for a while inside the open.
        public var migrationProgress: (@Sendable (_ step: String, _ number: Int, _ total: Int) -> Void)?
        /// The key the store signs its change sets with (docs/SYNC.md, "Signed change sets"); nil
        /// (the default) reads the key file beside the store (``StoreSigningKey/defaultPath(forStore:)``)
        /// when there is one. A store that has a key and cannot use it refuses saves (it records
        /// no change set its peers would refuse); one that never had a key records unsigned ones.
        public var signingKey: (any ChangeSetSigner)?

        /// Runs once the pool's writer has made its first read, before the open checks that the
        /// file is still the one at the path (tests replace it there).
        var afterConnecting: (@Sendable () -> Void)?

        /// Creates options.
        public init(createIfMissing: Bool = true, busyTimeout: TimeInterval = 10, newStoreIdentifier: UUID? = nil,
                    readOnly: Bool = false, earlierModels: [ManagedObjectModel] = [],
                    migrationProgress: (@Sendable (_ step: String, _ number: Int, _ total: Int) -> Void)? = nil,
                    signingKey: (any ChangeSetSigner)? = nil) {
            self.signingKey = signingKey
            self.createIfMissing = createIfMissing
            self.busyTimeout = busyTimeout
            self.newStoreIdentifier = newStoreIdentifier
            self.readOnly = readOnly
            self.earlierModels = earlierModels
            self.migrationProgress = migrationProgress
        }
    }

    /// Opens (and if needed creates or migrates) the store at `path` for `model`.
    /// - Throws: ``StoreError`` when the file cannot be opened, is not a Ferry
    ///   store, or was made with an incompatible model.
    public init(path: String, model: ManagedObjectModel, options: Options = Options()) throws(StoreError) {
        let exists = FileManager.default.fileExists(atPath: path)
        if !exists && !options.createIfMissing {
            throw StoreError.cannotOpen(path: path, reason: "no store file here; create one with `ferry init --store \(path) --model MODEL`")
        }
        let directory = URL(fileURLWithPath: path).deletingLastPathComponent().path
        guard FileManager.default.fileExists(atPath: directory) else {
            throw StoreError.cannotOpen(path: path, reason: "the folder \(directory) does not exist")
        }
        var isFolder: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isFolder), isFolder.boolValue {
            throw StoreError.cannotOpen(path: path, reason: "this is a folder; store.path names the store's file (e.g. \(path)/store.sqlite)")
        }
        var configuration = Configuration()
        configuration.busyMode = .callback(BusyWaiting.handler(timeout: options.busyTimeout))
        configuration.label = "Ferry"
        configuration.prepareDatabase { db in try SQLFunctions.register(on: db) }
        var openPath = path
        var readOnlyFolder: String?
        var unreadLog: String?
        if options.readOnly {
            guard exists else { throw StoreError.cannotOpen(path: path, reason: "no store file here to open read-only") }
            configuration.readonly = true
            if Self.isOnReadOnlyFileSystem(directory) {
                guard sqlite3_compileoption_used("USE_URI") == 1 else {  // (for `immutable=1`)
                    throw StoreError.unavailable(path: path, reason: "the file system is read-only, " +
                                                 "and this SQLite library cannot open a file as immutable (it was built without URI file names)")
                }
                readOnlyFolder = directory
                let log = Self.fileSize(path + "-wal")
                let logHoldsCommits = log > Self.walHeaderBytes
                // A log left by a process that ended with the store open (a crash, a power cut) is
                // read by SQLite when its -shm is there too, indexed in this process's memory since
                // the -shm cannot be written. Otherwise the file is opened as immutable: it alone is read.
                if !logHoldsCommits || !FileManager.default.fileExists(atPath: path + "-shm") {
                    let escaped = path.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed) ?? path
                    openPath = "file:\(escaped)?immutable=1"
                    if logHoldsCommits {
                        unreadLog = "cannot read the store's write-ahead log (\(path)-wal, \(log) bytes; its -shm file is missing): " +
                            "commits it holds are not served until the store opens"
                    }
                }
            }
        }
        (pool, openedFile) = try Self.openPool(openPath: openPath, path: path, configuration: configuration, durable: !options.readOnly,
                                               afterConnecting: options.afterConnecting)
        readers = ReadConnections(path: openPath, configuration: configuration, limit: configuration.maximumReaderCount)
        let opener = StoreOpener(pool: pool, path: path, model: model, newIdentifier: options.newStoreIdentifier,
                                 earlierModelHashes: Set(options.earlierModels.map(\.versionHash)), progress: options.migrationProgress)
        let opened = try options.readOnly ? opener.openReadOnly() : opener.open()
        signing = options.readOnly ? .unsigned
            : try Self.signing(given: options.signingKey, path: path, identifier: opened.identifier, pool: pool)
        // Installed once nothing can throw any more, so `deinit` (which removes it) always runs.
        if options.readOnly {
            checkpointer = nil
        } else {
            let checkpointer = BackgroundCheckpointer(path: path)
            pool.writeWithoutTransaction { db in checkpointer.install(on: db) }
            self.checkpointer = checkpointer
        }
        self.identifier = opened.identifier
        self.model = model
        self.path = path
        self.isReadOnly = options.readOnly
        self.migration = opened.migration
        self.readOnlyFolder = readOnlyFolder
        self.readOnlyViewLimitation = unreadLog
        self.layout = StoreLayout(model: model, mapping: opened.mapping, storeIdentifier: opened.identifier)
        // The archive's versions not given already (none for a store never opened with another version:
        // no model text is read). A damaged archive leaves only the given versions: change sets of
        // the others then wait, visibly.
        var seen: Set<String> = [layout.modelVersionHash]
        let given = options.earlierModels.filter { seen.insert($0.versionHash).inserted }
        let archived = (try? pool.read { db in try ModelArchive.models(in: db, except: seen) }) ?? []
        self.earlierModels = given + archived
        self.versionTranslator = VersionTranslator(model: model, earlierModels: earlierModels)
    }

    /// A change set's text read in this store's model version: as it is, or, made with an earlier
    /// version the store knows, translated (``ChangeSetTranslation``); nil when it cannot be read
    /// (a version the store does not know, or a translation refused).
    func changeSetInKnownVersion(_ text: String) -> ChangeSet? {
        switch try? ChangeSetCodec.decode(text, model: model, versionHash: modelVersionHash) {
        case .changeSet(let changeSet)?:
            return changeSet
        case .otherModel(_, _, let hash, _)?:
            guard case .translated(let changeSet) = versionTranslator.translate(text, madeWith: hash) else { return nil }
            return changeSet
        case nil:
            return nil
        }
    }

    deinit {
        if !isClosed.load(ordering: .acquiring) { closeOtherConnections() }
    }

    /// Closes the store: its other connections first, then its writer, last and alone, so that
    /// SQLite copies the write-ahead log into the file and removes it. The file alone then holds
    /// every commit (a copy of it, or a view that cannot read the log: an immutable one on a
    /// read-only file system). Releasing the store does the same, but only if nothing holds it
    /// any more before the process ends: a process that ends while its store is open leaves the
    /// log beside the file (the next open reads it; nothing is lost). A long-running owner (the
    /// daemon) calls this when it stops. Reads and saves after it fail; a second call does nothing.
    /// - Throws: ``StoreError/storeFailure(_:)`` when the writer cannot close (a statement of it
    ///   still running); the store's other connections are closed by then, and the writer stays open.
    public func close() throws(StoreError) {
        guard !isClosed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        closeOtherConnections()
        // The pool's own readers first: `DatabasePool.close()` closes its writer before them.
        pool.releaseMemory()
        do {
            try pool.close()
        } catch {
            throw StoreError.storeFailure(StoreFailure("cannot close the store \(path): \(Self.describe(error))", cause: error))
        }
    }

    /// Closes every connection but the pool's, and waits for them: the read connections (see
    /// ReadConnections.close), the commit watcher's thread (bounded: a watcher that did not end in
    /// time leaves the log, which the next open reads), and the background checkpointer's (whose
    /// checkpoint under way is let finish).
    private func closeOtherConnections() {
        readers.close()
        watcher.withLock { $0 }?.close(timeout: 5)
        // Reentrant: the last reference to a store may go inside one of its own pool's writes.
        if let checkpointer {
            pool.unsafeReentrantWrite { db in checkpointer.uninstall(from: db) }
            checkpointer.close()
        }
    }

    // MARK: - PersistentStore

    public func fetchRows(_ request: FerryStore.FetchRequest) throws -> [RowSnapshot] {
        let entity = try request.validated(in: model)
        guard let table = layout.table(of: entity) else { throw QueryError.unknownEntity(entity.name) }
        let query = try SQLQuery.select(layout.selectList(ofTable: table, alias: "t0"), for: request, layout: layout)
        let store = UUIDBox(value: identifier)
        let layout = self.layout
        return try read { db in
            let statement = try db.cachedStatement(sql: query.sql)
            return try Row.fetchAll(statement, arguments: query.arguments).compactMap { layout.snapshot(from: $0, store: store) }
        }
    }

    public func fetchObjectIDs(_ request: FerryStore.FetchRequest) throws -> [ObjectID] {
        _ = try request.validated(in: model)
        let query = try SQLQuery.select("t0.Z_PK, t0.Z_ENT", for: request, layout: layout)
        let names = layout.entityNames
        let store = identifier
        return try read { db in
            try Row.fetchAll(db.cachedStatement(sql: query.sql), arguments: query.arguments).compactMap { row -> ObjectID? in
                guard let name = names[row[1]] else { return nil }
                return .permanent(entityName: name, store: store, primaryKey: row[0])
            }
        }
    }

    /// Reads row numbers and entity numbers straight into the list, row by row (no row objects:
    /// a million IDs take some ten megabytes).
    public func fetchObjectIDList(_ request: FerryStore.FetchRequest) throws -> ObjectIDList {
        _ = try request.validated(in: model)
        let query = try SQLQuery.select("t0.Z_PK, t0.Z_ENT", for: request, layout: layout)
        let names = layout.entityNames
        let numbers = names.keys.sorted()
        var position: [Int: UInt16] = [:]
        for (index, number) in numbers.enumerated() { position[number] = UInt16(truncatingIfNeeded: index) }
        let listedNames = numbers.compactMap { names[$0] }
        let store = identifier
        return try read { db in
            var keys: [Int64] = []
            var entities: [UInt16] = []
            let statement = try db.cachedStatement(sql: query.sql)
            try statement.setArguments(query.arguments)
            let cursor = try Row.fetchCursor(statement)
            while let row = try cursor.next() {
                guard let entity = position[row[1]] else { continue }
                keys.append(row[0])
                entities.append(entity)
            }
            return ObjectIDList(store: store, entityNames: listedNames, entities: entities, keys: keys)
        }
    }

    public func count(_ request: FerryStore.FetchRequest) throws -> Int {
        _ = try request.validated(in: model)
        let query = try SQLQuery.select("t0.Z_PK", for: request, layout: layout)
        return try read { db in
            try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM (\(query.sql))", arguments: query.arguments) ?? 0
        }
    }

    public func fetchValues(_ request: FerryStore.FetchRequest, keyPaths: [String]) throws -> [[FetchedValue?]] {
        _ = try request.validated(in: model)
        let query = try SQLQuery.selectValues(keyPaths, for: request, layout: layout)
        return try readValues(sql: query.sql, arguments: query.arguments, readers: query.readers)
    }

    /// Runs a dictionary or aggregate fetch's statement and reads each row's values.
    private func readValues(sql: String, arguments: StatementArguments, readers: [SQLQuery.ValueReader]) throws -> [[FetchedValue?]] {
        let names = layout.entityNames
        let store = identifier
        return try read { db in
            try Row.fetchAll(db.cachedStatement(sql: sql), arguments: arguments).map { row in
                readers.map { reader -> FetchedValue? in
                    switch reader {
                    case .attribute(let position, let type):
                        return ValueCodec.attributeValue(row[position], as: type).map(FetchedValue.attribute)
                    case .object(let keyPosition, let entityPosition):
                        guard let key: Int64 = row[keyPosition], let number: Int = row[entityPosition], let name = names[number] else { return nil }
                        return .object(.permanent(entityName: name, store: store, primaryKey: key))
                    }
                }
            }
        }
    }

    /// One `GROUP BY` statement (``SQLAggregateQuery``).
    public func fetchAggregates(_ request: FerryStore.FetchRequest) throws -> [[FetchedValue?]] {
        let plan = try AggregatePlan(request, in: model)
        let query = try SQLAggregateQuery(request, plan: plan, layout: layout)
        do {
            return try readValues(sql: query.sql, arguments: query.arguments, readers: query.readers)
        } catch StoreError.storeFailure(let failure) where (failure.cause as? DatabaseError)?.message == "integer overflow" {
            // As the in-memory aggregation reports it.
            let sums = plan.expressions.filter { $0.expression.function == .sum && $0.sourceType?.isInteger == true }.map(\.expression.name)
            throw QueryError.invalidAggregate(entity: request.entityName, name: sums.joined(separator: "', '"),
                                              reason: "overflows a 64-bit integer: sum a Double or Decimal attribute instead")
        }
    }

    public func rows(for ids: [ObjectID]) throws -> [ObjectID: RowSnapshot] {
        var byTable: [String: [Int64]] = [:]
        for id in ids where id.storeIdentifier == identifier {
            guard let entity = model.entity(named: id.entityName), let table = layout.table(of: entity), let key = id.primaryKey else { continue }
            byTable[table, default: []].append(key)
        }
        let wanted = Set(ids)
        let layout = self.layout
        let store = UUIDBox(value: identifier)
        return try read { db in
            var result: [ObjectID: RowSnapshot] = [:]
            for (table, keys) in byTable {
                for chunk in stride(from: 0, to: keys.count, by: 500).map({ Array(keys[$0..<min($0 + 500, keys.count)]) }) {
                    let placeholders = chunk.map { _ in "?" }.joined(separator: ",")
                    let sql = "SELECT \(layout.selectList(ofTable: table, alias: "t0")) FROM \(table) t0 WHERE t0.Z_PK IN (\(placeholders))"
                    for row in try Row.fetchAll(db, sql: sql, arguments: StatementArguments(chunk)) {
                        guard let snapshot = layout.snapshot(from: row, store: store), wanted.contains(snapshot.objectID) else { continue }
                        result[snapshot.objectID] = snapshot
                    }
                }
            }
            return result
        }
    }

    public func relatedObjectIDs(of id: ObjectID, relationship name: String) throws -> [ObjectID] {
        guard let entity = model.entity(named: id.entityName), let relationship = entity.relationship(named: name),
              id.primaryKey != nil else {
            throw QueryError.unknownKey(entity: id.entityName, key: name, keyPath: name)
        }
        guard relationship.isToMany else {
            return try rows(for: [id])[id]?.toOne[entity.propertyIndex(named: name) ?? 0].map { [$0] } ?? []
        }
        let layout = self.layout
        return try read { db in try layout.members(of: id, relationship: name, in: db) }
    }

    public func save(_ request: SaveRequest) throws -> SaveResult {
        guard !request.isEmpty else { return .empty }
        return try write(request, replay: nil)
    }

    /// Writes `request`, recording it as a local save or, with `replay`, as that replay
    /// (``ReplayWriter/saveReplay(_:recording:)``, which records one even when it writes no row).
    func write(_ request: SaveRequest, replay: ReplayAnnotation?) throws -> SaveResult {
        if case .unavailable(let reason) = signing { throw StoreError.cannotSign(path: path, reason: reason) }
        let writer = SaveWriter(layout: layout, store: identifier, signing: signing)
        do {
            // (Compressed before taking the writer, which the application's saves wait for.)
            let compressedBody = try replay.flatMap { try StoredBody.compressed($0.body) }
            return try writeTransaction { db in try writer.write(request, replay: replay, compressedBody: compressedBody, in: db) }
        } catch let error as SaveError {
            throw error
        } catch {
            throw SaveError.storeFailed(Self.failure(error))
        }
    }

    // MARK: - Checkpoints

    /// Copies what the write-ahead log holds into the store file now (a passive checkpoint on
    /// the writer: it waits for no reader, and what a reader still needs stays for the next
    /// one), after any background checkpoint already queued. Checkpoints run by themselves as
    /// the log grows; this is for a moment that needs the file up to date (a backup, a
    /// benchmark that must pay for every checkpoint its writes caused).
    ///
    /// With `truncating`, it waits for readers, copies everything and empties the log, so that
    /// the store file alone holds the store (before it is moved or copied as one file).
    public func checkpoint(truncating: Bool = false) throws {
        checkpointer?.waitForQueuedCheckpoints()
        do {
            try pool.writeWithoutTransaction { db in _ = try db.checkpoint(truncating ? .truncate : .passive) }
        } catch {
            throw StoreError.storeFailure(Self.failure(error))
        }
    }

    /// Gives the write-ahead log its working size up front (about 5 MB of zeros at 4 KiB
    /// pages), so that each durable commit overwrites blocks the log file has instead of
    /// appending: a sync that must also make a file's new size durable costs a second
    /// device flush (0.14–0.24 ms per commit where it was measured). A log that has once
    /// grown is reused by SQLite after each checkpoint, so this matters for a fresh log:
    /// a store's first thousand pages of commits after it was opened by nothing else.
    ///
    /// For a long-running writer (the daemon calls it once its store is open). It holds
    /// the store's write lock while it writes and syncs (milliseconds), and is worth nothing
    /// to a short-lived process alone on the store: the last connection to close a store
    /// deletes its log.
    /// - Returns: the bytes added to the log (0 when it was that large already, or the store
    ///   was opened read-only).
    /// - Throws: ``StoreError/storeFailure(_:)`` when the log cannot be written (a full disk:
    ///   the log is cut back to its size before; commits go on as they would have).
    @discardableResult
    public func preallocateLog() throws(StoreError) -> Int64 {
        guard !isReadOnly else { return 0 }
        do {
            return try LogPreallocation.extend(pool, logPath: path + "-wal")
        } catch let failure as StoreFailure {
            throw StoreError.storeFailure(failure)
        } catch {
            throw StoreError.storeFailure(Self.failure(error))
        }
    }

    // MARK: - Commits

    /// A signal after each commit to the store file from now on — a save or a replay through
    /// this process or any other on the same file, all seen the same way — without polling the
    /// store (see ``CommitWatcher``). A burst of commits while the subscriber was busy reads as
    /// one signal; what changed is read from the store. Ends when the store is closed or
    /// released (at once for a store already closed).
    ///
    /// ```swift
    /// for await _ in store.commits() { let vector = try store.historyState().vector … }
    /// ```
    public func commits() -> AsyncStream<Void> {
        if isClosed.load(ordering: .acquiring) { return AsyncStream { $0.finish() } }
        let watcher = self.watcher.withLock { watcher in
            if let watcher { return watcher }
            let made = CommitWatcher(path: path)
            watcher = made
            return made
        }
        return watcher.commits()
    }

    /// The commit watcher, once ``commits()`` made it (for tests and diagnostics).
    var commitWatcher: CommitWatcher? { watcher.withLock { $0 } }

    // MARK: - Helpers

    func read<T>(_ body: (Database) throws -> T) throws -> T {
        if let readOnlyFolder, !Self.isOnReadOnlyFileSystem(readOnlyFolder) {
            throw StoreError.unavailable(path: path,
                                         reason: "the file system is writable again; this read-only view of the store is closed — open the store normally")
        }
        return try passingStoreErrors { try readers.read(body, otherwise: { try pool.read(body) }) }
    }

    /// ``read(_:)`` on the writer's connection, in a read transaction: for what a replay reads just
    /// before it writes. A read connection's page cache is dropped whenever another connection
    /// commits, so there a replay's reads fetched again every page the last replay had written (13
    /// `pread`s per received change set in W4); the writer's cache still holds them. The read waits
    /// while a save writes, as the replay's own save would.
    func readOnWriter<T>(_ body: (Database) throws -> T) throws -> T {
        guard readOnlyFolder == nil else { return try read(body) }
        return try passingStoreErrors {
            try pool.writeWithoutTransaction { db in try db.inCachedTransaction(.deferred) { try body(db) } }
        }
    }

    /// Runs `body` in an immediate transaction on the writer: what every save and every write of
    /// the history goes through. Its errors pass as they are; a replaced store file refuses it first
    /// (``refuseWritesToReplacedFile()``).
    func writeTransaction<T>(_ body: (Database) throws -> T) throws -> T {
        try pool.writeWithoutTransaction { db in
            try refuseWritesToReplacedFile()
            return try db.inCachedTransaction(.immediate) { try body(db) }
        }
    }

    /// Runs a read: its query and history errors pass as they are, any other becomes a store failure (keeping it as the cause).
    private func passingStoreErrors<T>(_ read: () throws -> T) throws -> T {
        do {
            return try read()
        } catch let error as QueryError {
            throw error
        } catch let error as HistoryError {
            throw error
        } catch {
            throw StoreError.storeFailure(Self.failure(error))
        }
    }

    /// A failure of a query or write, keeping the error met (the database's) as its cause; retryable when
    /// SQLite says the cause lies outside the store (busy, locked, full, an I/O error).
    static func failure(_ error: Error) -> StoreFailure {
        guard let database = error as? DatabaseError else { return StoreFailure(describe(error), cause: error) }
        let transient: [ResultCode] = [.SQLITE_BUSY, .SQLITE_LOCKED, .SQLITE_FULL, .SQLITE_IOERR]
        return StoreFailure(describe(error), cause: database, isRetryable: transient.contains(database.resultCode))
    }

    /// The error for a store SQLite could not open or set up at `path`:
    /// ``StoreError/unavailable(path:reason:cause:)`` when the cause lies around the store
    /// (its folder or file cannot be written, the disk is full, an I/O error, a
    /// lock held too long), so that it opens once that is fixed;
    /// ``StoreError/cannotOpen(path:reason:cause:)`` for anything else (not a database, corrupt).
    static func openFailure(_ error: Error, path: String) -> StoreError {
        let hint = writabilityHint(path: path)
        let reason = describe(error) + hint
        if !hint.isEmpty { return .unavailable(path: path, reason: reason, cause: error) }
        if let error = error as? DatabaseError,
           [.SQLITE_READONLY, .SQLITE_FULL, .SQLITE_IOERR, .SQLITE_BUSY, .SQLITE_LOCKED, .SQLITE_PERM, .SQLITE_CANTOPEN]
            .contains(error.resultCode) {
            return .unavailable(path: path, reason: reason, cause: error)
        }
        return .cannotOpen(path: path, reason: reason, cause: error)
    }

    /// The size of a write-ahead log's header: a log no longer than this holds no commit.
    static let walHeaderBytes = 32

    /// The size of the file at `path` (0 when there is none).
    static func fileSize(_ path: String) -> Int {
        ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int) ?? 0
    }

    /// Whether `folder` is on a file system mounted read-only.
    static func isOnReadOnlyFileSystem(_ folder: String) -> Bool {
        var info = statvfs()
        return statvfs(folder, &info) == 0 && info.f_flag & UInt(ST_RDONLY) != 0
    }

    /// Why SQLite may have failed to open the store at `path`, when its folder or file is the
    /// cause: SQLite needs to write there (the -wal and -shm files) even to read a WAL store.
    static func writabilityHint(path: String) -> String {
        // Why `access(W_OK)` refused, from the errno it left.
        func cause() -> String { errno == EROFS ? "is on a read-only file system" : "is not writable by this user" }
        let folder = URL(fileURLWithPath: path).deletingLastPathComponent().path
        if access(folder, W_OK) != 0 {
            return "; the folder \(folder) \(cause()), and the store needs to write there (its -wal and -shm files) — make it writable"
        }
        if access(path, F_OK) == 0, access(path, W_OK) != 0 {
            return "; the file \(path) \(cause()) — make it writable"
        }
        return ""
    }

    static func describe(_ error: Error) -> String {
        if let error = error as? DatabaseError {
            return "\(error.message ?? "SQLite error") (SQLite code \(error.resultCode.rawValue))"
        }
        return "\(error)"
    }
}
