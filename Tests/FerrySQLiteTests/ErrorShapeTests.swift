import Foundation
import Testing
import GRDB
import FerryModel
import FerryStore
import FerrySQLite
import FerryTestSupport

/// Every error has one shape (``FerryError``): a code, a message, the cause it met, whether a retry
/// can help. These check that causes survive being put into a message, from the database up.
@Suite("Errors keep one shape and their causes")
struct ErrorShapeTests {
    /// The shape as a program handling any Ferry error sees it.
    func shape(_ error: any Error) -> (code: String, cause: (any Error)?, retryable: Bool)? {
        guard let error = error as? any FerryError else { return nil }
        return (error.codeName, error.cause, error.isRetryable)
    }

    @Test("A file that is not a database: 'cannotOpen', with SQLite's own error as the cause")
    func notADatabase() throws {
        let directory = TemporaryDirectory()
        let path = directory.file("notes.sqlite")
        try Data(repeating: 0x41, count: 8_192).write(to: URL(fileURLWithPath: path))
        let error = #expect(throws: StoreError.self) { try SQLiteStore(path: path, model: SampleModels.load("OrgChart")) }
        let seen = try #require(error.flatMap(shape))
        #expect(seen.code == "cannotOpen" && !seen.retryable)
        let cause = try #require(seen.cause as? DatabaseError, "\(String(describing: seen.cause))")
        #expect(cause.resultCode == .SQLITE_NOTADB)
    }

    @Test("A store locked by another writer: the open is 'unavailable' and retryable, with SQLite's busy error as the cause")
    func lockedStore() throws {
        let directory = TemporaryDirectory()
        let path = directory.file("store.sqlite")
        let model = try SampleModels.load("OrgChart")
        _ = try SQLiteStore(path: path, model: model)
        let holder = try DatabaseQueue(path: path)
        try holder.writeWithoutTransaction { db in
            try db.execute(sql: "BEGIN EXCLUSIVE")
            defer { try? db.execute(sql: "ROLLBACK") }
            let error = #expect(throws: StoreError.self) { try SQLiteStore(path: path, model: model, options: .init(busyTimeout: 0.1)) }
            let seen = try #require(error.flatMap(shape))
            #expect(seen.code == "unavailable" && seen.retryable)
            let cause = try #require(seen.cause as? DatabaseError, "\(String(describing: seen.cause))")
            #expect([.SQLITE_BUSY, .SQLITE_LOCKED].contains(cause.resultCode), "\(cause)")
        }
    }

    @Test("A save the lock refuses: 'storeFailed', retryable, its failure keeping the database's error")
    func busySave() throws {
        let directory = TemporaryDirectory()
        let path = directory.file("store.sqlite")
        let model = try SampleModels.load("OrgChart")
        let store = try SQLiteStore(path: path, model: model, options: .init(busyTimeout: 0.1))
        let context = try PersistentContainer(store: store).newContext()
        let holder = try DatabaseQueue(path: path)
        try holder.writeWithoutTransaction { db in
            try db.execute(sql: "BEGIN IMMEDIATE")
            defer { try? db.execute(sql: "ROLLBACK") }
            let person = try context.insert(entityName: "Person")
            try person.setValue("Ann", forKey: "name")
            try person.setValue(Int64(1), forKey: "id")
            let error = #expect(throws: SaveError.self) { try context.save() }
            let seen = try #require(error.flatMap(shape))
            #expect(seen.code == "storeFailed" && seen.retryable, "\(String(describing: error))")
            let failure = try #require(seen.cause as? StoreFailure)
            #expect(failure.isRetryable && failure.codeName == "storeFailure")
            let cause = try #require(failure.cause as? DatabaseError, "\(failure)")
            #expect(cause.resultCode == .SQLITE_BUSY, "\(cause)")
        }
    }

    @Test("A predicate's key-path problem keeps the query error it met")
    func predicateCause() throws {
        let error = #expect(throws: PredicateFormatError.self) {
            try FetchPredicate(format: "name.@count > 1", entity: "Person", model: SampleModels.load("OrgChart"))
        }
        let seen = try #require(error.flatMap(shape))
        #expect(seen.code == "typeMismatch")
        #expect(seen.cause is QueryError, "\(String(describing: seen.cause))")
    }

    @Test("A line that is not JSON: 'malformed', keeping the parser's error")
    func changeSetCause() throws {
        let error = #expect(throws: ChangeSetError.self) { try ChangeSetEnvelope(line: #"{"format":1,"#) }
        let seen = try #require(error.flatMap(shape))
        #expect(seen.code == "malformed" && !seen.retryable)
        #expect(seen.cause is InterchangeError, "\(String(describing: seen.cause))")
    }
}
