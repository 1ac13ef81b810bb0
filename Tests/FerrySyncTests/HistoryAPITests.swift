import Foundation
import Testing
import FerryTestTraits
import FerryModel
import FerryStore
import FerrySQLite
import FerryTestSupport

@Suite("History API: updates as they happen, and purging", .blocking)
struct HistoryAPITests {
    static let model = try! SampleModels.load("OrgChart")

    @Test("The update sequence yields the backlog, then saves of this process, of another store handle, and of another process")
    func updates() async throws {
        let directory = TemporaryDirectory()
        let path = directory.file("live.sqlite")
        let store = try SQLiteStore(path: path, model: Self.model)
        let context = try PersistentContainer(store: store).newContext()
        try context.make("Person", ["id": Int64(1)])
        try context.save()

        let reader = Task {
            var seen: [Int64] = []
            for try await changeSet in store.changeSetUpdates() {
                seen.append(changeSet.sequence)
                if seen.count == 4 { break }
            }
            return seen
        }
        try await Task.sleep(for: .milliseconds(100))
        try context.make("Person", ["id": Int64(2)])
        try context.save()
        let other = try SQLiteStore(path: path, model: Self.model)
        let otherContext = try PersistentContainer(store: other).newContext()
        try otherContext.make("Person", ["id": Int64(3)])
        try otherContext.save()
        let put = try FerryProcess.run(["put", "--store", path, "--model", SampleModels.path("OrgChart"), "-"],
                                       input: #"[{"op":"insert","entity":"Person","values":{"id":4}}]"#)
        #expect(put.status == 0, "\(put.standardError)")
        let watchdog = Task {
            try await Task.sleep(for: .seconds(20))
            reader.cancel()
        }
        let seen = try await reader.value
        watchdog.cancel()
        #expect(seen == [1, 2, 3, 4])
    }

    @Test("Purging keeps what some peer lacks, keeps the vector, and refuses to serve what is gone")
    func purge() throws {
        let directory = TemporaryDirectory()
        let store = try SQLiteStore(path: directory.file("p.sqlite"), model: Self.model)
        let context = try PersistentContainer(store: store).newContext()
        for id in 1...3 {
            try context.make("Person", ["id": Int64(id)])
            try context.save()
        }
        let me = store.identifier
        #expect(try store.purgeChangeSets(acknowledgedBy: [[me: 2], [me: 3]]) == 2, "both peers have 1 and 2")
        #expect(try store.changeSetLines(after: [me: 2]).count == 1)
        #expect(try store.historyState().vector == [me: 3], "the vector survives the purge")
        #expect(throws: HistoryError.purged(origin: me, needed: 1, purgedThrough: 2)) { try store.changeSetLines(after: [:]) }
        #expect(try store.purgeChangeSets(acknowledgedBy: []) == 0, "no peers listed: nothing is purged")
        try context.make("Person", ["id": Int64(4)])
        try context.save()
        #expect(try store.changeSets(after: [me: 3]).map(\.sequence) == [4], "sequence numbers go on without a gap")
    }
}
