import Foundation
import GRDB
import FerryModel
import FerryStore

/// Snapshots (docs/SYNC.md, "Snapshots"): a consistent copy of a store's file, and how a copy
/// becomes a store of its own.
///
/// A snapshot is the store's SQLite file as one read transaction saw it (`VACUUM INTO`): every
/// object, its per-property clocks, positions, tombstones and aliases within the horizon, the
/// identity map, the version vector and what was purged, the change sets still kept, and the
/// model's metadata. The store that installs it takes a UUID of its own; the objects the source
/// had inserted keep the source's URIs (their origin URIs) through runs of the identity map, so
/// both stores name every object the same, and the source's change sets stay in its history
/// under the source's origin.
extension SQLiteStore {
    /// Writes a consistent snapshot of this store to `path`, which must not exist yet. Writers
    /// are not held up (a read transaction of the write-ahead log).
    public func writeSnapshot(to path: String) throws(StoreError) {
        guard !FileManager.default.fileExists(atPath: path) else {
            throw StoreError.cannotOpen(path: path, reason: "a snapshot is written to a new file, and this one exists")
        }
        do {
            // Outside an explicit transaction (SQLite refuses VACUUM in one): the statement is its own
            // read transaction, so the copy is one consistent state of the store.
            try pool.unsafeRead { db in try db.execute(sql: "VACUUM INTO ?", arguments: [path]) }
        } catch {
            try? FileManager.default.removeItem(atPath: path)
            throw StoreError.storeFailure(StoreFailure("cannot write a snapshot to \(path): \(error)", cause: error))
        }
    }

    /// Writes a snapshot next to the store's file and hands it over open and already unlinked
    /// (nothing is left behind, whatever happens to the reader).
    public func writeSnapshot() throws -> SnapshotFile {
        let path = "\(self.path).snapshot-\(UUID().uuidString)"
        try writeSnapshot(to: path)
        defer { try? FileManager.default.removeItem(atPath: path) }
        do {
            let handle = try FileHandle(forReadingFrom: URL(fileURLWithPath: path))
            let size = try handle.seekToEnd()
            try handle.seek(toOffset: 0)
            return SnapshotFile(handle: handle, size: Int64(size))
        } catch {
            throw StoreError.storeFailure(StoreFailure("cannot read back the snapshot \(path): \(error)", cause: error))
        }
    }

    /// Removes the store file at `path` with its write-ahead log and shared-memory index, if there
    /// (a snapshot being installed that will not be used).
    public static func removeFiles(at path: String) {
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
    }

    /// What ``installSnapshot(at:model:earlierModels:identifier:)`` made.
    public struct InstalledSnapshot: Sendable, Equatable {
        /// The UUID of the store the snapshot was taken from.
        public var source: UUID
        /// The new store's UUID.
        public var identifier: UUID
        /// The objects the source had inserted itself, now named by the source's URIs.
        public var adoptedObjects: Int
        /// The version vector the new store starts from.
        public var vector: VersionVector
    }

    /// Makes the snapshot file at `path` (written by ``writeSnapshot(to:)`` on any store of `model`,
    /// or of an earlier version of it) a store of its own, in place: checks that it is a sound
    /// Ferry store of this model, gives it the UUID `identifier`, and maps the objects the source
    /// had inserted to the source's URIs. Nothing is changed when a check fails. A snapshot of
    /// one of `earlierModels` migrates by every rule (``Options/earlierModels``).
    /// - Throws: ``StoreError/cannotOpen(path:reason:cause:)`` for a file that is not a sound Ferry store;
    ///   ``StoreError/incompatibleModel(path:differences:)`` for another model.
    @discardableResult
    public static func installSnapshot(at path: String, model: ManagedObjectModel, earlierModels: [ManagedObjectModel] = [],
                                       identifier: UUID = UUID()) throws(StoreError) -> InstalledSnapshot {
        try checkSnapshotFile(at: path)
        // Opening checks the model (and migrates a snapshot of an earlier version of it).
        let source: UUID
        var adopted = 0
        do {
            let store = try SQLiteStore(path: path, model: model, options: Options(createIfMissing: false, earlierModels: earlierModels))
            source = store.identifier
            guard source != identifier else {
                throw StoreError.cannotOpen(path: path, reason: "the new store must have a UUID of its own, not its source's")
            }
            try store.pool.write { db in
                adopted = try store.adoptNativeObjects(in: db, origin: source)
                try db.execute(sql: "UPDATE Z_METADATA SET Z_UUID = ? WHERE Z_VERSION = 1", arguments: [identifier.uuidString])
            }
        } catch let error as StoreError {
            throw error
        } catch {
            throw StoreError.storeFailure(StoreFailure("cannot install the snapshot \(path): \(error)", cause: error))
        }
        // Reopened under its new UUID (the store above is closed by now).
        do {
            let store = try SQLiteStore(path: path, model: model, options: Options(createIfMissing: false))
            // Everything in the main file, so that it can be moved into place alone.
            try store.checkpoint(truncating: true)
            return InstalledSnapshot(source: source, identifier: store.identifier, adoptedObjects: adopted, vector: try store.historyState().vector)
        } catch let error as StoreError {
            throw error
        } catch {
            throw StoreError.storeFailure(StoreFailure("cannot open the installed snapshot \(path): \(error)", cause: error))
        }
    }

    /// Refuses a file that is not a sound SQLite database holding only tables and indexes: a
    /// snapshot comes from a peer, and a trigger or a view in it would run inside this store.
    private static func checkSnapshotFile(at path: String) throws(StoreError) {
        guard FileManager.default.fileExists(atPath: path) else {
            throw StoreError.cannotOpen(path: path, reason: "no snapshot file here")
        }
        do {
            try readOnlyQueue(path).read { db in
                try db.execute(sql: "PRAGMA trusted_schema = OFF")
                let check = try String.fetchAll(db, sql: "PRAGMA quick_check")
                guard check == ["ok"] else {
                    throw StoreError.cannotOpen(path: path, reason: "the snapshot is damaged (\(check.prefix(3).joined(separator: "; "))); take it again")
                }
                let others = try String.fetchAll(db, sql: "SELECT type || ' ' || name FROM sqlite_master WHERE type NOT IN ('table', 'index')")
                guard others.isEmpty else {
                    throw StoreError.cannotOpen(path: path, reason: "the file holds \(others.prefix(3).joined(separator: ", ")), " +
                                                "which no Ferry store has; it is not a snapshot")
                }
                guard try db.tableExists("Z_METADATA"), try db.tableExists("Z_FERRY_CHANGESET") else {
                    throw StoreError.cannotOpen(path: path, reason: "the file is not a Ferry store's snapshot (no Z_METADATA or Z_FERRY_CHANGESET)")
                }
            }
        } catch let error as StoreError {
            throw error
        } catch {
            throw StoreError.cannotOpen(path: path, reason: "not a SQLite database: \(error)", cause: error)
        }
    }

    /// Maps every row this store inserted itself (no entry in the identity map) to the URI it
    /// has under `origin`, as runs: consecutive rows of one entity are one entry.
    /// - Returns: how many rows were mapped.
    private func adoptNativeObjects(in db: Database, origin: UUID) throws -> Int {
        var roots: [Int: String] = [:]
        for plan in layout.plans.values { roots[plan.rootNumber] = plan.table }
        let map = IdentityMap(db: db)
        var adopted = 0
        for (root, table) in roots.sorted(by: { $0.key < $1.key }) {
            adopted += try map.mapUnmappedRows(of: table, root: root) { entity in
                layout.entityNames[entity].map { "x-coredata://\(origin.uuidString)/\($0)/p" }
            }
        }
        return adopted
    }
}
