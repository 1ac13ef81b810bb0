import Foundation
import GRDB
import FerryModel
import FerryStore

/// Every model version a store has been opened with for writing, kept in the file
/// (`Z_FERRY_MODEL`: version hash, the model as Xcode's `contents` XML, when first seen), so
/// that what was written with an older version can still be read long after the application's
/// bundle dropped it: change sets in the history, a peer still running that version.
enum ModelArchive {
    static let createTable = """
        CREATE TABLE IF NOT EXISTS Z_FERRY_MODEL (Z_HASH TEXT PRIMARY KEY, Z_CONTENTS TEXT NOT NULL, Z_FIRST_OPENED REAL NOT NULL)
        """

    /// Keeps `model` (once per version hash: written only the first time it opens the store).
    static func record(_ model: ManagedObjectModel, in db: Database) throws {
        try db.execute(sql: createTable)
        guard try Bool.fetchOne(db, sql: "SELECT 1 FROM Z_FERRY_MODEL WHERE Z_HASH = ?", arguments: [model.versionHash]) == nil else { return }
        try db.execute(sql: "INSERT INTO Z_FERRY_MODEL (Z_HASH, Z_CONTENTS, Z_FIRST_OPENED) VALUES (?, ?, ?)",
                       arguments: [model.versionHash, XcodeModelWriter.contents(of: model), Date().timeIntervalSince1970])
    }

    /// The kept models, oldest first, but those whose version hash is in `known` (not read at all).
    static func models(in db: Database, except known: Set<String> = []) throws -> [ManagedObjectModel] {
        guard try db.tableExists("Z_FERRY_MODEL") else { return [] }
        let rows = try Row.fetchAll(db, sql: "SELECT Z_HASH, Z_CONTENTS FROM Z_FERRY_MODEL ORDER BY Z_FIRST_OPENED, Z_HASH")
        return try rows.filter { !known.contains($0[0]) }.map { row in
            let hash: String = row[0]
            let contents: String = row[1]
            do {
                return try XcodeModelReader.read(xml: Data(contents.utf8), fileName: "Z_FERRY_MODEL \(hash)")
            } catch {
                throw StoreFailure("the model version \(hash) kept in the store cannot be read back (\(error)); the file is damaged", cause: error)
            }
        }
    }
}

extension SQLiteStore {
    /// Every model version this store has been opened with for writing, oldest first (the
    /// current one included). Change sets made with any of them can be decoded.
    public func knownModels() throws -> [ManagedObjectModel] {
        try read { db in try ModelArchive.models(in: db) }
    }
}
