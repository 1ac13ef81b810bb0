import Foundation
import Testing
import FerryModel
import FerryStore
import FerryTestSupport

/// The in-memory store is a ``ReplicaStore``: it records each save as a change set of
/// its own, and keeps the vector, pages, held change sets and purges as `SQLiteStore`
/// does. (Replays into it are checked with the merge-rule and convergence tests.)
@Suite("In-memory store history")
struct InMemoryHistoryTests {
    static let model = try! SampleModels.load("OrgChart")

    @Test("Each save with recorded changes becomes the next change set of the store; a save of nothing records nothing")
    func savesAreRecorded() throws {
        let store = InMemoryStore(model: Self.model)
        let context = try PersistentContainer(store: store).newContext()
        let ann = try context.make("Person", ["name": "Ann"])
        try context.save()
        try ann.setValue("Anna", forKey: "name")
        try context.save()
        try context.save()
        context.delete(ann)
        try context.save()
        #expect(try store.historyState().vector == [store.identifier: 3])
        let changeSets = try store.changeSetLines(after: [:], limit: nil).map { line -> ChangeSet in
            guard case .changeSet(let changeSet) = try ChangeSetCodec.decode(line, model: Self.model, versionHash: store.modelVersionHash) else {
                throw ChangeSetError.malformed("made with another model")
            }
            return changeSet
        }
        #expect(changeSets.map(\.sequence) == [1, 2, 3])
        #expect(changeSets.map { $0.changes.map(\.kind) } == [[.insert], [.update], [.delete]])
        #expect(changeSets[1].changes.first?.values == ["name": .attribute(.string("Anna"))])
        #expect(changeSets[2].changes.first?.values["name"] == .attribute(.string("Anna")), "a delete carries the last values")
        #expect(try store.isBuried(changeSets[0].changes[0].uri))
        #expect(try store.changeSetLines(after: [store.identifier: 2], limit: nil).count == 1)
    }

    @Test("Pages go on from their cursor; purged change sets are refused to a peer that still needs them")
    func pagesAndPurge() throws {
        let store = InMemoryStore(model: Self.model)
        let context = try PersistentContainer(store: store).newContext()
        for name in ["A", "B", "C", "D", "E"] {
            try context.make("Person", ["name": name])
            try context.save()
        }
        let first = try store.changeSetPage(after: [:], cursor: 0, limit: 2)
        let second = try store.changeSetPage(after: [:], cursor: first.cursor, limit: 2)
        let (firstLines, secondLines) = (try first.texts(), try second.texts())
        #expect(firstLines.count == 2 && secondLines.count == 2 && Set(firstLines).isDisjoint(with: secondLines))
        #expect(try store.purgeChangeSets(acknowledgedBy: [[store.identifier: 3], [store.identifier: 4]]) == 3)
        #expect(throws: HistoryError.purged(origin: store.identifier, needed: 1, purgedThrough: 3)) {
            try store.changeSetLines(after: [:], limit: nil)
        }
        #expect(try store.changeSetLines(after: [store.identifier: 3], limit: nil).count == 2)
    }

    @Test("A push's read takes the lines that fit its bytes, a newline after each, and always the first")
    func boundedRead() throws {
        let store = InMemoryStore(model: Self.model)
        let context = try PersistentContainer(store: store).newContext()
        for name in ["A", "B", "C", String(repeating: "D", count: 5_000), "E"] {
            try context.make("Person", ["name": name])
            try context.save()
        }
        let all = try store.changeSetLines(after: [:], limit: nil)
        try #require(all.count == 5)
        let sizes = all.map { $0.utf8.count + 1 }
        func read(_ maximumBytes: Int, after vector: VersionVector = [:]) throws -> [String] {
            try store.changeSetPage(after: vector, cursor: 0, limit: Int.max, maximumBytes: maximumBytes).texts()
        }
        #expect(try read(sizes[0] + sizes[1]) == Array(all[0..<2]))
        #expect(try read(sizes[0] + sizes[1] - 1) == [all[0]])
        #expect(try read(1) == [all[0]])
        #expect(try read(1, after: [store.identifier: 3]) == [all[3]], "a large first line goes alone")
        #expect(try read(sizes[2] + sizes[3] - 1, after: [store.identifier: 2]) == [all[2]])
        #expect(try read(1 << 30) == all)
    }

    @Test("Held change sets are kept in origin and sequence order until released")
    func held() throws {
        let store = InMemoryStore(model: Self.model)
        let origin = UUID()
        try store.hold(HeldChangeSet(origin: origin, sequence: 3, reason: "waiting", body: "{3}"))
        try store.hold(HeldChangeSet(origin: origin, sequence: 2, reason: "waiting", body: "{2}"))
        #expect(try store.heldChangeSets().map(\.sequence) == [2, 3])
        try store.release(origin: origin, sequence: 2)
        #expect(try store.heldChangeSets().map(\.body) == ["{3}"])
    }

    @Test("commits() signals after a save")
    func commitSignal() async throws {
        let store = InMemoryStore(model: Self.model)
        var signals = store.commits().makeAsyncIterator()
        let context = try PersistentContainer(store: store).newContext()
        try context.make("Person", ["name": "Ann"])
        try context.save()
        #expect(await signals.next() != nil)
    }
}
