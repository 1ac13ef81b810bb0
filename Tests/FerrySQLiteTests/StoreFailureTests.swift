import Foundation
import GRDB
import Testing
import FerryTestTraits
import FerryModel
import FerryStore
import FerrySQLite
import FerryTestSupport

/// A failed query or write keeps SQLite's error as its cause and says whether trying
/// again may help, instead of flattening it into a string.
@Suite("Store failures keep their cause", .blocking)
struct StoreFailureTests {
    @Test("A URI of another store that the identity map cannot be read for fails as a store failure, not as a URI of another store")
    func unreadableMapIsAStoreFailure() throws {
        let directory = TemporaryDirectory()
        let path = directory.file("map.sqlite")
        let store = try SQLiteStore(path: path, model: try SampleModels.load("OrgChart"), options: .init(busyTimeout: 0.05))
        let container = try PersistentContainer(store: store)
        let foreign = "x-coredata://6F1C2A3B-0000-4000-8000-00000000000A/Person/p1"
        #expect(throws: ContextError.invalidURI(.foreignStore(foreign, expected: store.identifier)), "nothing of that store reached this one") {
            try container.managedObjectID(forURIString: foreign)
        }
        // The map's tables go (a damaged file, as far as this store can tell): its look-up fails.
        try DatabaseQueue(path: path).write { db in
            try db.execute(sql: "DROP TABLE Z_FERRY_OBJECT; DROP TABLE Z_FERRY_RANGE")
        }
        do {
            _ = try container.managedObjectID(forURIString: foreign)
            Issue.record("the look-up read a map that is not there")
        } catch .storeFailed(let failure) {
            #expect(failure.message.contains(foreign) && failure.message.contains("no such table"), "\(failure)")
            #expect(failure.cause != nil, "the read's error was not kept")
        } catch {
            Issue.record("a failed read reported as \(error)")
        }
    }

    @Test("A save that meets another writer's lock past the busy timeout fails as retryable, with SQLite's BUSY as its cause")
    func busyIsRetryable() throws {
        let directory = TemporaryDirectory()
        let path = directory.file("busy.sqlite")
        let store = try SQLiteStore(path: path, model: try SampleModels.load("OrgChart"), options: .init(busyTimeout: 0.05))
        let context = try PersistentContainer(store: store).newContext()
        try context.make("Person", ["name": "John"])
        // Another connection holds the write lock on a thread of its own until the save has failed.
        let other = try DatabaseQueue(path: path)
        let locked = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let holder = Thread {
            try? other.inTransaction(.immediate) { _ in
                locked.signal()
                release.wait()
                return .rollback
            }
        }
        holder.start()
        locked.wait()
        defer { release.signal() }
        do {
            try context.save()
            Issue.record("the save went through another writer's lock")
        } catch .storeFailed(let failure) {
            #expect(failure.isRetryable, "\(failure)")
            let cause = try #require(failure.cause as? DatabaseError, "the cause was not kept: \(String(describing: failure.cause))")
            #expect(cause.resultCode == .SQLITE_BUSY)
        } catch {
            Issue.record("expected a store failure, got \(error)")
        }
    }

    @Test("A read of a damaged store fails as not retryable, with SQLite's error as its cause")
    func damageIsNotRetryable() throws {
        let directory = TemporaryDirectory()
        let path = directory.file("damaged.sqlite")
        let store = try SQLiteStore(path: path, model: try SampleModels.load("OrgChart"))
        try DatabaseQueue(path: path).write { db in try db.execute(sql: "DROP TABLE Z_FERRY_PENDING") }
        do {
            _ = try store.heldChangeSets()
            Issue.record("a read of a dropped table succeeded")
        } catch StoreError.storeFailure(let failure) {
            #expect(!failure.isRetryable, "\(failure)")
            #expect((failure.cause as? DatabaseError)?.resultCode == .SQLITE_ERROR, "\(String(describing: failure.cause))")
            #expect(failure.message.contains("Z_FERRY_PENDING"))
        }
    }
}
