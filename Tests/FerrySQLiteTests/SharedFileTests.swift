import Foundation
import Testing
import FerryModel
import FerryStore
import FerrySQLite
import FerryTestSupport

/// Two stores opened on one file behave like two processes (an application and the daemon).
@Suite("Several writers on one store file")
struct SharedFileTests {
    func open(_ path: String) throws -> PersistentContainer {
        try PersistentContainer(store: SQLiteStore(path: path, model: try SampleModels.load("OrgChart")))
    }

    @Test("A save through one connection is visible through another")
    func visibility() throws {
        let directory = TemporaryDirectory()
        let path = directory.file("shared.sqlite")
        let app = try open(path)
        let daemon = try open(path)
        #expect(app.store.identifier == daemon.store.identifier)
        let writer = app.newContext()
        try writer.make("Person", ["name": "John"])
        try writer.save()
        let reader = daemon.newContext()
        #expect(try reader.count(for: FetchRequest(entityName: "Person")) == 1)
        try reader.make("Person", ["name": "Jane"])
        try reader.save()
        let keys = try app.newContext().all("Person", sortedBy: "name").compactMap(\.objectID.primaryKey)
        #expect(keys == [2, 1], "primary keys are handed out by the file, not per connection")
    }

    @Test("Optimistic locking: a stale update or delete is a conflict and writes nothing", arguments: TestStoreKind.allCases)
    func conflict(kind: TestStoreKind) throws {
        let test = try TestContainer(model: try SampleModels.load("OrgChart"), kind: kind)
        let first = test.context()
        let person = try first.make("Person", ["name": "John"])
        try first.save()
        let second = test.context()
        let copy = try second.existingObject(with: person.objectID)
        try copy.setValue("Johnny", forKey: "name")
        try second.save()
        try person.setValue("Jon", forKey: "name")
        let error = try #require(throws: SaveError.self) { try first.save() }
        guard case .mergeConflict(let conflicts) = error else { Issue.record("expected a conflict, got \(error)"); return }
        #expect(conflicts.map(\.objectID) == [person.objectID])
        #expect(conflicts.first?.objectSnapshot["name"] == .attribute(.string("Jon")))
        #expect(conflicts.first?.cachedSnapshot["name"] == .attribute(.string("John")))
        #expect(conflicts.first?.persistedSnapshot?["name"] == .attribute(.string("Johnny")))
        #expect(conflicts.first?.changedInStore == ["name"])
        #expect(conflicts.first?.oldVersion == 1 && conflicts.first?.newVersion == 2)
        #expect(error.code == 133020)
        let reader = test.context()
        #expect(try reader.existingObject(with: person.objectID).string("name") == "Johnny")
        first.rollback()
        first.reset()
        let fresh = try first.existingObject(with: person.objectID)
        try fresh.setValue("Jon", forKey: "name")
        try first.save()
        first.delete(fresh)
        let third = test.context()
        try third.existingObject(with: person.objectID).setValue("Late", forKey: "name")
        try third.save()
        #expect(throws: SaveError.self) { try first.save() }
    }

    @Test("Concurrent writers through separate connections lose nothing")
    func concurrentWriters() async throws {
        let directory = TemporaryDirectory()
        let path = directory.file("shared.sqlite")
        let containers = try (0..<3).map { _ in try open(path) }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (index, container) in containers.enumerated() {
                group.addTask {
                    let context = container.newContext()
                    for batch in 0..<10 {
                        for item in 0..<10 { try context.make("Person", ["id": Int64(index * 1000 + batch * 10 + item)]) }
                        try context.save()
                    }
                }
            }
            try await group.waitForAll()
        }
        let context = containers[0].newContext()
        #expect(try context.count(for: FetchRequest(entityName: "Person")) == 300)
        #expect(Set(try context.fetchObjectIDs(FetchRequest(entityName: "Person"))).count == 300)
    }
}
