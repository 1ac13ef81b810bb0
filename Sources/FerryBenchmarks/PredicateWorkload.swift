import Foundation
import GRDB
import FerryModel
import FerryStore
import FerrySQLite
import FerryTestSupport

/// The predicate benchmark: over 100,000 Person rows (name "Person i",
/// indexed id i, manager i/10), three fetches through Ferry's public API —
/// parsed once, run many times, returning object IDs — against the
/// equivalent hand-written SQL through GRDB on the same file, in the same run.
enum PredicateWorkload {
    struct Case {
        let name: String
        let format: String
        let arguments: [Any?]
        let sql: String
        let sqlArguments: StatementArguments
        let repetitions: Int
    }

    static func run(count: Int, runs: Int, model: ManagedObjectModel) throws {
        let directory = TemporaryDirectory(prefix: "ferry-bench-predicates")
        let path = directory.file("people.sqlite")
        var settings = Settings(arguments: ["bench"])
        settings.count = count
        settings.batch = 10_000
        _ = try rawInsert(settings, model: model, path: path)
        let store = try SQLiteStore(path: path, model: model)
        let container = try PersistentContainer(store: store)
        let context = container.newContext()
        let pool = try DatabasePool(path: path)

        let probe = count / 2
        let cases = [
            Case(name: "indexed equality  (id == %d)", format: "id == %d", arguments: [probe],
                 sql: "SELECT Z_PK FROM ZPERSON WHERE ZID = ?", sqlArguments: [probe], repetitions: 2_000),
            Case(name: "BEGINSWITH[c]     (name BEGINSWITH[c] %@)", format: "name BEGINSWITH[c] %@", arguments: ["person 999"],
                 sql: "SELECT Z_PK FROM ZPERSON WHERE ZNAME LIKE ?", sqlArguments: ["person 999%"], repetitions: 20),
            Case(name: "ANY over to-many  (ANY employees.name == %@)", format: "ANY employees.name == %@", arguments: ["Person \(probe)"],
                 sql: "SELECT t.Z_PK FROM ZPERSON t WHERE EXISTS (SELECT 1 FROM ZPERSON e WHERE e.ZMANAGER = t.Z_PK AND e.ZNAME = ?)",
                 sqlArguments: ["Person \(probe)"], repetitions: 20),
        ]
        print("Predicates over \(count) Person rows: Ferry (parsed once, context.fetchObjectIDs) vs hand-written SQL through GRDB, best of \(runs)")
        for benchmark in cases {
            let request = try FetchRequest(entityName: "Person", format: benchmark.format, arguments: benchmark.arguments, model: model)
            var ferryBest = Double.infinity
            var sqlBest = Double.infinity
            var ferryMatches = 0
            var sqlMatches = 0
            for _ in 0..<runs {
                sqlBest = min(sqlBest, try seconds {
                    for _ in 0..<benchmark.repetitions {
                        sqlMatches = try pool.read { db in try Int64.fetchAll(db, sql: benchmark.sql, arguments: benchmark.sqlArguments).count }
                    }
                })
                ferryBest = min(ferryBest, try seconds {
                    for _ in 0..<benchmark.repetitions { ferryMatches = try context.fetchObjectIDs(request).count }
                })
            }
            guard ferryMatches == sqlMatches else {
                throw RawSQLiteError.failed("\(benchmark.name): Ferry found \(ferryMatches) rows, the SQL \(sqlMatches)")
            }
            print(String(format: "  %@  %5d matches  SQL %8.3f ms  Ferry %8.3f ms  ratio %.2fx (target <= 1.50x)",
                         benchmark.name.padding(toLength: 48, withPad: " ", startingAt: 0), ferryMatches,
                         sqlBest * 1000 / Double(benchmark.repetitions), ferryBest * 1000 / Double(benchmark.repetitions), ferryBest / sqlBest))
        }
    }
}
