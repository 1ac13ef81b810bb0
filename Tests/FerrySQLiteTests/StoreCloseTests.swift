import Foundation
import Testing
import FerryModel
import FerryStore
@testable import FerrySQLite
import FerryTestSupport

/// A store that closes leaves one file: its writer is the last connection to close and the only
/// one open then, so SQLite copies the write-ahead log into the file and removes it. A copy of the
/// file alone, or a view that cannot read the log (an immutable one on a read-only file system,
/// docs/RELIABILITY.md §8), then holds every commit. The store's other connections (read
/// connections, the commit watcher's, the background checkpointer's) close first, and are waited for.
@Suite("A closed store leaves one file")
struct StoreCloseTests {
    static let model = try! SampleModels.load("OrgChart")

    /// One save of `count` people with long names: about `count` × 20 KB of rows and change set.
    func saveLongNames(_ ids: Range<Int>, in store: SQLiteStore) throws {
        let context = try PersistentContainer(store: store).newContext()
        let name = String(repeating: "n", count: 10_000)
        for id in ids { try context.make("Person", ["id": Int64(id), "name": "\(name)\(id)"]) }
        try context.save()
    }

    /// Expects no log beside `path`, and a copy of the file alone to hold `people` people.
    func expectOneFile(_ path: String, holding people: Int, in directory: TemporaryDirectory,
                       sourceLocation: SourceLocation = #_sourceLocation) throws {
        #expect(!FileManager.default.fileExists(atPath: path + "-wal"), "the log was left beside the file",
                sourceLocation: sourceLocation)
        let copy = directory.file("copy-\(UUID().uuidString).sqlite")
        try FileManager.default.copyItem(atPath: path, toPath: copy)
        let reopened = try SQLiteStore(path: copy, model: Self.model, options: .init(createIfMissing: false))
        let count = try reopened.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM ZPERSON") }
        #expect(count == people, "the file alone holds \(count ?? -1) of \(people) people", sourceLocation: sourceLocation)
    }

    @Test("After a background checkpoint (its connection still open), the closed store leaves no log")
    func closesAfterBackgroundCheckpoint() async throws {
        let directory = TemporaryDirectory()
        let path = directory.file("checkpointed.sqlite")
        // Held past the store's end, as a process that ends right after closing its store holds
        // it: nothing closes the checkpointer's connection later, so the store must close it first.
        let checkpointer: BackgroundCheckpointer
        do {
            let store = try SQLiteStore(path: path, model: Self.model)
            checkpointer = try #require(store.checkpointer)
            try saveLongNames(0..<400, in: store)   // past 1,000 log pages: the queue checkpoints
            let deadline = Date().addingTimeInterval(20)
            while checkpointer.completedCheckpoints == 0, Date() < deadline { try await Task.sleep(for: .milliseconds(20)) }
            #expect(checkpointer.completedCheckpoints >= 1, "no background checkpoint ran")
            try saveLongNames(400..<401, in: store)  // a commit only the log holds
        }
        try expectOneFile(path, holding: 401, in: directory)
        #expect(checkpointer.completedCheckpoints >= 1)
    }

    @Test("close() while the store is still held: one file, even with the pool's own readers open; then reads fail and a second close does nothing")
    func explicitClose() async throws {
        let directory = TemporaryDirectory()
        let path = directory.file("closed.sqlite")
        let store = try SQLiteStore(path: path, model: Self.model)
        let stream = store.commits()
        try saveLongNames(0..<3, in: store)
        // A read on one of the pool's readers (they serve reads when the store's own connections are busy).
        func pooledCount() throws -> Int? { try store.pool.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM ZPERSON") } }
        #expect(try pooledCount() == 3)
        try store.close()
        try expectOneFile(path, holding: 3, in: directory)
        #expect(throws: StoreError.self) { try store.changeSetLines() }
        try store.close()
        // The commit watcher's streams end with it (after the one signal a stream may hold).
        var iterator = stream.makeAsyncIterator()
        var signals = 0
        while await iterator.next() != nil, signals < 3 { signals += 1 }
        #expect(signals <= 1, "the stream did not end")
        for await _ in store.commits() { Issue.record("a closed store's commits() signalled") }  // (ends at once)
    }

    @Test("A store whose commits are watched closes with no log left: the watcher's connection closes first")
    func closesWithCommitWatcher() throws {
        let directory = TemporaryDirectory()
        let path = directory.file("watched.sqlite")
        do {
            let store = try SQLiteStore(path: path, model: Self.model)
            _ = store.commits()
            #expect(store.commitWatcher != nil, "no commit watcher was made")
            try saveLongNames(0..<3, in: store)
        }
        try expectOneFile(path, holding: 3, in: directory)
    }
}

/// The same for a one-shot command, whose process ends right after it closes its store.
@Suite("A one-shot command leaves one file", .blocking)
struct OneShotCloseTests {
    @Test("`ferry put` on a store whose log another process left (past the checkpoint threshold) leaves one file")
    func putAfterLeftLog() throws {
        let directory = TemporaryDirectory()
        let path = directory.file("crashed.sqlite")
        let left = directory.file("left.sqlite")
        do {
            let store = try SQLiteStore(path: path, model: StoreCloseTests.model)
            let checkpointer = try #require(store.checkpointer)
            checkpointer.queue.suspend()   // the log keeps its 1,000+ pages
            try StoreCloseTests().saveLongNames(0..<400, in: store)
            // What a process that ended without closing its store leaves: the file and its log.
            for suffix in ["", "-wal", ".key"] where FileManager.default.fileExists(atPath: path + suffix) {
                try FileManager.default.copyItem(atPath: path + suffix, toPath: left + suffix)
            }
            checkpointer.queue.resume()
        }
        let put = try FerryProcess.run(["put", "--store", left, "--model", SampleModels.path("OrgChart"), "-"],
                                       input: #"[{"op":"insert","entity":"Person","ref":"late","values":{"id":9999,"name":"late"}}]"#)
        #expect(put.status == 0, "put failed: \(put.standardError)")
        try StoreCloseTests().expectOneFile(left, holding: 401, in: directory)
    }
}
