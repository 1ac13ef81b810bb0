import Foundation
import GRDB
import Testing
import FerryModel
import FerryStore
import FerrySQLite
import FerrySync
import FerrySigning
import FerryTestSupport

/// A replica for tests: a store (SQLite on a temporary file, or in memory), its engine and a context.
final class Replica {
    /// The two stores that replicate: merge-rule and convergence tests run on both.
    enum Kind: String, CaseIterable, CustomStringConvertible, Sendable {
        case sqlite, memory
        var description: String { rawValue }
    }

    let directory = TemporaryDirectory()
    let store: any ReplicaStore
    var engine: ReplayEngine
    let container: PersistentContainer
    let context: ManagedObjectContext
    /// The key the replica signs with (nil: unsigned); a test that opens its file again passes it.
    let signingKey: StoreSigningKey?

    /// `directInserts: false` merges every change set through a context (no fast path).
    /// `validators` run on local saves and on merges alike.
    /// Every replica signs what it records, with a key of its own (`signed: false`: none, as a store made before keys).
    init(model: ManagedObjectModel, identifier: UUID? = nil, directInserts: Bool = true, kind: Kind = .sqlite,
         validators: [EntityValidator] = [], signed: Bool = true) throws {
        let key = signed ? StoreSigningKey() : nil
        signingKey = key
        store = switch kind {
        case .sqlite: try SQLiteStore(path: directory.file("replica.sqlite"), model: model, options: .init(newStoreIdentifier: identifier, signingKey: key))
        case .memory: InMemoryStore(model: model, identifier: identifier ?? UUID(), signingKey: key)
        }
        container = try PersistentContainer(store: store, validators: validators)
        var engine = try ReplayEngine(container: container)
        engine.usesDirectInserts = directInserts
        self.engine = engine
        context = container.newContext()
    }

    /// A SQLite replica started from a snapshot of `source` (a SQLite replica), as `ferry init --from-snapshot` starts one.
    init(model: ManagedObjectModel, snapshotOf source: Replica) throws {
        let path = directory.file("replica.sqlite")
        try #require(source.store as? SQLiteStore).writeSnapshot(to: path)
        try SQLiteStore.installSnapshot(at: path, model: model)
        signingKey = nil
        store = try SQLiteStore(path: path, model: model)
        container = try PersistentContainer(store: store)
        engine = try ReplayEngine(container: container)
        context = container.newContext()
    }

    /// Makes each of `replicas` hold every other one's key (pinned) and take only change sets of
    /// origins it holds a key of, each signature checked (``OriginTrust/Policy/UnknownOrigins/refuse``).
    static func trustEachOther(_ replicas: [Replica]) throws {
        let keys = try replicas.flatMap { replica in try replica.store.originKeys().filter { $0.origin == replica.store.identifier } }
        for replica in replicas {
            for var key in keys where key.origin != replica.store.identifier {
                key.source = .pinned
                try replica.store.recordOriginKey(key)
            }
            let usesDirectInserts = replica.engine.usesDirectInserts
            replica.engine = try ReplayEngine(container: replica.container,
                                              trust: OriginTrust(store: replica.store, policy: .init(unknownOrigins: .refuse, trustsPeersOnFirstUse: false)))
            replica.engine.usesDirectInserts = usesDirectInserts
        }
    }

    /// Takes in everything `other` has that this replica lacks.
    @discardableResult
    func pull(from other: Replica) throws -> ApplyReport {
        try engine.apply(lines: other.store.changeSetLines(after: store.historyState().vector, limit: nil))
    }

    /// Exchanges among `replicas` (every one pulls from every other) until nothing new flows
    /// (delete propagation, merges and restores may add change sets on the way), at most 10
    /// rounds; the rounds taken (10 when it did not settle).
    static func exchangeUntilSettled(_ replicas: [Replica]) throws -> Int {
        var rounds = 0
        while rounds < 10 {
            rounds += 1
            let before = try replicas.map { try $0.store.historyState().vector }
            for to in replicas { for from in replicas where from !== to { try to.pull(from: from) } }
            if try replicas.map({ try $0.store.historyState().vector }) == before { break }
        }
        return rounds
    }

    func dump() throws -> [String] {
        var lines: [String] = []
        try StoreDump(store: store).write { lines.append($0) }
        return lines
    }

    /// The object with this origin URI, in the replica's context.
    func object(_ uri: String) throws -> ManagedObject? {
        guard let id = try store.localObjectID(forOriginURI: uri) else { return nil }
        return try? context.existingObject(with: id)
    }
}

extension ReplicaStore {
    /// The whole history, as canonical JSON lines.
    func changeSetLines() throws -> [String] {
        try changeSetLines(after: [:], limit: nil)
    }

    /// The whole history, decoded.
    func changeSets() throws -> [ChangeSet] {
        try changeSetLines().compactMap { line in
            if case .changeSet(let changeSet) = try ChangeSetCodec.decode(line, model: model, versionHash: modelVersionHash) { return changeSet }
            return nil
        }
    }
}

@Suite("Replay: change sets from another store")
struct ReplayTests {
    static let model = try! SampleModels.load("OrgChart")

    @Test("Inserts, updates and deletes reach the other store, named by origin URI")
    func basics() throws {
        let a = try Replica(model: Self.model)
        let b = try Replica(model: Self.model)
        let ann = try a.context.make("Person", ["id": Int64(1), "name": "Ann"])
        let bob = try a.context.make("Person", ["id": Int64(2), "name": "Bob", "manager": ann])
        try a.context.save()
        let report = try b.pull(from: a)
        #expect(report.applied == 1 && report.duplicate == 0 && report.waiting == 0 && report.quarantined == 0)
        #expect(try b.dump() == a.dump())
        #expect(try b.pull(from: a).applied == 0, "nothing new")
        #expect(try b.engine.apply(lines: a.store.changeSetLines()).duplicate == 1, "idempotent")

        let bobOnB = try #require(try b.object(bob.objectID.uriString))
        try bobOnB.setValue("Robert", forKey: "name")
        try b.context.save()
        try a.pull(from: b)
        #expect(try a.dump() == b.dump())
        // Like Core Data's, a context does not see what others write until it refetches.
        a.context.reset()
        #expect(try a.object(bob.objectID.uriString)?.string("name") == "Robert")
        #expect(try b.pull(from: a).applied == 0, "b's own change set is not echoed back")

        a.context.delete(try #require(try a.object(ann.objectID.uriString)))
        try a.context.save()
        try b.pull(from: a)
        #expect(try b.dump() == a.dump())
        #expect(try b.dump().count == 1)
    }

    @Test("A replay in a cancelled task (a daemon stopping) stops between change sets: nothing held, the rest arrives next time")
    func cancelledReplay() async throws {
        let a = try Replica(model: Self.model)
        let b = try Replica(model: Self.model)
        for id in 1...3 {
            try a.context.make("Person", ["id": Int64(id)])
            try a.context.save()
        }
        let lines = try a.store.changeSetLines()
        let engine = b.engine
        let report = try await Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try engine.apply(lines: lines)
        }.value
        #expect(report.applied == 0 && report.waiting == 0 && report.quarantined == 0 && report.duplicate == 0)
        #expect(try b.store.historyState().vector.isEmpty)
        #expect(try b.engine.heldChangeSets().isEmpty, "a set cut off by a stop is not waiting for anything")
        #expect(try b.dump().isEmpty)
        #expect(try b.pull(from: a).applied == 3)
        #expect(try b.dump() == a.dump())
    }

    @Test("A store made before identity runs (format 1: one map row per object, rowid table) is upgraded and replays the same")
    func olderIdentityMapShape() throws {
        let a = try Replica(model: Self.model)
        let ann = try a.context.make("Person", ["id": Int64(1), "name": "Ann"])
        let bob = try a.context.make("Person", ["id": Int64(2), "name": "Bob", "manager": ann])
        try a.context.save()
        let firstSet = try a.store.changeSetLines()

        let directory = TemporaryDirectory()
        let path = directory.file("older.sqlite")
        do { _ = try ReplayEngine(store: SQLiteStore(path: path, model: Self.model)).apply(lines: firstSet) }
        let database = { try DatabaseQueue(path: path) }
        let shape = { try database().read { try String.fetchOne($0, sql: "SELECT sql FROM sqlite_master WHERE name = 'Z_FERRY_OBJECT'") } }
        let format = {
            try database().read { db -> Int? in
                let plist = try #require(try Data.fetchOne(db, sql: "SELECT Z_PLIST FROM Z_METADATA"))
                return try #require(try JSONSerialization.jsonObject(with: plist) as? [String: Any])["formatVersion"] as? Int
            }
        }
        #expect(try shape()?.contains("WITHOUT ROWID") == true)
        #expect(try format() == 3)
        // Turn it into what Ferry 1 wrote: a map row per object in a rowid table, no runs, format 1.
        try database().write { db in
            let entries = try Row.fetchAll(db, sql: "SELECT Z_PREFIX, Z_FIRST, Z_COUNT, Z_ROOT, Z_PK FROM Z_FERRY_RANGE")
            #expect(entries.count == 1, "Ann and Bob are one run")
            try db.execute(sql: "DROP TABLE Z_FERRY_OBJECT")
            try db.execute(sql: "DROP TABLE Z_FERRY_RANGE")
            try db.execute(sql: "CREATE TABLE Z_FERRY_OBJECT (Z_URI TEXT PRIMARY KEY, Z_ROOT INTEGER NOT NULL, Z_PK INTEGER NOT NULL)")
            try db.execute(sql: "CREATE UNIQUE INDEX Z_FERRY_OBJECT_ROW ON Z_FERRY_OBJECT (Z_ROOT, Z_PK)")
            for entry in entries {
                for offset in 0..<(entry[2] as Int64) {
                    try db.execute(sql: "INSERT INTO Z_FERRY_OBJECT VALUES (?, ?, ?)",
                                   arguments: [(entry[0] as String) + String((entry[1] as Int64) + offset), entry[3] as Int, (entry[4] as Int64) + offset])
                }
            }
            try db.execute(sql: "UPDATE Z_METADATA SET Z_PLIST = json_set(Z_PLIST, '$.formatVersion', 1)")
        }
        #expect(try format() == 1)
        // A read-only open cannot upgrade it, and says so.
        let readOnly = #expect(throws: StoreError.self) {
            try SQLiteStore(path: path, model: Self.model, options: .init(createIfMissing: false, readOnly: true))
        }
        #expect(readOnly.map { "\($0)" }?.contains("older Ferry (format 1)") == true)

        let older = try SQLiteStore(path: path, model: Self.model)
        #expect(try format() == 3, "opening for writing upgraded it (Ferry 1 now refuses it rather than misreading it)")
        #expect(try shape()?.contains("WITHOUT ROWID") == false, "opening kept the older table")
        #expect(try older.localObjectID(forOriginURI: bob.objectID.uriString) != nil)

        // A second change set refers to Bob (a single entry) and inserts Carol and Dan (a run).
        try a.context.make("Person", ["id": Int64(3), "name": "Carol", "manager": bob])
        try a.context.make("Person", ["id": Int64(4), "name": "Dan", "manager": ann])
        try a.context.save()
        let report = try ReplayEngine(store: older).apply(lines: a.store.changeSetLines())
        #expect(report.applied == 1 && report.duplicate == 1)
        var lines: [String] = []
        try StoreDump(store: older).write { lines.append($0) }
        #expect(try lines == a.dump())
        #expect(try ReplayEngine(store: older).apply(lines: a.store.changeSetLines()).duplicate == 2)
        #expect(try database().read { try Int.fetchOne($0, sql: "SELECT count(*) FROM Z_FERRY_RANGE") } == 1)
    }

    @Test("Concurrent edits: last writer wins per property; deletes win over updates")
    func conflicts() throws {
        let a = try Replica(model: Self.model)
        let b = try Replica(model: Self.model)
        let ann = try a.context.make("Person", ["id": Int64(1), "name": "Ann"])
        let bob = try a.context.make("Person", ["id": Int64(2), "name": "Bob"])
        try a.context.save()
        try b.pull(from: a)
        // Both edit Ann: a her name, b her name and id; b's edit is later.
        try ann.setValue("Ann (a)", forKey: "name")
        try a.context.save()
        let annOnB = try #require(try b.object(ann.objectID.uriString))
        try annOnB.setValue("Ann (b)", forKey: "name")
        try annOnB.setValue(Int64(10), forKey: "id")
        try b.context.save()
        // a deletes Bob while b renames him.
        a.context.delete(bob)
        try a.context.save()
        let bobOnB = try #require(try b.object(bob.objectID.uriString))
        try bobOnB.setValue("Bobby", forKey: "name")
        try b.context.save()

        try a.pull(from: b)
        try b.pull(from: a)
        #expect(try a.dump() == b.dump())
        let lines = try a.dump()
        #expect(lines.count == 1, "Bob stays deleted")
        #expect(lines.first?.contains("\"name\":\"Ann (b)\"") == true, "b wrote Ann's name last")
        #expect(lines.first?.contains("\"id\":10") == true)
    }
}

@Suite("Identity: either URI form resolves")
struct IdentityTests {
    @Test("A context resolves an object by its origin URI and by its local URI")
    func bothForms() throws {
        let model = try SampleModels.load("OrgChart")
        let a = try Replica(model: model)
        let b = try Replica(model: model)
        let ann = try a.context.make("Person", ["name": "Ann"])
        try a.context.save()
        try b.pull(from: a)
        let origin = ann.objectID.uriString
        let container = try PersistentContainer(store: b.store)
        let context = container.newContext()
        let byOrigin = try context.existingObject(withURI: origin)
        #expect(try byOrigin.string("name") == "Ann")
        #expect(byOrigin.objectID.storeIdentifier == b.store.identifier, "a local object of b")
        let byLocal = try context.existingObject(withURI: byOrigin.objectID.uriString)
        #expect(byLocal === byOrigin)
        let stranger = "x-coredata://\(UUID().uuidString)/Person/p1"
        #expect(throws: ContextError.self) { try context.existingObject(withURI: stranger) }
    }

    @Test("An origin URI of an object deleted here is a deleted object, not another store's", arguments: Replica.Kind.allCases)
    func deletedHere(kind: Replica.Kind) throws {
        let a = try Replica(model: ReplayTests.model, kind: kind)
        let b = try Replica(model: ReplayTests.model, kind: kind)
        let ann = try a.context.make("Person", ["name": "Ann"])
        try a.context.save()
        try b.pull(from: a)
        let origin = ann.objectID.uriString
        // Deleted on B by B's own save (as a cascade replayed from elsewhere would delete it).
        b.context.delete(try #require(try b.object(origin)))
        try b.context.save()
        #expect(throws: ContextError.objectInaccessible(origin)) { try b.container.managedObjectID(forURIString: origin) }
        #expect(ContextError.objectInaccessible(origin).description.contains("no longer exists"))
        // A URI of a store nothing came from is still another store's.
        let stranger = "x-coredata://\(UUID().uuidString)/Person/p1"
        #expect(throws: ContextError.invalidURI(.foreignStore(stranger, expected: b.store.identifier))) {
            try b.container.managedObjectID(forURIString: stranger)
        }
    }
}

@Suite("Held change sets and clocks")
struct HeldAndClockTests {
    @Test("A change set of another model version is held, listed with the reason, and never applied or dropped")
    func otherModel() throws {
        let model = try SampleModels.load("OrgChart")
        let replica = try Replica(model: model)
        let origin = UUID(uuidString: "0000000A-0000-4000-8000-000000000001") ?? UUID()
        let line = #"{"changes":[{"entity":"Person","op":"insert","uri":"x-coredata://\#(origin.uuidString)/Person/p1","values":{"name":"Ann"}}],"# +
            #""format":1,"hlc":65536000,"model":"an-older-model","origin":"\#(origin.uuidString)","seq":1}"#
        let report = try replica.engine.apply(lines: [line])
        #expect(report.waiting == 1 && report.applied == 0 && report.duplicate == 0)
        let held = try replica.engine.heldChangeSets()
        #expect(held.count == 1)
        #expect(held.first?.reason.contains("made with model an-older-model") == true)
        #expect(try replica.dump().isEmpty)
        #expect(try replica.store.historyState().vector[origin] == nil, "not taken in: it stays held until a store with that model applies it")
        // Delivered again: still one held copy.
        _ = try replica.engine.apply(lines: [line])
        #expect(try replica.engine.heldChangeSets().count == 1)
    }

    @Test("The hybrid logical clock never goes back, even when the wall clock does")
    func monotonic() {
        let now = Date(timeIntervalSince1970: 1_700_000_000)
        let first = HybridTimestamp.next(after: .zero, now: now)
        #expect(first.milliseconds == 1_700_000_000_000 && first.counter == 0)
        let second = HybridTimestamp.next(after: first, now: now)
        #expect(second > first && second.counter == 1)
        let stepBack = HybridTimestamp.next(after: second, now: now.addingTimeInterval(-60))
        #expect(stepBack > second && stepBack.milliseconds == first.milliseconds, "a clock stepped back keeps counting on the last time")
        let later = HybridTimestamp.next(after: stepBack, now: now.addingTimeInterval(1))
        #expect(later.milliseconds == 1_700_000_001_000 && later.counter == 0)
    }
}
