import Foundation
import Testing
import FerryModel
import FerryStore
import FerrySQLite
@testable import FerrySync
import FerryTestSupport

/// The thread that prepares a batch's direct inserts ahead of the writes:
/// every item handed out once, whatever the order it is asked in; a writer far
/// behind or one that stops early never blocks it for good; and a replay that
/// uses it leaves exactly what the context path leaves.
@Suite("Replay: direct inserts prepared ahead", .timeLimit(.minutes(2)))
struct DirectInsertPipelineTests {
    /// An origin with `saves` change sets: inserts pointing at earlier sets' objects, and every third an update.
    static func origin(saves: Int) throws -> (replica: Replica, lines: [String], changeSets: [ChangeSet]) {
        let origin = try Replica(model: ReplayTests.model)
        var previous: ManagedObject?
        for save in 0..<saves {
            if save % 3 == 2, let previous {
                try previous.setValue("renamed \(save)", forKey: "name")
            } else {
                for index in 0..<5 {
                    var values: [String: Any] = ["id": Int64(save * 10 + index), "name": "P\(save).\(index)"]
                    if let previous { values["manager"] = previous }
                    previous = try origin.context.make("Person", values)
                }
            }
            try origin.context.save()
        }
        let lines = try origin.store.changeSetLines()
        let changeSets = try lines.map { line -> ChangeSet in
            guard case .changeSet(let changeSet) = try ChangeSetCodec.decode(line, model: ReplayTests.model) else { throw CancellationError() }
            return changeSet
        }
        return (origin, lines, changeSets)
    }

    @Test("Each item is handed out once, as preparing it alone gives, in whatever order the writer asks")
    func handsOutEveryItem() throws {
        let (origin, lines, changeSets) = try Self.origin(saves: 3 * DirectInsertPipeline.lead + 2)
        let container = try PersistentContainer(store: origin.store)
        let pipeline = DirectInsertPipeline(Array(zip(changeSets, lines)), container: container)
        defer { pipeline.finish() }
        var eligible = 0
        // Last first: the thread must get past its lead because the writer asked that far.
        for index in changeSets.indices.reversed() {
            let alone = DirectInsertReplay.prepare(changeSets[index], body: lines[index], retry: false, container: container)
            let handed = pipeline.take(index)
            #expect((handed == nil) == (alone == nil), "item \(index)")
            #expect(handed?.insertedURIs == alone?.insertedURIs, "item \(index)")
            #expect(handed?.referencedURIs == alone?.referencedURIs, "item \(index)")
            if handed != nil { eligible += 1 }
        }
        // Two of every three saves insert (the fast path takes them); every third updates (it does not).
        #expect(eligible == changeSets.indices.filter { $0 % 3 != 2 }.count)
    }

    @Test("A writer that stops early, or never asks, ends the thread at once")
    func stopsEarly() throws {
        let (origin, lines, changeSets) = try Self.origin(saves: 4 * DirectInsertPipeline.lead)
        let container = try PersistentContainer(store: origin.store)
        let untouched = DirectInsertPipeline(Array(zip(changeSets, lines)), container: container)
        untouched.finish()  // (returns only once the thread has ended)
        untouched.finish()  // a second call is harmless
        let partly = DirectInsertPipeline(Array(zip(changeSets, lines)), container: container)
        #expect(partly.take(1) != nil)
        partly.finish()
    }

    @Test("Change sets of two origins that wait for each other replay as on the context path")
    func interleavedOrigins() throws {
        // B sorts before A, and B's sets depend on A's: the first pass skips them and takes them later.
        let a = try Replica(model: ReplayTests.model, identifier: UUID(uuidString: "FFFFFFFF-0000-0000-0000-000000000001"))
        let b = try Replica(model: ReplayTests.model, identifier: UUID(uuidString: "00000000-0000-0000-0000-000000000002"))
        var boss: ManagedObject?
        for save in 0..<3 {
            var values: [String: Any] = ["id": Int64(save), "name": "A\(save)"]
            if let boss { values["manager"] = boss }
            boss = try a.context.make("Person", values)
            try a.context.save()
        }
        try b.pull(from: a)
        b.context.reset()
        let bossURI = try #require(boss).objectID.uriString
        let bossInB = try #require(try b.object(bossURI))
        for save in 0..<3 {
            try b.context.make("Person", ["id": Int64(100 + save), "name": "B\(save)", "manager": bossInB])
            try b.context.save()
        }
        try a.pull(from: b)
        try a.context.make("Person", ["id": Int64(200), "name": "A after B"])
        try a.context.save()

        let lines = try a.store.changeSetLines()
        #expect(lines.count == 7)
        let fast = try Replica(model: ReplayTests.model)
        let slow = try Replica(model: ReplayTests.model, directInserts: false)
        let fastReport = try fast.engine.apply(lines: lines.reversed())
        let slowReport = try slow.engine.apply(lines: lines.reversed())
        #expect(fastReport.applied == 7 && fastReport.waiting == 0 && fastReport.quarantined == 0)
        #expect(fastReport == slowReport)
        #expect(try fast.dump() == a.dump())
        #expect(try slow.dump() == a.dump())
        #expect(try fast.store.changeSetLines() == slow.store.changeSetLines())
    }
}
