import Foundation
import GRDB
import FerryModel
import FerryStore

/// Creates a new store's schema, or checks and migrates an existing one, in
/// one immediate transaction (so two processes opening at once cannot both
/// create it).
struct StoreOpener {
    /// The layout version written by this Ferry; a newer file is refused.
    /// 2: the identity map keeps runs (`Z_FERRY_RANGE`), which Ferry 1 would not read.
    /// 3: change-set bodies may be stored compressed (``StoredBody``), which Ferry 2 would misread.
    static let formatVersion = 3

    let pool: DatabasePool
    let path: String
    let model: ManagedObjectModel
    /// The UUID a new store gets (a random one when nil).
    var newIdentifier: UUID?
    /// Version hashes of the model's earlier versions: a store of one of them may lose what the
    /// model removed; a store of any other model may not (see ``SQLiteStore/Options/earlierModels``).
    var earlierModelHashes: Set<String> = []
    /// Hears each step of a migration (``SQLiteStore/Options/migrationProgress``).
    var progress: (@Sendable (String, Int, Int) -> Void)?

    struct Opened {
        var identifier: UUID
        var mapping: SchemaMapping
        var migration: MigrationReport?
        /// When the migration started (uptime nanoseconds).
        var migrationStarted: UInt64?
    }

    /// The metadata kept in `Z_METADATA.Z_PLIST` (JSON).
    struct Metadata: Codable {
        var formatVersion: Int
        var storeType: String
        var modelVersionHash: String
        var entityVersionHashes: [String: String]
        var modelVersionIdentifier: String?
    }

    /// What `Z_MODELCACHE` holds: the mapping and the model's persistent shape.
    struct ModelCache: Codable {
        var mapping: SchemaMapping
        var signature: ModelSignature
    }

    func open() throws(StoreError) -> Opened {
        do {
            return try pool.writeWithoutTransaction { db in
                var opened: Opened?
                try db.inTransaction(.immediate) {
                    opened = try openInTransaction(db)
                    try HistorySchema.create(in: db)
                    try ModelArchive.record(model, in: db)
                    return .commit
                }
                guard var opened else { throw StoreError.cannotOpen(path: path, reason: "the store could not be initialised") }
                // A migration's time runs to its durable commit, as a user waits for it.
                if let started = opened.migrationStarted {
                    opened.migration?.seconds = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
                }
                return opened
            }
        } catch let error as StoreError {
            throw error
        } catch {
            throw SQLiteStore.openFailure(error, path: path)
        }
    }

    /// Reads an existing store without writing: it must have been made with exactly this model.
    func openReadOnly() throws(StoreError) -> Opened {
        do {
            return try pool.read { db in
                guard try db.tableExists("Z_METADATA") else {
                    throw StoreError.cannotOpen(path: path, reason: "the file is not a Ferry store (no Z_METADATA)")
                }
                let (identifier, metadata, cache) = try readMetadata(db)
                guard metadata.modelVersionHash == model.versionHash, cache.signature == ModelSignature(model: model) else {
                    throw StoreError.cannotOpen(path: path,
                                                reason: "the store was last opened with another model version, and a read-only store cannot be migrated")
                }
                guard metadata.formatVersion == Self.formatVersion else {
                    throw StoreError.cannotOpen(path: path, reason: """
                        the store was last written by an older Ferry (format \(metadata.formatVersion)); it is upgraded the next time \
                        it opens for writing, which a read-only store cannot do
                        """)
                }
                return Opened(identifier: identifier, mapping: cache.mapping)
            }
        } catch let error as StoreError {
            throw error
        } catch {
            throw SQLiteStore.openFailure(error, path: path)
        }
    }

    private func openInTransaction(_ db: Database) throws -> Opened {
        let tables = Set(try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'table'"))
        guard tables.contains("Z_METADATA") else {
            let foreign = tables.filter { !$0.hasPrefix("sqlite_") }
            guard foreign.isEmpty else {
                throw StoreError.cannotOpen(path: path, reason: "the file is a SQLite database but not a Ferry store " +
                                            "(it has tables \(foreign.sorted().prefix(5).joined(separator: ", ")))")
            }
            return try create(db)
        }
        return try migrate(db)
    }

    private func create(_ db: Database) throws -> Opened {
        let identifier = newIdentifier ?? UUID()
        let mapping = SchemaMapping(model: model)
        for statement in SchemaDDL.metadataTables + SchemaDDL.statements(mapping: mapping, model: model, existingColumns: [:]) {
            try db.execute(sql: statement)
        }
        try writePrimaryKeyRows(db, mapping: mapping)
        try db.execute(sql: "INSERT INTO Z_METADATA (Z_VERSION, Z_UUID, Z_PLIST) VALUES (1, ?, ?)",
                       arguments: [identifier.uuidString, try metadataJSON()])
        try db.execute(sql: "INSERT INTO Z_MODELCACHE (Z_CONTENT) VALUES (?)",
                       arguments: [try cacheJSON(mapping)])
        return Opened(identifier: identifier, mapping: mapping)
    }

    /// The store's UUID, metadata and model cache, checked.
    private func readMetadata(_ db: Database) throws -> (UUID, Metadata, ModelCache) {
        guard let row = try Row.fetchOne(db, sql: "SELECT Z_UUID, Z_PLIST FROM Z_METADATA WHERE Z_VERSION = 1"),
              let uuidText: String = row[0], let identifier = UUID(parsing: uuidText),
              let plist: Data = row[1] else {
            throw StoreError.cannotOpen(path: path, reason: "Z_METADATA has no valid store UUID; the file is damaged")
        }
        let metadata: Metadata
        do { metadata = try JSONDecoder().decode(Metadata.self, from: plist) } catch {
            throw StoreError.cannotOpen(path: path, reason: "Z_METADATA cannot be read: \(error)", cause: error)
        }
        guard metadata.formatVersion <= Self.formatVersion else {
            throw StoreError.unsupportedFormatVersion(path: path, found: metadata.formatVersion, supported: Self.formatVersion)
        }
        guard let cacheData = try Data.fetchOne(db, sql: "SELECT Z_CONTENT FROM Z_MODELCACHE LIMIT 1"),
              let cache = try? JSONDecoder().decode(ModelCache.self, from: cacheData) else {
            throw StoreError.cannotOpen(path: path, reason: "Z_MODELCACHE is missing or damaged")
        }
        return (identifier, metadata, cache)
    }

    private func migrate(_ db: Database) throws -> Opened {
        let (identifier, metadata, cache) = try readMetadata(db)
        let signature = ModelSignature(model: model)
        if metadata.modelVersionHash == model.versionHash && cache.signature == signature {
            if metadata.formatVersion < Self.formatVersion {
                // Made by an older Ferry: mark it with this one's format (the tables it lacks are added in
                // the same transaction), so an older Ferry then refuses it instead of misreading it.
                var raised = metadata
                raised.formatVersion = Self.formatVersion
                try db.execute(sql: "UPDATE Z_METADATA SET Z_PLIST = ? WHERE Z_VERSION = 1", arguments: [try sortedJSON(raised)])
            }
            return Opened(identifier: identifier, mapping: cache.mapping)
        }
        // Core Data's lightweight migration, inferred from the stored shape and the new model (its
        // Renaming IDs): refused whole, naming every difference, before anything is written.
        let started = DispatchTime.now().uptimeNanoseconds
        var migration = try SchemaMigration(from: cache.signature, to: model, path: path)
        let losses = migration.losses
        if !losses.isEmpty && !earlierModelHashes.contains(metadata.modelVersionHash) {
            let notEarlier = "the store was made with a model that is not an earlier version of this one " +
                "(its version hash \(metadata.modelVersionHash) is in none of the bundle's versions), so nothing is removed; " +
                "if this is the right model, open the store with its .xcdatamodeld bundle holding the store's version, " +
                "as Core Data needs the source model to migrate"
            throw StoreError.incompatibleModel(path: path, differences: losses + [notEarlier])
        }
        let steps = ["removing what the new version removed", "adding what it added", "rewriting changed types, filling defaults and deriving values",
                     "renaming the merge metadata", "recording the new version"]
        func step(_ number: Int) { progress?(steps[number], number + 1, steps.count) }
        var mapping = cache.mapping
        step(0)
        try migration.apply(to: &mapping, in: db)
        step(1)
        mapping.extend(for: model)
        // The columns of the mapping's tables only (not the history's), and the indexes there are:
        // an added attribute then costs about what SQLite's own ALTER TABLE does.
        let schema = try Row.fetchAll(db, sql: "SELECT type, name FROM sqlite_master WHERE type IN ('table', 'index')")
        let tables = Set(schema.filter { $0[0] == "table" }.map { $0[1] as String })
        let existingIndexes = Set(schema.filter { $0[0] == "index" }.map { $0[1] as String })
        var existingColumns: [String: Set<String>] = [:]
        for table in Set(mapping.entities.values.map(\.table)).union(mapping.joinTables.values.map(\.table)) where tables.contains(table) {
            existingColumns[table] = Set(try db.columns(in: table).map(\.name))
        }
        for statement in SchemaDDL.statements(mapping: mapping, model: model, existingColumns: existingColumns, existingIndexes: existingIndexes) {
            try db.execute(sql: statement)
        }
        step(2)
        try migration.finish(db, mapping: &mapping, model: model)
        step(3)
        try migration.renameHistoryProperties(db, mapping: mapping, model: model)
        try migration.renameHistoryEntities(db)
        step(4)
        try writePrimaryKeyRows(db, mapping: mapping)
        try db.execute(sql: "UPDATE Z_METADATA SET Z_PLIST = ? WHERE Z_VERSION = 1", arguments: [try metadataJSON()])
        try db.execute(sql: "UPDATE Z_MODELCACHE SET Z_CONTENT = ?", arguments: [try cacheJSON(mapping)])
        let report = MigrationReport(fromVersionHash: metadata.modelVersionHash, toVersionHash: model.versionHash,
                                     changes: migration.changes, seconds: 0)
        return Opened(identifier: identifier, mapping: mapping, migration: report, migrationStarted: started)
    }

    /// One `Z_PRIMARYKEY` row per entity; existing rows keep their `Z_MAX`.
    private func writePrimaryKeyRows(_ db: Database, mapping: SchemaMapping) throws {
        let present = Set(try Int.fetchAll(db, sql: "SELECT Z_ENT FROM Z_PRIMARYKEY"))
        for (name, entity) in mapping.entities.sorted(by: { $0.value.number < $1.value.number }) where !present.contains(entity.number) {
            let parent = entity.parent.flatMap { mapping.entities[$0]?.number } ?? 0
            try db.execute(sql: "INSERT INTO Z_PRIMARYKEY (Z_ENT, Z_NAME, Z_SUPER, Z_MAX) VALUES (?, ?, ?, 0)",
                           arguments: [entity.number, name, parent])
        }
    }

    /// Metadata of this model in this Ferry's format (a migration rewrites it whole, format included).
    private func metadataJSON() throws -> Data {
        try sortedJSON(Metadata(formatVersion: Self.formatVersion, storeType: "SQLite", modelVersionHash: model.versionHash,
                                entityVersionHashes: model.entityVersionHashes, modelVersionIdentifier: model.versionIdentifier))
    }

    private func cacheJSON(_ mapping: SchemaMapping) throws -> Data {
        try sortedJSON(ModelCache(mapping: mapping, signature: ModelSignature(model: model)))
    }

    /// JSON with sorted keys, so the same value is always the same bytes.
    private func sortedJSON(_ value: some Encodable) throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return try encoder.encode(value)
    }
}
