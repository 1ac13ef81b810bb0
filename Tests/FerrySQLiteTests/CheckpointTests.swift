import Foundation
import Testing
import GRDB
import FerryModel
import FerryStore
@testable import FerrySQLite
import FerryTestSupport

/// The write-ahead log is copied back into the store file on a queue of its own
/// (`BackgroundCheckpointer`), not in the saving thread's commit, and stays
/// bounded if that queue falls behind.
@Suite("Checkpoints off the saving thread")
struct CheckpointTests {
    static let model = try! SampleModels.load("OrgChart")

    func fileSize(_ path: String) -> Int {
        ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int) ?? 0
    }

    /// A connection in WAL mode whose commits only the hook under test may checkpoint.
    func walQueue(_ path: String) throws -> DatabaseQueue {
        var configuration = Configuration()
        configuration.journalMode = .wal
        let queue = try DatabaseQueue(path: path, configuration: configuration)
        try queue.write { db in try db.execute(sql: "CREATE TABLE t (x BLOB)") }
        return queue
    }

    /// Writes about `megabytes` MB in one transaction.
    func write(megabytes: Int, to queue: DatabaseQueue) throws {
        try queue.write { db in
            for _ in 0..<(megabytes * 16) {
                try db.execute(sql: "INSERT INTO t VALUES (randomblob(65536))")
            }
        }
    }

    @Test("A large save's log is checkpointed by the queue, and the store file receives it")
    func storeCheckpointsInBackground() async throws {
        let directory = TemporaryDirectory()
        let path = directory.file("big.sqlite")
        let store = try SQLiteStore(path: path, model: Self.model)
        let checkpointer = try #require(store.checkpointer)
        let before = fileSize(path)
        let context = try PersistentContainer(store: store).newContext()
        let name = String(repeating: "n", count: 10_000)
        for id in 0..<400 { try context.make("Person", ["id": Int64(id), "name": "\(name)\(id)"]) }
        try context.save()   // ~4 MB of rows and ~4 MB of change set: past 1,000 log pages

        let deadline = Date().addingTimeInterval(20)
        while checkpointer.completedCheckpoints == 0, Date() < deadline { try await Task.sleep(for: .milliseconds(20)) }
        #expect(checkpointer.completedCheckpoints >= 1, "no background checkpoint ran")
        #expect(fileSize(path) > before + 4_000_000, "the checkpoint copied the log into the file (\(before) → \(fileSize(path)) bytes)")
        let count = try store.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM ZPERSON") }
        #expect(count == 400)
    }

    @Test("A tight loop of small commits keeps the log near the threshold, not growing with every checkpoint")
    func smallCommitsRestartTheLog() throws {
        let directory = TemporaryDirectory()
        let path = directory.file("wal.sqlite")
        let queue = try walQueue(path)
        try queue.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA synchronous = FULL") }  // as a store's
        let checkpointer = BackgroundCheckpointer(path: path, backgroundThreshold: 100, writerThreshold: 20_000)
        queue.inDatabase { db in checkpointer.install(on: db) }
        defer { queue.inDatabase { db in checkpointer.uninstall(from: db) } }
        // Commits of a page or two each, one right after another: a background checkpoint is
        // still running when the next commit begins, so the log never restarts by itself.
        var largest = 0
        for _ in 0..<3_000 {
            try queue.write { db in try db.execute(sql: "INSERT INTO t VALUES (randomblob(100))") }
            largest = max(largest, fileSize(path + "-wal"))
        }
        let pageSize = try queue.read { db in try Int.fetchOne(db, sql: "PRAGMA page_size") } ?? 4096
        let bound = 4 * 100 * (pageSize + 24)
        #expect(largest <= bound, "the log grew to \(largest) bytes (\(largest / (pageSize + 24)) frames; threshold 100)")
    }

    @Test("With the queue out of the way, the writer checkpoints itself past its threshold")
    func writerCheckpointsWhenFarBehind() throws {
        let directory = TemporaryDirectory()
        let path = directory.file("wal.sqlite")
        let queue = try walQueue(path)
        let checkpointer = BackgroundCheckpointer(path: path, backgroundThreshold: .max, writerThreshold: 100)
        queue.inDatabase { db in checkpointer.install(on: db) }
        let before = fileSize(path)
        try write(megabytes: 2, to: queue)
        // No waiting: the commit itself copied the log into the file.
        #expect(fileSize(path) > before + 1_900_000, "\(before) → \(fileSize(path)) bytes")
        #expect(checkpointer.completedCheckpoints == 0)
        queue.inDatabase { db in checkpointer.uninstall(from: db) }
    }

    @Test("The hook replaces SQLite's automatic checkpoint; removing it restores that")
    func hookReplacesAutomaticCheckpoint() throws {
        let directory = TemporaryDirectory()
        let path = directory.file("wal.sqlite")
        let queue = try walQueue(path)
        let checkpointer = BackgroundCheckpointer(path: path, backgroundThreshold: .max, writerThreshold: .max)
        queue.inDatabase { db in checkpointer.install(on: db) }
        let before = fileSize(path)
        try write(megabytes: 5, to: queue)   // 1,280 pages: SQLite alone would have checkpointed
        #expect(fileSize(path) < before + 1_000_000, "nothing checkpointed while the hook holds back: \(before) → \(fileSize(path))")

        queue.inDatabase { db in checkpointer.uninstall(from: db) }
        try write(megabytes: 1, to: queue)
        #expect(fileSize(path) > before + 5_000_000, "SQLite's automatic checkpoint is back: \(before) → \(fileSize(path))")
    }

    @Test("A checkpoint still queued when the hook is removed does nothing: a deleted store file is not made again")
    func queuedCheckpointAfterCloseDoesNothing() throws {
        let directory = TemporaryDirectory()
        let path = directory.file("gone.sqlite")
        let checkpointer = BackgroundCheckpointer(path: path, backgroundThreshold: 10, writerThreshold: .max)
        do {
            let queue = try walQueue(path)
            queue.inDatabase { db in checkpointer.install(on: db) }
            checkpointer.queue.suspend()             // the checkpoint asked for below waits
            try write(megabytes: 1, to: queue)       // 256 pages: past the threshold, a checkpoint is queued
            queue.inDatabase { db in checkpointer.uninstall(from: db) }
            try queue.close()
        }
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
        checkpointer.queue.resume()
        checkpointer.queue.sync {}                   // the queued checkpoint has run
        #expect(!FileManager.default.fileExists(atPath: path), "the queued checkpoint created the deleted file again")
        #expect(checkpointer.completedCheckpoints == 0)
    }

    @Test("A closed store lets go of its checkpointer")
    func checkpointerIsReleased() async throws {
        let directory = TemporaryDirectory()
        weak var released: BackgroundCheckpointer?
        do {
            let store = try SQLiteStore(path: directory.file("s.sqlite"), model: Self.model)
            released = store.checkpointer
            #expect(released != nil)
        }
        let deadline = Date().addingTimeInterval(5)
        while released != nil, Date() < deadline { try await Task.sleep(for: .milliseconds(10)) }
        #expect(released == nil, "the WAL hook still holds the checkpointer")
    }
}
