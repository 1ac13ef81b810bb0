import Foundation
import GRDB
import GRDBSQLite
import FerryModel
import FerryStore
import FerrySQLite
import FerryTestSupport

/// `--reads`: the cost of one point read made just after another connection committed, the read
/// every hop of W4 makes (A's daemon reading the new change set, B's replay start and look-up, the
/// application's look-up of the replicated object); see docs/PERFORMANCE.md.
///
/// Three ways to make the look-up of ``SQLiteStore/localObjectID(forOriginURI:)`` on the same
/// file, interleaved: raw sqlite3 (prepared statements and `BEGIN`/`COMMIT`, the baseline), GRDB's
/// `DatabasePool.read` with cached statements (how `SQLiteStore` read before), and
/// `SQLiteStore.localObjectID` itself. Each read follows a commit; in the first pass the process
/// idles 20 ms before it (as W4's daemons and reader do between saves: the processor then
/// comes back with cold caches), in the second it does not.
enum ColdReadWorkload {
    static func run(model: ManagedObjectModel, samples: Int = 200) throws {
        let directory = TemporaryDirectory()
        let path = directory.file("reads.sqlite")
        let store = try SQLiteStore(path: path, model: model)
        let context = try PersistentContainer(store: store).newContext()
        for index in 0..<1_000 {
            let person = try context.insert(entityName: "Person")
            try person.setValue("person \(index)", forKey: "name")
        }
        try context.save()
        // A URI the store does not hold: the look-up reads the alias and object maps, and finds nothing.
        let uri = "x-coredata://\(UUID().uuidString)/Person/p1"

        let raw = try RawDatabase(path: path)
        let begin = try raw.prepare("BEGIN DEFERRED TRANSACTION")
        let aliases = try raw.prepare("SELECT EXISTS (SELECT 1 FROM Z_FERRY_ALIAS)")
        let object = try raw.prepare("SELECT Z_ROOT, Z_PK FROM Z_FERRY_OBJECT WHERE Z_URI = ?")
        let commit = try raw.prepare("COMMIT")
        defer { [begin, aliases, object, commit].forEach { sqlite3_finalize($0) } }
        func rawLookUp() throws -> Bool {
            func step(_ statement: OpaquePointer) -> Int32 {
                defer { sqlite3_reset(statement) }
                return sqlite3_step(statement)
            }
            guard step(begin) == SQLITE_DONE, step(aliases) == SQLITE_ROW else { throw RawSQLiteError.failed(raw.message) }
            sqlite3_bind_text(object, 1, uri, -1, RawDatabase.transient)
            let found = step(object) == SQLITE_ROW
            guard step(commit) == SQLITE_DONE else { throw RawSQLiteError.failed(raw.message) }
            return found
        }
        let pool = try DatabasePool(path: path)
        func poolLookUp() throws -> Bool {
            try pool.read { db in
                _ = try Bool.fetchOne(db.cachedStatement(sql: "SELECT EXISTS (SELECT 1 FROM Z_FERRY_ALIAS)"))
                return try Row.fetchOne(db.cachedStatement(sql: "SELECT Z_ROOT, Z_PK FROM Z_FERRY_OBJECT WHERE Z_URI = ?"), arguments: [uri]) != nil
            }
        }
        let ways: [(name: String, lookUp: () throws -> Bool)] = [
            ("raw sqlite3 (baseline)", rawLookUp),
            ("GRDB DatabasePool.read", poolLookUp),
            ("SQLiteStore.localObjectID", { try store.localObjectID(forOriginURI: uri) != nil }),
        ]
        print("Point reads after another connection's commit, \(samples) of each way, interleaved (µs):")
        for idle in [20_000, 0] {
            var times = Array(repeating: [Double](), count: ways.count)
            for index in 0..<(samples * ways.count) {
                let way = index % ways.count
                let person = try context.insert(entityName: "Person")
                try person.setValue("written \(index)", forKey: "name")
                try context.save()
                if idle > 0 { usleep(UInt32(idle)) }
                let start = DispatchTime.now().uptimeNanoseconds
                guard try !ways[way].lookUp() else { throw RawSQLiteError.failed("the look-up found an object it should not") }
                times[way].append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1e3)
            }
            let sorted = times.map { $0.sorted() }
            let medians = sorted.map { percentile($0, 0.5) }
            print(idle > 0 ? "  after 20 ms idle:" : "  without idling:")
            for (way, (sorted, median)) in zip(ways, zip(sorted, medians)) {
                print("    " + way.name.padding(toLength: 28, withPad: " ", startingAt: 0)
                      + String(format: "p50 %6.1f  p90 %6.1f", median, percentile(sorted, 0.9)))
            }
            print(String(format: "    ratio to raw at p50: DatabasePool.read %.2fx, SQLiteStore %.2fx", medians[1] / medians[0], medians[2] / medians[0]))
        }
    }
}
