import Foundation
import Testing
import FerryModel
import FerryStore
import FerrySQLite
import GRDB
import FerrySync
import FerryTestSupport

/// Purging by policy (docs/SYNC.md, "Bounded history"): change sets every peer has and old
/// enough go, what is not dealt with stays, tombstones go past the horizon, and from then on
/// change sets that do not know everything made before it are refused. On both stores.
@Suite("Bounded history")
struct BoundedHistoryTests {
    /// A level must be at most 10: a change set writing 11 is invalid on its own (quarantined).
    static let model = try! ManagedObjectModel {
        Entity("Note") {
            Attribute("title", .string)
            Attribute("level", .integer64, maximum: .integer(10))
        }
    }

    /// `count` notes saved one per change set on `replica`.
    func save(_ count: Int, on replica: Replica, from first: Int = 1) throws -> [ManagedObject] {
        try (first..<(first + count)).map { index in
            let note = try replica.context.make("Note", ["title": "note \(index)", "level": Int64(1)])
            try replica.context.save()
            return note
        }
    }

    /// A change set of another origin that sets a level past the maximum.
    func invalidChangeSet(_ replica: Replica) -> String {
        let origin = UUID()
        return ChangeSetCodec.encode(ChangeSet(origin: origin, sequence: 1, timestamp: .wall(Date()), modelHash: Self.model.versionHash, changes: [
            ObjectChange(kind: .insert, uri: "x-coredata://\(origin.uuidString)/Note/p1", entity: "Note", values: ["level": .attribute(.integer(11))]),
        ]))
    }

    @Test("A purge drops only change sets every peer has and older than the retention; quarantined ones stay listed",
          arguments: Replica.Kind.allCases)
    func purgeByPolicy(kind: Replica.Kind) throws {
        let a = try Replica(model: Self.model, kind: kind)
        _ = try save(4, on: a)
        let report = try a.engine.apply(lines: [invalidChangeSet(a)])
        #expect(report.quarantined == 1)
        let me = a.store.identifier
        let everything = try a.store.historyState().vector
        let before = try a.store.historySize()
        #expect(before.changeSets == 5 && before.bytes > 0 && before.purgedThrough.isEmpty && before.horizon == nil)

        // Younger than the retention: nothing goes, whatever the peers have.
        let young = try a.store.purgeHistory(.at(Date(), acknowledged: [everything], retention: 3600, horizon: nil))
        #expect(young == PurgeReport(changeSets: 0, tombstones: 0))
        // One peer still lacks change sets 3 and 4 of this store: only 1 and 2 go.
        let partly = try a.store.purgeHistory(.at(Date().addingTimeInterval(60), acknowledged: [everything, [me: 2]], retention: 0, horizon: nil))
        #expect(partly.changeSets == 2)
        #expect(try a.store.historySize().purgedThrough == [me.uuidString: 2])
        #expect(throws: HistoryError.purged(origin: me, needed: 1, purgedThrough: 2)) { try a.store.changeSetLines(after: [:], limit: nil) }
        #expect(try a.store.changeSetLines(after: [me: 2], limit: nil).count == 3, "3, 4 and the quarantined one")
        // Every peer has everything: the applied ones go, the quarantined one stays listed and counted.
        let rest = try a.store.purgeHistory(.at(Date().addingTimeInterval(60), acknowledged: [everything], retention: 0, horizon: nil))
        #expect(rest.changeSets == 2)
        #expect(try a.store.quarantinedChangeSets().count == 1)
        #expect(try a.store.historySize().changeSets == 1)
        #expect(try a.store.historyState().vector == everything, "the vector survives the purge")
        // Saves go on without a gap.
        _ = try save(1, on: a, from: 5)
        #expect(try a.store.historyState().vector[me] == 5)
    }

    @Test("Tombstones past the horizon are forgotten, and a change set that does not know everything made before it is refused whole; one that does applies",
          arguments: Replica.Kind.allCases)
    func horizon(kind: Replica.Kind) throws {
        let a = try Replica(model: Self.model, kind: kind)
        let stale = try Replica(model: Self.model, kind: kind == .sqlite ? .memory : .sqlite)
        let fresh = try Replica(model: Self.model, kind: kind)
        let notes = try save(2, on: a)
        for replica in [stale, fresh] { try replica.pull(from: a) }
        // The stale replica stops syncing and edits a note; A deletes that note.
        let staleNote = try stale.context.existingObject(withURI: notes[0].objectID.uriString)
        try staleNote.setValue("edited while away", forKey: "title")
        try stale.context.save()
        a.context.delete(notes[0])
        try a.context.save()
        #expect(try a.store.historySize().tombstones == 1)
        try fresh.pull(from: a)
        _ = try save(1, on: fresh, from: 10)
        // Later, A forgets the delete (everything so far is past the horizon).
        let later = Date().addingTimeInterval(3600)
        let report = try a.store.purgeHistory(.at(later, acknowledged: [], retention: 60, horizon: 60))
        #expect(report == PurgeReport(changeSets: 0, tombstones: 1))
        let size = try a.store.historySize()
        #expect(size.tombstones == 0 && size.horizon != nil)
        // The stale edit knows nothing of A's delete (change set 3 of A): refused, nothing applied.
        let vector = try a.store.historyState().vector
        do {
            let applied = try a.pull(from: stale)
            Issue.record("accepted a change set from past the horizon: \(applied)")
        } catch let error as HistoryError {
            guard case .pastHorizon(let origin, let needed, _) = error else { throw error }
            #expect(origin == a.store.identifier && needed == 3, "\(error)")
            #expect(error.description.contains("start again from a snapshot"), "\(error.description)")
        }
        #expect(try a.store.historyState().vector == vector, "nothing taken in")
        #expect(try a.dump().count == 1, "the deleted note stays deleted")
        // A replica that synced since knows the delete: its change sets apply.
        #expect(try a.pull(from: fresh).applied == 1)
        #expect(try a.dump().count == 2)
    }

    @Test("A delete a peer hasn't acknowledged isn't forgotten: horizon asks no more than peers had; peer's late edit applies without bringing the object back",
          arguments: Replica.Kind.allCases)
    func horizonKnownToPeers(kind: Replica.Kind) throws {
        let a = try Replica(model: Self.model, kind: kind)
        let lagging = try Replica(model: Self.model, kind: kind == .sqlite ? .memory : .sqlite)
        let notes = try save(2, on: a)
        try lagging.pull(from: a)
        let acknowledged = try lagging.store.historyState().vector  // what its last round told A
        try lagging.context.existingObject(withURI: notes[0].objectID.uriString).setValue("edited while lagging", forKey: "title")
        try lagging.context.save()
        a.context.delete(notes[0])
        try a.context.save()
        let later = Date().addingTimeInterval(3600)
        let report = try a.store.purgeHistory(.at(later, acknowledged: [acknowledged], retention: 60, horizon: 60, knownToPeers: [acknowledged]))
        #expect(report.tombstones == 0, "the peer has not acknowledged the delete: its tombstone stays")
        let applied = try a.pull(from: lagging)
        #expect(applied.applied == 1, "the lagging edit does not need to know the delete the horizon kept")
        #expect(try a.dump().count == 1, "the deleted note does not come back")
        // Once the peer has the delete, it goes.
        try lagging.pull(from: a)
        let caughtUp = try lagging.store.historyState().vector
        #expect(try a.store.purgeHistory(.at(later, acknowledged: [caughtUp], retention: 60, horizon: 60, knownToPeers: [caughtUp])).tombstones == 1)
        #expect(try a.dump().count == 1)
        // Without what the peer had, the same edit is refused as past the horizon.
        let b = try Replica(model: Self.model, kind: kind)
        _ = try save(2, on: b)
        let stale = try Replica(model: Self.model, kind: kind)
        try stale.pull(from: b)
        _ = try save(1, on: stale, from: 20)
        _ = try save(1, on: b, from: 30)
        _ = try b.store.purgeHistory(.at(Date().addingTimeInterval(3600), acknowledged: [], retention: 60, horizon: 60))
        #expect(throws: HistoryError.self) { try b.pull(from: stale) }
    }

    @Test("A peer's change set predating a delete it took, in flight as it acknowledged it, isn't refused: horizon waits till this store has all the peer had",
          arguments: Replica.Kind.allCases)
    func horizonWaitsForCausalStability(kind: Replica.Kind) throws {
        let a = try Replica(model: Self.model, kind: kind)
        let b = try Replica(model: Self.model, kind: kind == .sqlite ? .memory : .sqlite)
        let notes = try save(2, on: a)
        try b.pull(from: a)
        a.context.delete(notes[0])
        try a.context.save()
        // B edits the other note without knowing A's delete, then takes the delete in: its round with A
        // ends with B holding the delete and its own edit, which A has not pulled yet.
        try b.context.existingObject(withURI: notes[1].objectID.uriString).setValue("edited before the delete arrived", forKey: "title")
        try b.context.save()
        try b.pull(from: a)
        var acknowledgements = PeerAcknowledgements(peers: ["b"])
        acknowledgements.record(try b.store.historyState().vector, from: "b", local: try a.store.historyState().vector)
        #expect(acknowledgements.acknowledged.count == 1, "B has the delete: change sets may go")
        #expect(acknowledgements.stable == nil && acknowledgements.unstable == ["b"])
        let later = Date().addingTimeInterval(3600)
        let waiting = acknowledgements.policy(at: later, retention: 60, horizon: 60)
        #expect(waiting.tombstonesMadeBefore == nil)
        #expect(try a.store.purgeHistory(waiting).tombstones == 0, "B's edit made without knowing the delete is still on its way")
        #expect(try a.pull(from: b).applied == 1, "B's edit is taken in, not refused as past the horizon")
        #expect(try a.dump().count == 1)
        // Now A holds everything B held when it acknowledged: the delete can be forgotten.
        acknowledgements.update(local: try a.store.historyState().vector)
        #expect(acknowledgements.stable?.count == 1)
        #expect(try a.store.purgeHistory(acknowledgements.policy(at: later, retention: 60, horizon: 60)).tombstones == 1)
        #expect(try a.dump().count == 1, "the deleted note stays deleted")
    }

    @Test("An acknowledgement becomes stable once this store holds what the peer held; a newer one waits its turn, an older pending one is kept")
    func acknowledgementStability() {
        let a = UUID(), b = UUID()
        var acknowledgements = PeerAcknowledgements(peers: ["b", "c"])
        #expect(acknowledgements.silent == ["b", "c"] && acknowledgements.acknowledged.isEmpty)
        acknowledgements.record([a: 3, b: 5], from: "b", local: [a: 3, b: 4])
        acknowledgements.record([a: 3], from: "c", local: [a: 3, b: 4])
        #expect(acknowledgements.acknowledged.count == 2)
        #expect(acknowledgements.stable == nil && acknowledgements.unstable == ["b"], "c held nothing this store lacks; b held b:5")
        acknowledgements.record([a: 4, b: 7], from: "b", local: [a: 4, b: 4])
        #expect(acknowledgements.stable == nil, "the first pending acknowledgement still waits for b:5")
        acknowledgements.update(local: [a: 4, b: 5])
        #expect(acknowledgements.stable == [[a: 3, b: 5], [a: 3]], "b's first acknowledgement is stable; the one naming b:7 was not kept pending")
        acknowledgements.record([a: 4, b: 7], from: "b", local: [a: 4, b: 7])
        #expect(acknowledgements.stable?.first == [a: 4, b: 7])
        let policy = acknowledgements.policy(at: Date(timeIntervalSince1970: 1_000_000), retention: 10, horizon: 100)
        #expect(policy.knownToPeers == [[a: 4, b: 7], [a: 3]])
        #expect(policy.tombstonesMadeBefore == .wall(Date(timeIntervalSince1970: 1_000_000 - 100)))
        let alone = PeerAcknowledgements(peers: []).policy(at: Date(), retention: 0, horizon: 0)
        #expect(alone.acknowledged.isEmpty && alone.knownToPeers.isEmpty && alone.tombstonesMadeBefore != nil,
                "a store without peers purges no change set and forgets deletes at the horizon")
    }

    @Test("Identity-map entries of objects deleted past the horizon go with their tombstones: the map stays bounded, and a run loses just those URIs",
          arguments: Replica.Kind.allCases)
    func identityMapBounded(kind: Replica.Kind) throws {
        let a = try Replica(model: Self.model, kind: kind)
        let b = try Replica(model: Self.model, kind: kind == .sqlite ? .memory : .sqlite)
        let notes = try (1...5).map { index in try b.context.make("Note", ["title": "note \(index)"]) }
        try b.context.save()
        try a.pull(from: b)
        func runs() throws -> [[Int64]] {
            // (The in-memory store keeps one entry per URI; the lookups below check it.)
            guard let path = (a.store as? SQLiteStore)?.path else { return [] }
            return try DatabaseQueue(path: path).read { db in
                try Row.fetchAll(db, sql: "SELECT Z_FIRST, Z_COUNT FROM Z_FERRY_RANGE ORDER BY Z_FIRST").map { [$0[0], $0[1]] }
                    + [[try Int64.fetchOne(db, sql: "SELECT count(*) FROM Z_FERRY_OBJECT") ?? -1]]
            }
        }
        #expect(try runs() == (kind == .sqlite ? [[1, 5], [0]] : []), "one run of five")
        b.context.delete(notes[0])
        b.context.delete(notes[2])
        try b.context.save()
        try a.pull(from: b)
        let acknowledged = try b.store.historyState().vector
        let report = try a.store.purgeHistory(.at(Date().addingTimeInterval(3600), acknowledged: [acknowledged], retention: 60, horizon: 60,
                                                  knownToPeers: [acknowledged]))
        #expect(report.tombstones == 2)
        #expect(try runs() == (kind == .sqlite ? [[2, 1], [4, 2], [0]] : []), "the run lost p1 and p3, nothing else")
        #expect(try a.store.localObjectID(forOriginURI: notes[0].objectID.uriString) == nil)
        #expect(try a.store.localObjectID(forOriginURI: notes[2].objectID.uriString) == nil)
        for index in [1, 3, 4] { #expect(try a.store.localObjectID(forOriginURI: notes[index].objectID.uriString) != nil) }
        // The other three still resolve: B's edits of them apply, and the stores agree.
        for index in [1, 3, 4] { try notes[index].setValue("edited \(index)", forKey: "title") }
        try b.context.save()
        #expect(try a.pull(from: b).applied == 1)
        #expect(try a.dump() == b.dump())
        #expect(try a.dump().count == 3)
    }

    @Test("Aliases of merged duplicates are forgotten past the horizon, as tombstones are", arguments: Replica.Kind.allCases)
    func aliasesPastHorizon(kind: Replica.Kind) throws {
        let a = try Replica(model: ConvergenceTests.members, kind: kind)
        let b = try Replica(model: ConvergenceTests.members, kind: kind == .sqlite ? .memory : .sqlite)
        let ann = try a.context.make("Member", ["email": "ann@example.org", "name": "Ann"])
        try a.context.save()
        let anna = try b.context.make("Member", ["email": "ann@example.org", "name": "Anna"])
        try b.context.save()
        try a.pull(from: b)
        let loser = [ann.objectID.uriString, anna.objectID.uriString].max { $0.utf8.lexicographicallyPrecedes($1.utf8) }
        let merged = try #require(loser)
        #expect(try a.store.aliases(of: [merged]).count == 1, "A merged the two and keeps the loser's URI as an alias")
        // Not yet past the horizon: kept.
        #expect(try a.store.purgeHistory(.at(Date(), acknowledged: [], retention: 0, horizon: 3600)).aliases == 0)
        #expect(try a.store.aliases(of: [merged]).count == 1)
        let report = try a.store.purgeHistory(.at(Date().addingTimeInterval(7200), acknowledged: [], retention: 0, horizon: 3600))
        #expect(report.aliases == 1)
        #expect(try a.store.aliases(of: [merged]).isEmpty)
        #expect(try a.dump().count == 1, "the merged object stays")
    }

    @Test("A store made before aliases kept their merge's clock gets the column when it opens, its aliases dated then")
    func olderAliases() throws {
        let directory = TemporaryDirectory()
        let path = directory.file("older.sqlite")
        do { _ = try SQLiteStore(path: path, model: ConvergenceTests.members) }
        try DatabaseQueue(path: path).write { db in
            try db.execute(sql: "DROP TABLE Z_FERRY_ALIAS")
            try db.execute(sql: "CREATE TABLE Z_FERRY_ALIAS (Z_URI TEXT PRIMARY KEY, Z_SURVIVOR TEXT NOT NULL) WITHOUT ROWID")
            try db.execute(sql: "INSERT INTO Z_FERRY_ALIAS VALUES ('x-coredata://B/Member/p1', 'x-coredata://A/Member/p1')")
        }
        let before = HybridTimestamp.wall(Date())
        let store = try SQLiteStore(path: path, model: ConvergenceTests.members)
        #expect(try store.aliases(of: ["x-coredata://B/Member/p1"]) == ["x-coredata://B/Member/p1": "x-coredata://A/Member/p1"])
        let clock = try DatabaseQueue(path: path).read { try Int64.fetchOne($0, sql: "SELECT Z_HLC FROM Z_FERRY_ALIAS") }
        #expect(clock.map { $0 >= before.rawValue } == true, "dated when the store was upgraded: \(String(describing: clock))")
        #expect(try store.purgeHistory(.at(Date(), acknowledged: [], retention: 0, horizon: 3600)).aliases == 0, "not yet past the horizon")
    }
}
