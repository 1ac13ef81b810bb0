import Foundation
import Synchronization
import Testing
import FerryTestTraits
import FerryModel
import FerryStore
import FerrySQLite
import FerrySync
import FerryTestSupport

/// Contexts that see what others wrote: their own events, the container's events for other
/// contexts, other processes and replays, merging them, refreshing objects (issue 25, points 1–2).
@Suite("Live contexts: change events and merging", .blocking)
struct LiveContextTests {
    /// Collects a stream's events from a task on a thread of its own (``BlockingTrait/task(_:)``): on
    /// Swift's pool it waited behind the suite's computing tests, and two tests missed their events.
    final class Collector: Sendable {
        private final class Received: Sendable { let events = Mutex<[ObjectChangeEvent]>([]) }
        private let received = Received()
        private let task: Task<Void, Never>

        init(_ stream: AsyncStream<ObjectChangeEvent>) {
            let received = self.received
            task = BlockingTrait.task { for await event in stream { received.events.withLock { $0.append(event) } } }
        }

        deinit { task.cancel() }

        var events: [ObjectChangeEvent] { received.events.withLock { $0 } }

        /// Waits for an event that `matches` and returns it; nil after 5,000 looks 2 ms apart (at
        /// least ten seconds — counted in looks, not by the clock, so that a test held up while
        /// other suites keep the machine busy still gets its ten seconds).
        func first(where matches: (ObjectChangeEvent) -> Bool) async -> ObjectChangeEvent? {
            for _ in 0..<5_000 {
                if let event = events.first(where: matches) { return event }
                try? await Task.sleep(for: .milliseconds(2))
            }
            return events.first(where: matches)
        }
    }

    static let model: ManagedObjectModel = {
        do { return try SampleModels.load("OrgChart") } catch { fatalError("\(error)") }
    }()

    /// One store file opened by two containers, as an application and a daemon (or two processes) would.
    static func sharedFile() throws -> (TemporaryDirectory, PersistentContainer, PersistentContainer) {
        let directory = TemporaryDirectory()
        let path = directory.file("live.sqlite")
        let app = try PersistentContainer(store: SQLiteStore(path: path, model: model))
        let other = try PersistentContainer(store: SQLiteStore(path: path, model: model))
        return (directory, app, other)
    }

    @Test("A context publishes objects-did-change at processPendingChanges and did-save with permanent IDs")
    func contextEvents() async throws {
        let (directory, container, _) = try Self.sharedFile()
        defer { withExtendedLifetime(directory) {} }
        let context = container.newContext()
        context.name = "editor"
        let saved = try context.make("Person", ["name": "Ann"])
        try context.save()
        let collector = Collector(context.changes())
        let added = try context.make("Person", ["name": "Bob"])
        try saved.setValue("Anne", forKey: "name")
        try context.processPendingChanges()
        let didChange = try #require(await collector.first { $0.kind == .objectsDidChange })
        #expect(didChange.inserted == [added.objectID])
        #expect(didChange.updated == [saved.objectID: ["name"]])
        #expect(didChange.isFrom(context))
        context.delete(saved)
        try context.save()
        let didSave = try #require(await collector.first { $0.kind == .didSave })
        #expect(didSave.inserted == [added.objectID] && !added.objectID.isTemporaryID)
        #expect(didSave.deleted == [saved.objectID])
        #expect(didSave.source == .context(context.identity))
        #expect(didSave.changeSet?.origin == container.store.identifier)
        // The delete was told by an objects-did-change before the save.
        #expect(collector.events.contains { $0.kind == .objectsDidChange && $0.deleted == [saved.objectID] })
    }

    @Test("The container tells another context's save as did-save, with the saving context")
    func otherContextSave() async throws {
        let (directory, container, other) = try Self.sharedFile()
        defer { withExtendedLifetime(directory) {} }
        let collector = Collector(container.changes())
        let writer = container.newContext()
        writer.name = "importer"
        let person = try writer.make("Person", ["name": "Cy"])
        try writer.save()
        let event = try #require(await collector.first { $0.kind == .didSave })
        #expect(event.inserted == [person.objectID])
        guard case .context(let identity) = event.source else { Issue.record("source \(event.source)"); return }
        #expect(identity == writer.identity && identity.name == "importer")
        // Its own save is not told again as a remote change when the feed reads the history. The feed
        // reads commits in order: once another writer's later save is told, the feed has read past ours.
        let elsewhere = other.newContext()
        let marker = try elsewhere.make("Person", ["name": "Marker"])
        try elsewhere.save()
        let remote = try #require(await collector.first { $0.kind == .storeChangedRemotely })
        #expect(remote.inserted == [marker.objectID], "\(remote)")
        #expect(collector.events.filter { $0.kind == .storeChangedRemotely }.count == 1, "\(collector.events)")
    }

    @Test("Another connection's save and another process's save arrive as store-changed-remotely, by local ID")
    func otherWriters() async throws {
        let (directory, container, other) = try Self.sharedFile()
        defer { withExtendedLifetime(directory) {} }
        let seed = container.newContext()
        let kept = try seed.make("Person", ["name": "Dee"])
        try seed.save()
        let collector = Collector(container.changes())
        let writer = other.newContext()
        writer.transactionAuthor = "batch"
        let theirs = try writer.existingObject(with: kept.objectID)
        try theirs.setValue("Deirdre", forKey: "name")
        let boss = try writer.make("Person", ["name": "Eve"])
        try theirs.setValue(boss, forKey: "manager")
        try writer.save()
        let event = try #require(await collector.first { $0.kind == .storeChangedRemotely })
        #expect(event.source == .otherProcess(author: "batch", contextName: nil))
        #expect(event.inserted == [boss.objectID])
        #expect(event.updated[kept.objectID] == ["name", "manager"])
        // The process: `ferry put` on the same file.
        let result = try FerryProcess.run(["put", "--store", directory.file("live.sqlite"), "--model", SampleModels.path("OrgChart"), "-"],
                                          input: #"[{"op":"insert","entity":"Person","ref":"p","values":{"name":"Fay"}}]"#)
        #expect(result.status == 0, "\(result.standardError)")
        let put = try #require(await collector.first { $0.kind == .storeChangedRemotely && $0.changeSet?.sequence == 3 })
        let inserted = try #require(put.inserted.first)
        let reader = container.newContext()
        #expect(try reader.existingObject(with: inserted).string("name") == "Fay")
    }

    @Test("A replayed change set is told with its origin, and deletes of objects born elsewhere still reach contexts")
    func replays() async throws {
        let (directory, container, _) = try Self.sharedFile()
        defer { withExtendedLifetime(directory) {} }
        let remote = try PersistentContainer(store: SQLiteStore(path: directory.file("remote.sqlite"), model: Self.model))
        let remoteStore = try #require(remote.store as? SQLiteStore)
        let remoteContext = remote.newContext()
        let gil = try remoteContext.make("Person", ["name": "Gil"])
        try remoteContext.save()
        let collector = Collector(container.changes())
        let engine = try ReplayEngine(container: container)
        _ = try engine.apply(lines: remoteStore.changeSetLines())
        let insert = try #require(await collector.first { $0.kind == .storeChangedRemotely })
        #expect(insert.source == .replay(origin: remoteStore.identifier))
        let local = try #require(insert.inserted.first)
        let reader = container.newContext()
        let held = try reader.existingObject(with: local)
        #expect(try held.string("name") == "Gil")

        remoteContext.delete(gil)
        try remoteContext.save()
        _ = try engine.apply(lines: remoteStore.changeSetLines(after: [remoteStore.identifier: 1]))
        let delete = try #require(await collector.first { $0.kind == .storeChangedRemotely && $0.changeSet?.sequence == 2 })
        #expect(delete.deleted.contains(local) || delete.deletedWithoutID == ["Person"], "\(delete)")
        reader.mergeChanges(from: delete)
        #expect(held.managedObjectContext == nil && held.isDeleted, "the merged delete left the object registered")
    }

    @Test("Merging another writer's save refreshes unchanged objects and keeps unsaved changes on top")
    func mergeKeepsLocalChanges() async throws {
        let (directory, container, other) = try Self.sharedFile()
        defer { withExtendedLifetime(directory) {} }
        let setup = container.newContext()
        let one = try setup.make("Person", ["name": "Hal", "id": Int64(1)])
        let two = try setup.make("Person", ["name": "Ida", "id": Int64(2)])
        try setup.save()
        let collector = Collector(container.changes())
        let app = container.newContext()
        let first = try app.existingObject(with: one.objectID)
        let second = try app.existingObject(with: two.objectID)
        try second.setValue(Int64(20), forKey: "id")  // an unsaved change of the app's

        let writer = other.newContext()
        try writer.existingObject(with: one.objectID).setValue("Harold", forKey: "name")
        try writer.existingObject(with: two.objectID).setValue("Ida May", forKey: "name")
        try writer.save()
        let event = try #require(await collector.first { $0.kind == .storeChangedRemotely })
        #expect(try first.string("name") == "Hal", "a context serves what it loaded until it merges")
        app.mergeChanges(from: event)
        #expect(first.isFault, "an unchanged object is turned into a fault")
        #expect(try first.string("name") == "Harold")
        #expect(try second.string("name") == "Ida May")
        #expect(try second.value(forKey: "id") as? Int64 == 20)
        #expect(second.changedKeys == ["id"])
        // The merged object saves without a conflict, and the other writer's name stays.
        try app.save()
        let check = other.newContext()
        #expect(try check.existingObject(with: two.objectID).string("name") == "Ida May")
    }

    @Test("Without merging, a save over another writer's change is a conflict — the merge is what avoids it")
    func unmergedConflicts() async throws {
        let (directory, container, other) = try Self.sharedFile()
        defer { withExtendedLifetime(directory) {} }
        let setup = container.newContext()
        let one = try setup.make("Person", ["name": "Jo"])
        try setup.save()
        let app = container.newContext()
        let mine = try app.existingObject(with: one.objectID)
        let writer = other.newContext()
        try writer.existingObject(with: one.objectID).setValue("Joan", forKey: "name")
        try writer.save()
        try mine.setValue(Int64(5), forKey: "id")
        #expect(throws: SaveError.self) { try app.save() }
    }

    @Test("A context that merges automatically sees other writers' changes at its next fetch")
    func automaticMerge() async throws {
        let (directory, container, other) = try Self.sharedFile()
        defer { withExtendedLifetime(directory) {} }
        let setup = container.newContext()
        let one = try setup.make("Person", ["name": "Kit"])
        try setup.save()
        let app = container.newContext()
        app.automaticallyMergesChangesFromStore = true
        let mine = try app.existingObject(with: one.objectID)
        let collector = Collector(container.changes())
        let writer = other.newContext()
        try writer.existingObject(with: one.objectID).setValue("Kitty", forKey: "name")
        let gone = try writer.make("Person", ["name": "Lee"])
        try writer.save()
        _ = try #require(await collector.first { $0.kind == .storeChangedRemotely })
        #expect(try app.count(for: FetchRequest(entityName: "Person")) == 2)
        #expect(try mine.string("name") == "Kitty")
        // Deleted elsewhere: unregistered here at the next fetch.
        let theirs = try app.existingObject(with: gone.objectID)
        writer.delete(try writer.existingObject(with: gone.objectID))
        try writer.save()
        _ = try #require(await collector.first { $0.kind == .storeChangedRemotely && !$0.deleted.isEmpty })
        _ = try app.fetch(FetchRequest(entityName: "Person"))
        #expect(theirs.managedObjectContext == nil)
        // A context that does not merge keeps what it loaded.
        let still = container.newContext()
        let loaded = try still.existingObject(with: one.objectID)
        try writer.existingObject(with: one.objectID).setValue("Kat", forKey: "name")
        try writer.save()
        _ = try #require(await collector.first { $0.kind == .storeChangedRemotely && $0.updated[one.objectID] != nil && $0.changeSet?.sequence == 4 })
        _ = try still.fetch(FetchRequest(entityName: "Person"))
        #expect(try loaded.string("name") == "Kitty")
    }


    @Test("refresh(_:mergeChanges: false) discards changes and turns the object back into a fault; refreshAllObjects refaults what is unchanged")
    func refreshing() throws {
        let directory = TemporaryDirectory()
        let container = try PersistentContainer(store: SQLiteStore(path: directory.file("r.sqlite"), model: Self.model),
                                                classes: ["Person": FaultWatchedPerson.self])
        let context = container.newContext()
        let person = try context.make("Person", ["name": "Max"])
        let other = try context.make("Person", ["name": "Ned"])
        try context.save()
        let collector = Collector(context.changes())
        try person.setValue("Maxine", forKey: "name")
        #expect(context.hasChanges)
        FaultWatchedPerson.faulted = 0
        context.refresh(person, mergeChanges: false)
        #expect(person.isFault && !context.hasChanges && FaultWatchedPerson.faulted == 1)
        #expect(try person.string("name") == "Max")
        try other.setValue("Ned 2", forKey: "name")
        context.refreshAllObjects()
        #expect(person.isFault, "an unchanged object is refaulted")
        #expect(try other.string("name") == "Ned 2" && other.isUpdated, "a changed one keeps its changes")
        #expect(collector.events.isEmpty || collector.events.allSatisfy { $0.kind == .objectsDidChange })
    }
}

/// Counts ``ManagedObject/didTurnIntoFault()`` calls (one test uses it at a time).
final class FaultWatchedPerson: ManagedObject {
    nonisolated(unsafe) static var faulted = 0
    override func didTurnIntoFault() { Self.faulted += 1 }
}
