import Foundation
import Synchronization
import GRDB
import Testing
import FerryTestTraits
import FerryModel
import FerryStore
import FerrySQLite
import FerrySync
import FerryTestSupport

@Suite("Snapshots: a new store from a copy of another", .blocking)
struct SnapshotTests {
    static let model = try! SampleModels.load("OrgChart")

    @Test("A store started from a snapshot holds what its source held, under the same URIs and vector, with its own UUID; every store keeps replicating")
    func startsFromSnapshot() throws {
        let a = try Replica(model: Self.model)
        let b = try Replica(model: Self.model)
        let ann = try a.context.make("Person", ["id": Int64(1), "name": "Ann"])
        let gone = try a.context.make("Person", ["id": Int64(2), "name": "Gone"])
        try a.context.save()
        try b.pull(from: a)
        let bob = try b.context.make("Person", ["id": Int64(3), "name": "Bob", "manager": try #require(try b.object(ann.objectID.uriString))])
        try b.context.save()
        try a.pull(from: b)
        a.context.delete(gone)
        try a.context.save()

        let c = try Replica(model: Self.model, snapshotOf: a)
        #expect(c.store.identifier != a.store.identifier)
        #expect(try c.dump() == a.dump(), "every object under its origin URI, with its values and references")
        #expect(try c.store.historyState().vector == a.store.historyState().vector)
        #expect(try c.store.changeSetLines() == a.store.changeSetLines(), "A's history is C's to serve")
        #expect(try c.store.isBuried(gone.objectID.uriString), "the tombstone came too")
        #expect(try c.pull(from: a).applied == 0 && c.pull(from: b).applied == 0, "nothing to take in")

        // C edits A's object and B's, and inserts its own; A and B edit too: all converge.
        try #require(try c.object(ann.objectID.uriString)).setValue("Ann from C", forKey: "name")
        try #require(try c.object(bob.objectID.uriString)).setValue("Bob from C", forKey: "name")
        let cid = try c.context.make("Person", ["id": Int64(4), "name": "Cid", "manager": try #require(try c.object(bob.objectID.uriString))])
        try c.context.save()
        #expect(cid.objectID.uriString.contains(c.store.identifier.uuidString), "C's own objects carry C's UUID")
        try b.context.make("Person", ["id": Int64(5), "name": "Dee"])
        try b.context.save()
        try a.context.make("Person", ["id": Int64(6), "name": "Eve"])
        try a.context.save()
        _ = try Replica.exchangeUntilSettled([a, b, c])
        #expect(try a.dump() == c.dump() && b.dump() == c.dump())
        #expect(try c.dump().count == 5)
        a.context.reset()
        #expect(try a.object(ann.objectID.uriString)?.string("name") == "Ann from C")
    }

    @Test("A change set made before the snapshot's delete, arriving later, does not bring the object back in the new store")
    func tombstonesTravel() throws {
        let a = try Replica(model: Self.model)
        let b = try Replica(model: Self.model)
        let gone = try a.context.make("Person", ["id": Int64(1), "name": "Gone"])
        try a.context.save()
        try b.pull(from: a)
        try #require(try b.object(gone.objectID.uriString)).setValue("edited, not knowing the delete", forKey: "name")
        try b.context.save()
        a.context.delete(gone)
        try a.context.save()
        let c = try Replica(model: Self.model, snapshotOf: a)
        try c.pull(from: b)
        try a.pull(from: b)
        #expect(try c.dump() == a.dump())
        #expect(try c.dump().isEmpty)
    }

    @Test("A snapshot taken while another writer saves is one consistent state: exactly what the change sets up to its vector make")
    func consistentUnderWrites() throws {
        let a = try Replica(model: Self.model)
        let path = try #require(a.store as? SQLiteStore).path
        let key = a.signingKey
        // Another connection on the same file, as another process would write it, on a thread of its own
        // (not Swift's shared pool, which the rest of the suite needs).
        let finished = DispatchSemaphore(value: 0)
        let failure = Mutex<String?>(nil)
        let writer = Thread {
            defer { finished.signal() }
            do {
                let store = try SQLiteStore(path: path, model: Self.model, options: .init(signingKey: key))
                let context = try PersistentContainer(store: store).newContext()
                for id in 1...300 {
                    try context.make("Person", ["id": Int64(id), "name": "P\(id)"])
                    if id % 3 == 0, let first = try context.fetch(FetchRequest(entityName: "Person")).first { context.delete(first) }
                    try context.save()
                }
            } catch {
                failure.withLock { $0 = "\(error)" }
            }
        }
        writer.start()
        // Snapshots taken while the writer is between its first and its last save.
        var intermediate = 0
        while intermediate < 4 {
            let saved = try a.store.historyState().vector.values.reduce(0, +)
            if saved == 0 {
                if failure.withLock({ $0 }) != nil { break }  // the writer failed: reported below, not waited for
                usleep(2_000)
                continue
            }
            let c = try Replica(model: Self.model, snapshotOf: a)
            let vector = try c.store.historyState().vector
            // A replica given exactly the change sets the snapshot's vector names.
            let b = try Replica(model: Self.model)
            let lines = try a.store.changeSetLines().filter { line in
                guard case .changeSet(let changeSet) = try ChangeSetCodec.decode(line, model: Self.model, versionHash: a.store.modelVersionHash) else {
                    return false
                }
                return changeSet.sequence <= vector[changeSet.origin, default: 0]
            }
            _ = try b.engine.apply(lines: lines)
            #expect(try b.dump() == c.dump(), "snapshot at \(vector)")
            if vector.values.reduce(0, +) < 300 { intermediate += 1 } else { break }
        }
        #expect(intermediate >= 1, "at least one snapshot taken while the writer was saving")
        finished.wait()
        #expect(failure.withLock { $0 } == nil)
        let last = try Replica(model: Self.model, snapshotOf: a)
        #expect(try last.dump() == a.dump())
    }

    @Test("A file that is not a sound snapshot of this model is refused with the reason, and left as it was")
    func refusals() throws {
        let directory = TemporaryDirectory()
        let junk = directory.file("junk.sqlite")
        try Data("not a database at all, just some bytes that go on for a while".utf8).write(to: URL(fileURLWithPath: junk))
        #expect { try SQLiteStore.installSnapshot(at: junk, model: Self.model) } throws: { "\($0)".contains("not a SQLite database") }
        #expect { try SQLiteStore.installSnapshot(at: directory.file("none.sqlite"), model: Self.model) } throws: { "\($0)".contains("no snapshot file here") }

        let a = try Replica(model: Self.model)
        try a.context.make("Person", ["id": Int64(1)])
        try a.context.save()
        let store = try #require(a.store as? SQLiteStore)
        let trapped = directory.file("trapped.sqlite")
        try store.writeSnapshot(to: trapped)
        #expect { try store.writeSnapshot(to: trapped) } throws: { "\($0)".contains("this one exists") }
        try DatabaseQueue(path: trapped).write { db in
            try db.execute(sql: "CREATE TRIGGER sneaky AFTER INSERT ON Z_FERRY_CHANGESET BEGIN DELETE FROM Z_FERRY_VECTOR; END")
        }
        #expect { try SQLiteStore.installSnapshot(at: trapped, model: Self.model) } throws: { "\($0)".contains("trigger sneaky") }

        let other = directory.file("other.sqlite")
        try store.writeSnapshot(to: other)
        let otherModel = try SampleModels.load("Orders")
        #expect(throws: StoreError.self) { try SQLiteStore.installSnapshot(at: other, model: otherModel) }
        #expect {
            try SQLiteStore.installSnapshot(at: other, model: Self.model, identifier: a.store.identifier)
        } throws: { "\($0)".contains("UUID of its own") }
        #expect(try SQLiteStore.historyState(atPath: other).store == a.store.identifier, "a refused snapshot keeps its source's UUID")
    }

    @Test("A snapshot of an earlier model version installs and migrates when that version is named; unnamed, a removal is refused")
    func earlierVersion() throws {
        let directory = TemporaryDirectory()
        let a = try Replica(model: Self.model)
        try a.context.make("Person", ["id": Int64(1), "name": "Ann"])
        try a.context.save()
        let path = directory.file("old.sqlite")
        try #require(a.store as? SQLiteStore).writeSnapshot(to: path)
        // The next version drops Organization and renames Person.name.
        let next = try ManagedObjectModel(entities: Self.model.entities.filter { $0.name == "Person" }.map { entity in
            var person = entity
            person.ownAttributes = person.ownAttributes.map { var a = $0; if a.name == "name" { a.name = "fullName"; a.renamingIdentifier = "name" }; return a }
            return person
        })
        #expect { try SQLiteStore.installSnapshot(at: path, model: next) } throws: { "\($0)".contains("entity 'Organization' was removed") }
        try SQLiteStore.installSnapshot(at: path, model: next, earlierModels: [Self.model])
        let store = try SQLiteStore(path: path, model: next)
        let context = try PersistentContainer(store: store).newContext()
        let person = try #require(try context.fetch(FetchRequest(entityName: "Person")).first)
        #expect(try person.value(forKey: "fullName") as? String == "Ann")
    }
}
