import Foundation
import GRDB
import Synchronization
import Testing
import FerryModel
import FerryStore
import FerryTestSupport
@testable import FerrySQLite

/// The connections a store reads on (``ReadConnections``) and its write transactions
/// (`Database.inCachedTransaction`): what the pool's `read` and GRDB's `inTransaction` promised,
/// kept with cached statements.
@Suite("Read connections and write transactions")
struct ReadConnectionTests {
    /// A database with one table `t (x)` holding `rows` rows, its writer, and read connections on it.
    struct Fixture {
        let directory = TemporaryDirectory()
        let writer: DatabasePool
        let readers: ReadConnections

        init(rows: Int = 0, limit: Int = 2) throws {
            let path = directory.file("reads.sqlite")
            // Waiting when busy, as a store's connections do: a read-only connection that opens while the
            // writer commits may find the log's index locked for a moment (without a wait, under a loaded
            // machine both the open and the insert could fail, and the count at the end came out short).
            var configuration = Configuration()
            configuration.busyMode = .timeout(10)
            writer = try DatabasePool(path: path, configuration: configuration)
            try writer.write { db in
                try db.execute(sql: "CREATE TABLE t (x INTEGER)")
                for x in 0..<rows { try db.execute(sql: "INSERT INTO t VALUES (?)", arguments: [x]) }
            }
            readers = ReadConnections(path: path, configuration: configuration, limit: limit)
        }

        func insert(_ x: Int) throws {
            try writer.write { db in try db.execute(sql: "INSERT INTO t VALUES (?)", arguments: [x]) }
        }

        /// Rows of `t` read on the read connections; `fallback` when none could be had.
        func count(fallback: Int = -1) throws -> Int {
            try readers.read({ db in try Int.fetchOne(db, sql: "SELECT count(*) FROM t") ?? 0 }, otherwise: { fallback })
        }
    }

    struct Planned: Error {}

    @Test("A read sees every commit made before it, by another connection")
    func seesCommits() throws {
        let fixture = try Fixture(rows: 1)
        #expect(try fixture.count() == 1)
        try fixture.insert(2)
        #expect(try fixture.count() == 2, "the connection's earlier read must not pin its snapshot")
    }

    @Test("A read's statements all see one snapshot, even when a commit comes between them")
    func oneSnapshot() throws {
        let fixture = try Fixture(rows: 1)
        let (before, after) = try fixture.readers.read({ db in
            let before = try Int.fetchOne(db, sql: "SELECT count(*) FROM t") ?? 0
            try fixture.insert(2)
            return (before, try Int.fetchOne(db, sql: "SELECT count(*) FROM t") ?? 0)
        }, otherwise: { (-1, -1) })
        #expect(before == 1 && after == 1)
        #expect(try fixture.count() == 2)
    }

    @Test("A schema change made on another connection is seen by the next read")
    func schemaChange() throws {
        let fixture = try Fixture()
        let columns = { try fixture.readers.read({ db in try db.columns(in: "t").map(\.name) }, otherwise: { [] }) }
        #expect(try columns() == ["x"])
        try fixture.writer.write { db in try db.execute(sql: "ALTER TABLE t ADD COLUMN y TEXT") }
        #expect(try columns() == ["x", "y"], "GRDB's schema cache must be cleared when the schema version changes")
    }

    @Test("With every connection busy, a read goes to its fallback at once instead of waiting")
    func fallbackWhenBusy() throws {
        let fixture = try Fixture(rows: 3, limit: 1)
        let (outer, inner) = try fixture.readers.read({ db in
            (try Int.fetchOne(db, sql: "SELECT count(*) FROM t") ?? 0, try fixture.count(fallback: 42))
        }, otherwise: { (-1, -1) })
        #expect(outer == 3, "the one connection takes the first read")
        #expect(inner == 42, "the read made while it is busy goes to the fallback")
        #expect(try fixture.count(fallback: 42) == 3, "the connection is given back after its read")
    }

    @Test("A read that throws ends its transaction: the error comes out and the connection reads on")
    func throwingRead() throws {
        let fixture = try Fixture(rows: 1, limit: 1)
        #expect(throws: Planned.self) {
            try fixture.readers.read({ db -> Int in
                _ = try Int.fetchOne(db, sql: "SELECT count(*) FROM t")
                throw Planned()
            }, otherwise: { -1 })
        }
        try fixture.insert(2)
        #expect(try fixture.count() == 2, "a transaction left open would pin the old snapshot (or refuse the next BEGIN)")
        #expect(throws: DatabaseError.self) {
            try fixture.readers.read({ db in try Int.fetchOne(db, sql: "SELECT count(*) FROM missing") }, otherwise: { -1 })
        }
        #expect(try fixture.count() == 2)
    }

    @Test("Once a connection cannot be opened, reads go to their fallback (the pool, which says why) without trying again")
    func cannotOpen() throws {
        let directory = TemporaryDirectory()
        let path = directory.file("later.sqlite")
        let readers = ReadConnections(path: path, configuration: Configuration(), limit: 2)
        #expect(try readers.read({ _ in 1 }, otherwise: { 2 }) == 2)
        // Not tried again on every read: the pool answers from then on, even once a file is there.
        _ = try DatabaseQueue(path: path)
        #expect(try readers.read({ _ in 1 }, otherwise: { 2 }) == 2)
    }

    @Test("An immediate transaction commits what its body wrote, and rolls all of it back when the body throws")
    func immediateTransaction() throws {
        let fixture = try Fixture()
        let value = try fixture.writer.writeWithoutTransaction { db in
            try db.inCachedTransaction(.immediate) {
                try db.execute(sql: "INSERT INTO t VALUES (1)")
                return "done"
            }
        }
        #expect(value == "done")
        #expect(try fixture.count() == 1)
        #expect(throws: Planned.self) {
            try fixture.writer.writeWithoutTransaction { db in
                try db.inCachedTransaction(.immediate) {
                    try db.execute(sql: "INSERT INTO t VALUES (2)")
                    throw Planned()
                }
            }
        }
        #expect(try fixture.count() == 1, "nothing of a transaction whose body threw is kept")
        // The writer is out of the transaction: the next one begins and commits.
        try fixture.writer.writeWithoutTransaction { db in
            #expect(!db.isInsideTransaction)
            try db.inCachedTransaction(.immediate) { try db.execute(sql: "INSERT INTO t VALUES (3)") }
        }
        #expect(try fixture.count() == 2)
    }

    @Test("More readers at once than connections, while another connection commits: every read completes, each sees a count that never goes back")
    func concurrentReads() throws {
        let fixture = try Fixture(rows: 1, limit: 2)
        let writes = 200
        let done = Atomic<Bool>(false)
        let failures = Mutex<[String]>([])
        let writer = Thread {
            for x in 0..<writes {
                do { try fixture.insert(x) } catch { failures.withLock { $0.append("insert \(x): \(error)") } }
            }
            done.store(true, ordering: .releasing)
        }
        writer.start()
        let fellBack = Atomic<Int>(0)
        // Threads of their own (concurrentPerform runs no more at once than there are processors).
        let finished = DispatchGroup()
        for reader in 0..<6 {
            finished.enter()
            Thread {
                defer { finished.leave() }
                var last = 0
                var reads = 0
                // (Each reader reads until the writer is done, and at least 50 times.)
                while reads < 50 || !done.load(ordering: .acquiring) {
                    // (The fallback stands for the pool's readers: the same query through the fixture's pool.)
                    let count: Int
                    do {
                        count = try fixture.readers.read({ db in
                            let count = try Int.fetchOne(db, sql: "SELECT count(*) FROM t") ?? -1
                            usleep(100)  // held a little, so that more reads overlap than there are connections
                            return count
                        }, otherwise: {
                            fellBack.add(1, ordering: .relaxed)
                            return try fixture.writer.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM t") ?? -1 }
                        })
                    } catch {
                        failures.withLock { $0.append("reader \(reader): \(error)") }
                        return
                    }
                    if count < last || count > writes + 1 { failures.withLock { $0.append("reader \(reader) saw \(count) after \(last)") } }
                    last = count
                    reads += 1
                }
            }.start()
        }
        finished.wait()
        #expect(failures.withLock { $0 }.isEmpty, "\(failures.withLock { $0 }.prefix(5))")
        #expect(try fixture.count() == writes + 1)
        #expect(fellBack.load(ordering: .relaxed) > 0, "six readers holding their reads 0.1 ms overlap more than two connections can take")
    }

    @Test("A replay's reads on the writer's connection see what another connection committed since the writer's last save")
    func replayReadsOnTheWriterSeeOtherCommits() throws {
        let directory = TemporaryDirectory()
        let path = directory.file("shared.sqlite")
        let model = try SampleModels.load("OrgChart")
        let replaying = try SQLiteStore(path: path, model: model)
        let other = try SQLiteStore(path: path, model: model)
        /// Saves one person through `store`; its URI.
        func save(_ name: String, through store: SQLiteStore) throws -> String {
            let context = try PersistentContainer(store: store).newContext()
            let person = try context.make("Person", ["name": name])
            try context.save()
            return person.objectID.uriString
        }
        let first = try save("First", through: replaying)  // (the writer's page cache now holds the history's pages)
        #expect(try replaying.replayStart().vector[replaying.identifier] == 1)
        let second = try save("Second", through: other)
        #expect(try replaying.replayStart().vector[replaying.identifier] == 2, "the writer's connection read a page its cache held from before")
        let uris = [first, second, "x-coredata://\(UUID().uuidString)/Person/p1"]
        let onWriter = try replaying.lookUpForReplay(originURIs: uris)
        #expect(onWriter == (try replaying.lookUp(originURIs: uris)))
        #expect(onWriter.own.count == 2 && onWriter.mapped.isEmpty && onWriter.buried.isEmpty)
    }

    @Test("A store closed after reads leaves no write-ahead log: its file alone holds everything")
    func closeLeavesOneFile() throws {
        let directory = TemporaryDirectory()
        let path = directory.file("store.sqlite")
        let model = try SampleModels.load("OrgChart")
        do {
            let container = try PersistentContainer(store: SQLiteStore(path: path, model: model))
            let context = container.newContext()
            try context.make("Person", ["name": "John"])
            try context.save()
            #expect(try container.newContext().count(for: FetchRequest(entityName: "Person")) == 1)
        }
        #expect(!FileManager.default.fileExists(atPath: path + "-wal"), "the last connection to close must be one that can checkpoint")
        let copy = directory.file("copy.sqlite")
        try FileManager.default.copyItem(atPath: path, toPath: copy)
        let reopened = try PersistentContainer(store: SQLiteStore(path: copy, model: model))
        #expect(try reopened.newContext().count(for: FetchRequest(entityName: "Person")) == 1)
    }
}
