import Foundation
import Testing
import GRDB
import FerryModel
import FerryStore
@testable import FerrySQLite
import FerryTestSupport

/// A save is on disk when it returns: the connection that writes syncs every
/// commit (`synchronous=FULL`), not only at checkpoints (GRDB's `NORMAL`), so a
/// change set acknowledged to a peer survives a power cut.
@Suite("Commits are durable")
struct DurabilityTests {
    static let model = try! SampleModels.load("OrgChart")

    /// `PRAGMA synchronous` as the store's writing connection has it (0 OFF, 1 NORMAL, 2 FULL).
    func writerSynchronous(_ store: SQLiteStore) throws -> Int? {
        try store.pool.writeWithoutTransaction { db in try Int.fetchOne(db, sql: "PRAGMA synchronous") }
    }

    @Test("A new store and a reopened one sync every commit, before and after a save")
    func writerSyncsEveryCommit() throws {
        let directory = TemporaryDirectory()
        let path = directory.file("durable.sqlite")
        let store = try SQLiteStore(path: path, model: Self.model)
        #expect(try writerSynchronous(store) == 2)
        let context = try PersistentContainer(store: store).newContext()
        try context.make("Person", ["id": Int64(1), "name": "Ada"])
        try context.save()
        #expect(try writerSynchronous(store) == 2, "a save must not change the connection's setting")

        let reopened = try SQLiteStore(path: path, model: Self.model)
        #expect(try writerSynchronous(reopened) == 2)
    }

    @Test("A read-only store, which gets no writer set-up, still opens and reads")
    func readOnlyStoreOpens() throws {
        let directory = TemporaryDirectory()
        let path = directory.file("readonly.sqlite")
        do {
            let store = try SQLiteStore(path: path, model: Self.model)
            let context = try PersistentContainer(store: store).newContext()
            try context.make("Person", ["id": Int64(1), "name": "Ada"])
            try context.save()
        }
        let readOnly = try SQLiteStore(path: path, model: Self.model, options: .init(readOnly: true))
        let people = try readOnly.fetchObjectIDs(FerryStore.FetchRequest(entityName: "Person"))
        #expect(people.count == 1)
    }
}
