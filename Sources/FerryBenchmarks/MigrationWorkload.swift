// Migration speed on a store of N Person objects (default 1,000,000), each case on a
// fresh copy of the same file:
//   - add an optional attribute, and rename one by its Renaming ID: Ferry's migration (the time
//     its open spends migrating, to the durable commit: `SQLiteStore.migration.seconds`) against
//     SQLite's own `ALTER TABLE … ADD COLUMN` / `RENAME COLUMN` on the same file in an immediate
//     transaction, to its durable commit too (WAL, synchronous=FULL);
//   - a change that rewrites rows (Person.id Integer 64 → Decimal: a new column, every value
//     copied, the old column and its index dropped), and a new derived attribute (Person.searchName
//     derived from canonical:(name): a column added, every row's value computed through the SQL
//     function a save's code backs): against raw sqlite3 inserting N rows.
//
//     swift build -c release --product FerryBenchmarks && .build/release/FerryBenchmarks --migrate [--count N]
import Foundation
import GRDBSQLite
import FerryModel
import FerryStore
import FerrySQLite
import FerryTestSupport

enum MigrationWorkload {
    /// Seconds of `sql` in an immediate transaction on `path`, to its durable commit, with raw sqlite3.
    static func rawTransaction(_ sql: String, path: String) throws -> Double {
        let db = try RawDatabase(path: path)
        return try seconds {
            try db.exec("BEGIN IMMEDIATE")
            try db.exec(sql)
            try db.exec("COMMIT")
        }
    }

    /// A fresh copy of `source` (its main file: the source was checkpointed and closed).
    static func copy(_ source: String, to path: String) throws {
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
        try FileManager.default.copyItem(atPath: source, toPath: path)
    }

    static func run(count: Int, model: ManagedObjectModel, runs: Int) throws {
        print("Migration speed: a store of \(count) Person objects, each case on a fresh copy, best of \(runs)")
        let directory = TemporaryDirectory(prefix: "ferry-migrate")
        let source = directory.file("source.sqlite")
        var settings = Settings(arguments: [])
        settings.count = count
        settings.batch = 10_000
        let made = try ferryInsert(settings, model: model, path: source)
        print(String(format: "  store made in %.1f s (%.1f MB)", made, Double(try StoreFileSize.bytes(source)) / 1_048_576))
        let rawInsertSeconds = try rawInsert(settings, model: model, path: directory.file("raw-insert.sqlite"))

        let added = try personVariant(of: model) { $0.ownAttributes.append(AttributeDescription(name: "nickname", type: .string)) }
        let renamed = try personVariant(of: model) { person in
            person.ownAttributes = person.ownAttributes.map { var a = $0; if a.name == "name" { a.name = "fullName"; a.renamingIdentifier = "name" }; return a }
        }
        let retyped = try personVariant(of: model) { person in
            person.ownAttributes = person.ownAttributes.map { var a = $0; if a.name == "id" { a.type = .decimal; a.defaultValue = .decimal(0) }; return a }
        }
        let derived = try personVariant(of: model) {
            $0.ownAttributes.append(AttributeDescription(name: "searchName", type: .string, derivation: Derivation(expression: "canonical:(name)")))
        }
        let copyPath = directory.file("copy.sqlite")
        /// Best times of opening a fresh copy with `target` (migrating): the migration alone, the
        /// whole open; and of opening one with the original model (which migrates nothing).
        func ferryOpen(_ target: ManagedObjectModel) throws -> (migration: Double, migrating: Double, plain: Double) {
            var best = (migration: Double.infinity, migrating: Double.infinity, plain: Double.infinity)
            for _ in 0..<runs {
                try copy(source, to: copyPath)
                best.plain = min(best.plain, try seconds { _ = try SQLiteStore(path: copyPath, model: model, options: .init(earlierModels: [model])) })
                try copy(source, to: copyPath)
                var report: MigrationReport?
                best.migrating = min(best.migrating, try seconds {
                    report = try SQLiteStore(path: copyPath, model: target, options: .init(earlierModels: [model])).migration
                })
                guard let report else { throw RawSQLiteError.failed("opening with the new model migrated nothing") }
                best.migration = min(best.migration, report.seconds)
            }
            return best
        }
        func raw(_ sql: String) throws -> Double {
            var best = Double.infinity
            for _ in 0..<runs {
                try copy(source, to: copyPath)
                best = min(best, try rawTransaction(sql, path: copyPath))
            }
            return best
        }
        for (label, target, sql) in [("add an optional attribute", added, "ALTER TABLE ZPERSON ADD COLUMN ZNICKNAME VARCHAR"),
                                     ("rename an attribute (Renaming ID)", renamed, "ALTER TABLE ZPERSON RENAME COLUMN ZNAME TO ZFULLNAME")] {
            let ferry = try ferryOpen(target)
            let sqlite = try raw(sql)
            print(String(format: "  %@: Ferry's migration %.2f ms (its whole open %.1f ms; an open that migrates nothing %.1f ms); " +
                             "SQLite's own ALTER TABLE %.2f ms; ratio %.2fx (target <= 2x)",
                         label, ferry.migration * 1000, ferry.migrating * 1000, ferry.plain * 1000, sqlite * 1000, ferry.migration / sqlite))
        }
        let rewrite = try ferryOpen(retyped)
        let cost = rewrite.migration
        print(String(format: "  Integer 64 -> Decimal (every row rewritten, to the commit): %.2f s (its whole open %.2f s); " +
                         "raw sqlite3 inserting the same %d rows: %.2f s",
                     cost, rewrite.migrating, count, rawInsertSeconds))
        printRates(count: count, rawSeconds: rawInsertSeconds, ferrySeconds: cost, ferryLabel: "Ferry migration (rewrite):", target: 0.3)
        let derivation = try ferryOpen(derived)
        print(String(format: "  a new derived attribute, canonical:(name) (every row computed, to the commit): %.2f s (its whole open %.2f s)",
                     derivation.migration, derivation.migrating))
        printRates(count: count, rawSeconds: rawInsertSeconds, ferrySeconds: derivation.migration, ferryLabel: "Ferry migration (derive):", target: 0.3)
    }
}
