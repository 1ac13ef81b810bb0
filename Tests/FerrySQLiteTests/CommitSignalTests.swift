import Foundation
import Synchronization
import Testing
import FerryTestTraits
import FerryModel
import FerryStore
import FerrySQLite
import FerryTestSupport

/// `SQLiteStore.commits()`: a signal after each commit, from this store, from another
/// connection, or from another process on the same file — without polling the store.
@Suite("Commit signals", .blocking)
struct CommitSignalTests {
    /// Counts the signals of one subscription, from a task of its own on the `.blocking` trait's
    /// threads (a full run once kept the cooperative pool busy past the tests' 10-second bound).
    final class Listener: Sendable {
        private final class Count: Sendable { let value = Atomic<Int>(0) }
        private let count = Count()
        private let task: Task<Void, Never>

        init(_ store: SQLiteStore) {
            let stream = store.commits()
            let count = self.count
            task = BlockingTrait.task {
                for await _ in stream { count.value.add(1, ordering: .relaxed) }
            }
        }

        var signals: Int { count.value.load(ordering: .relaxed) }

        /// Waits up to `seconds` for at least `expected` signals; returns the count then.
        func wait(for expected: Int, seconds: Double = 10) async -> Int {
            let deadline = Date().addingTimeInterval(seconds)
            while signals < expected, Date() < deadline { try? await Task.sleep(for: .milliseconds(5)) }
            return signals
        }

        deinit { task.cancel() }
    }

    /// A store file in a new folder, opened twice: one store to watch, one container that writes.
    static func twoConnections() throws -> (TemporaryDirectory, SQLiteStore, PersistentContainer) {
        let directory = TemporaryDirectory()
        let path = directory.file("shared.sqlite")
        let model = try SampleModels.load("OrgChart")
        return (directory, try SQLiteStore(path: path, model: model), try PersistentContainer(store: SQLiteStore(path: path, model: model)))
    }

    @Test("A save through the store itself signals its subscribers")
    func ownSave() async throws {
        let directory = TemporaryDirectory()
        let store = try SQLiteStore(path: directory.file("a.sqlite"), model: try SampleModels.load("OrgChart"))
        let listener = Listener(store)
        let context = try PersistentContainer(store: store).newContext()
        try context.make("Person", ["name": "John"])
        try context.save()
        #expect(await listener.wait(for: 1) >= 1)
    }

    @Test("A commit by another connection on the same file signals, and reads alone do not")
    func otherConnection() async throws {
        let (directory, watched, other) = try Self.twoConnections()
        defer { withExtendedLifetime(directory) {} }
        let listener = Listener(watched)
        // Reads by either store touch no -wal frames and must not wake anyone.
        for _ in 0..<20 { _ = try other.newContext().count(for: FetchRequest(entityName: "Person")) }
        _ = try watched.historyState()
        try await Task.sleep(for: .milliseconds(300))
        #expect(listener.signals == 0, "reads were signalled as commits")
        let context = other.newContext()
        try context.make("Person", ["name": "Jane"])
        try context.save()
        #expect(await listener.wait(for: 1) == 1, "the other connection's save was not signalled exactly once")
    }

    @Test("A save by another process (ferry put) on the same file signals")
    func otherProcess() async throws {
        let directory = TemporaryDirectory()
        let path = directory.file("shared.sqlite")
        let modelPath = SampleModels.path("OrgChart")
        let store = try SQLiteStore(path: path, model: try XcodeModelReader.read(at: modelPath))
        let listener = Listener(store)
        let before = listener.signals
        let result = try FerryProcess.run(["put", "--store", path, "--model", modelPath, "-"],
                                          input: #"[{"op":"insert","entity":"Person","ref":"p","values":{"name":"Bill"}}]"#)
        #expect(result.status == 0, "\(result.standardError)")
        #expect(await listener.wait(for: before + 1) > before, "no signal for another process's save")
        #expect(try store.historyState().vector[store.identifier] == 1)
    }

    @Test("Change-set updates follow another connection's saves as they happen")
    func changeSetUpdatesWakeOnCommit() async throws {
        let (directory, reader, writer) = try Self.twoConnections()
        defer { withExtendedLifetime(directory) {} }
        let received = Task.detached { () -> [Int64] in
            var sequences: [Int64] = []
            for try await changeSet in reader.changeSetUpdates() {
                sequences.append(changeSet.sequence)
                if sequences.count == 3 { break }
            }
            return sequences
        }
        for name in ["A", "B", "C"] {
            let context = writer.newContext()
            try context.make("Person", ["name": name])
            try context.save()
            try await Task.sleep(for: .milliseconds(50))
        }
        let timeout = Task.detached {
            try await Task.sleep(for: .seconds(10))
            received.cancel()
        }
        let sequences = try await received.value
        timeout.cancel()
        #expect(sequences == [1, 2, 3])
    }
}
