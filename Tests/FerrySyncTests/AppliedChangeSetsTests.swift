import Foundation
import Testing
import FerryModel
import FerryStore
import FerryTestSupport

/// What a container's change feed reads after a commit (`appliedChangeSets`): a backlog of large
/// change sets a few megabytes at a time, every one of them told, in order.
@Suite("Applied change sets, a few megabytes at a time")
struct AppliedChangeSetsTests {
    static let model = ReplayTests.model

    /// Saves on `replica`: objects whose names make each change set about `bytes` long (1 object: small).
    static func save(_ replica: Replica, objects: Int, nameLength: Int, tag: String) throws {
        for index in 0..<objects {
            _ = try replica.context.make("Person", ["name": "\(tag)-\(index)-" + String(repeating: "n", count: nameLength)])
        }
        try replica.context.save()
    }

    @Test("With a bound in bytes, a read takes the change sets within it (always the first), and the next goes on from there", arguments: Replica.Kind.allCases)
    func boundedReads(kind: Replica.Kind) throws {
        let replica = try Replica(model: Self.model, kind: kind)
        // Five change sets: small, about 300 KB, 300 KB, small, 300 KB.
        for (number, objects) in [1, 5, 5, 1, 5].enumerated() {
            try Self.save(replica, objects: objects, nameLength: objects == 1 ? 10 : 60_000, tag: "s\(number)")
        }
        let sizes = try replica.store.changeSetLines(after: [:], limit: nil).map(\.utf8.count)
        #expect(sizes.count == 5 && sizes[1] > 300_000 && sizes[0] < 10_000, "\(sizes)")

        // Bound 400 KB: the first small one and a large one, then a large one and the second small one, then the last.
        var rank: Int64 = 0
        var reads: [[Int64]] = []
        while true {
            let (changeSets, last) = try replica.store.appliedChangeSets(afterRank: rank, limit: 256, maximumBytes: 400_000)
            guard last != rank else { break }
            reads.append(changeSets.map(\.sequence))
            rank = last
        }
        #expect(reads == [[1, 2], [3, 4], [5]], "\(reads)")
        // A bound below every change set still reads one at a time; no bound reads all.
        #expect(try replica.store.appliedChangeSets(afterRank: 0, limit: 256, maximumBytes: 1).changeSets.map(\.sequence) == [1])
        #expect(try replica.store.appliedChangeSets(afterRank: 0, limit: 256).changeSets.map(\.sequence) == [1, 2, 3, 4, 5])
    }

    @Test("A backlog of large change sets taken in at once reaches the container's feed in several reads, each told once, in order",
          arguments: Replica.Kind.allCases)
    func backlogTold(kind: Replica.Kind) async throws {
        let remote = try Replica(model: Self.model, kind: .sqlite)
        // Six change sets of about 1.5 MB each: 9 MB in all, past one read of the feed (4 MiB).
        for part in 0..<6 { try Self.save(remote, objects: 25, nameLength: 60_000, tag: "b\(part)") }
        let lines = try remote.store.changeSetLines(after: [:], limit: nil)
        #expect(lines.reduce(0) { $0 + $1.utf8.count } > 8 << 20)

        let local = try Replica(model: Self.model, kind: kind)
        try Replica.trustEachOther([remote, local])
        let events = local.container.changes()
        let told = ThreadTaskExecutor.task(named: "ferry-listener") { () -> [Int64] in
            var sequences: [Int64] = []
            for await event in events where event.kind == .storeChangedRemotely {
                sequences.append(event.changeSet?.sequence ?? -1)
                if sequences.count == 6 { break }
            }
            return sequences
        }
        let report = try local.engine.apply(lines: lines)
        #expect(report.applied == 6, "\(report)")
        let (outcome, _) = await BoundedWaiting.outcome(within: .seconds(60)) { await told.value }
        #expect((try? outcome.get()) == [1, 2, 3, 4, 5, 6], "\(outcome)")
        told.cancel()
    }
}
