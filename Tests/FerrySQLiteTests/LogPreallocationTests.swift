import Foundation
import Testing
import FerryModel
import FerryStore
@testable import FerrySQLite
import FerryTestSupport

/// `SQLiteStore.preallocateLog()`: the write-ahead log is given its working size in
/// zeros up front, and stays a log SQLite reads exactly as before, whoever writes.
@Suite("Write-ahead log given its size up front")
struct LogPreallocationTests {
    static let model = try! SampleModels.load("OrgChart")
    /// The log's size once given: its header, then the frames (a 24-byte header and a 4 KiB page each).
    static let preallocatedBytes = 32 + LogPreallocation.frames * (24 + 4096)

    func fileSize(_ path: String) -> Int { SQLiteStore.fileSize(path) }

    func count(_ store: SQLiteStore) throws -> Int {
        try store.count(FetchRequest(entityName: "Person"))
    }

    /// A new store in a folder of its own (removed when `directory` goes).
    func newStore(_ name: String) throws -> (directory: TemporaryDirectory, path: String, store: SQLiteStore) {
        let directory = TemporaryDirectory()
        let path = directory.file(name)
        return (directory, path, try SQLiteStore(path: path, model: Self.model))
    }

    /// One save per number in `ids`, each inserting one person.
    func savePeople(_ ids: Range<Int>, named prefix: String, in store: SQLiteStore) throws {
        let context = try PersistentContainer(store: store).newContext()
        for id in ids {
            try context.make("Person", ["id": Int64(id), "name": "\(prefix) \(id)"])
            try context.save()
        }
    }

    /// The log header's two salts: SQLite changes them each time the log starts again from its beginning.
    func logSalts(_ path: String) throws -> Data {
        let header = try Data(contentsOf: URL(fileURLWithPath: path + "-wal")).prefix(24)
        return header.suffix(8)
    }

    /// Copies the store's file and its log as a power cut would leave them (no `-shm`: SQLite
    /// rebuilds the index from the log), and opens the copy.
    func crashImage(of path: String, in directory: TemporaryDirectory) throws -> SQLiteStore {
        let copy = directory.file("image-\(UUID().uuidString).sqlite")
        try FileManager.default.copyItem(atPath: path, toPath: copy)
        try FileManager.default.copyItem(atPath: path + "-wal", toPath: copy + "-wal")
        return try SQLiteStore(path: copy, model: Self.model, options: .init(createIfMissing: false))
    }

    @Test("A fresh log is given its working size in zeros, once; saves after it are all there, in the store and in a crash image")
    func extendsFreshLog() throws {
        let (directory, path, store) = try newStore("store.sqlite")
        let before = fileSize(path + "-wal")
        #expect(before < Self.preallocatedBytes)

        let added = try store.preallocateLog()
        #expect(added == Int64(Self.preallocatedBytes - before))
        #expect(fileSize(path + "-wal") == Self.preallocatedBytes)
        #expect(try store.preallocateLog() == 0, "a log that large already is left as it is")

        try savePeople(0..<40, named: "Person", in: store)
        // The commits went into the zeros: the file did not grow.
        #expect(fileSize(path + "-wal") == Self.preallocatedBytes)
        #expect(try count(store) == 40)
        let image = try crashImage(of: path, in: directory)
        #expect(try count(image) == 40, "the log's frames were read up to the zeros")
        #expect(try image.changeSetLines().count == 40)
    }

    @Test("Given while another connection saves in a loop: every save is kept, and a crash image holds them all")
    func extendsWhileAnotherConnectionSaves() async throws {
        let (directory, path, writerStore) = try newStore("shared.sqlite")
        let otherStore = try SQLiteStore(path: path, model: Self.model)
        let saves = 150
        let writer = Task.detached { try savePeople(0..<saves, named: "Saved", in: writerStore) }
        // (Given part way through the loop, or before or after it on a slow machine: each is sound.)
        try await Task.sleep(for: .milliseconds(20))
        _ = try otherStore.preallocateLog()
        try await writer.value

        #expect(fileSize(path + "-wal") >= Self.preallocatedBytes)
        #expect(try count(otherStore) == saves)
        #expect(try count(try crashImage(of: path, in: directory)) == saves)
    }

    @Test("After a checkpoint the log starts again inside the zeros; a crash image holds the saves from before and after")
    func logRestartsInsideTheZeros() throws {
        let (directory, path, store) = try newStore("restart.sqlite")
        try store.preallocateLog()
        try savePeople(0..<20, named: "Before", in: store)
        let salts = try logSalts(path)
        try store.checkpoint()
        try savePeople(20..<30, named: "After", in: store)
        #expect(try logSalts(path) != salts, "the log did not start again after the checkpoint")
        #expect(fileSize(path + "-wal") == Self.preallocatedBytes)
        #expect(try count(try crashImage(of: path, in: directory)) == 30)
    }

    @Test("A store opened read-only gives nothing and writes nothing")
    func readOnlyStore() throws {
        let (directory, path, writable) = try newStore("readonly.sqlite")
        let before = fileSize(path + "-wal")
        let readOnly = try SQLiteStore(path: path, model: Self.model, options: .init(readOnly: true))
        #expect(try readOnly.preallocateLog() == 0)
        #expect(fileSize(path + "-wal") == before)
        _ = (directory, writable)  // (the writer's store, and its folder, kept to the end)
    }

    @Test("A log that cannot be written is an error naming the log, with its cause")
    func unwritableLog() throws {
        let (directory, path, store) = try newStore("gone.sqlite")
        // The log's name made a folder's: opening it for writing fails (EISDIR), whoever runs the test.
        try FileManager.default.removeItem(atPath: path + "-wal")
        try FileManager.default.createDirectory(atPath: path + "-wal", withIntermediateDirectories: false)
        defer {
            try? FileManager.default.removeItem(atPath: path + "-wal")
            _ = directory  // (the folder kept to the end)
        }
        do {
            try store.preallocateLog()
            Issue.record("a log that is a folder was preallocated")
        } catch let error {
            guard case .storeFailure(let failure) = error else {
                Issue.record("unexpected error \(error)")
                return
            }
            #expect(failure.message.contains(path + "-wal") && failure.message.contains("directory"), "\(failure.message)")
            #expect(failure.cause is POSIXError)
        }
    }
}
