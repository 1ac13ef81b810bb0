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

    func fileSize(_ path: String) -> Int {
        ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int) ?? -1
    }

    func count(_ store: SQLiteStore) throws -> Int {
        try store.count(FetchRequest(entityName: "Person"))
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
        let directory = TemporaryDirectory()
        let path = directory.file("store.sqlite")
        let store = try SQLiteStore(path: path, model: Self.model)
        let before = fileSize(path + "-wal")
        #expect(before < Self.preallocatedBytes)

        let added = try store.preallocateLog()
        #expect(added == Int64(Self.preallocatedBytes - before))
        #expect(fileSize(path + "-wal") == Self.preallocatedBytes)
        #expect(try store.preallocateLog() == 0, "a log that large already is left as it is")

        let context = try PersistentContainer(store: store).newContext()
        for id in 0..<40 {
            try context.make("Person", ["id": Int64(id), "name": "Person \(id)"])
            try context.save()
        }
        // The commits went into the zeros: the file did not grow.
        #expect(fileSize(path + "-wal") == Self.preallocatedBytes)
        #expect(try count(store) == 40)
        let image = try crashImage(of: path, in: directory)
        #expect(try count(image) == 40, "the log's frames were read up to the zeros")
        #expect(try image.changeSetLines().count == 40)
    }

    @Test("Given while another connection saves in a loop: every save is kept, and a crash image holds them all")
    func extendsWhileAnotherConnectionSaves() async throws {
        let directory = TemporaryDirectory()
        let path = directory.file("shared.sqlite")
        let writerStore = try SQLiteStore(path: path, model: Self.model)
        let otherStore = try SQLiteStore(path: path, model: Self.model)
        let saves = 150
        let writer = Task.detached {
            let context = try PersistentContainer(store: writerStore).newContext()
            for id in 0..<saves {
                try context.make("Person", ["id": Int64(id), "name": "Saved \(id)"])
                try context.save()
            }
        }
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
        let directory = TemporaryDirectory()
        let path = directory.file("restart.sqlite")
        let store = try SQLiteStore(path: path, model: Self.model)
        try store.preallocateLog()
        let context = try PersistentContainer(store: store).newContext()
        for id in 0..<20 {
            try context.make("Person", ["id": Int64(id), "name": "Before \(id)"])
            try context.save()
        }
        try store.checkpoint()
        for id in 20..<30 {
            try context.make("Person", ["id": Int64(id), "name": "After \(id)"])
            try context.save()
        }
        #expect(fileSize(path + "-wal") == Self.preallocatedBytes)
        #expect(try count(try crashImage(of: path, in: directory)) == 30)
    }

    @Test("A store opened read-only gives nothing and writes nothing")
    func readOnlyStore() throws {
        let directory = TemporaryDirectory()
        let path = directory.file("readonly.sqlite")
        let writable = try SQLiteStore(path: path, model: Self.model)
        let before = fileSize(path + "-wal")
        let readOnly = try SQLiteStore(path: path, model: Self.model, options: .init(readOnly: true))
        #expect(try readOnly.preallocateLog() == 0)
        #expect(fileSize(path + "-wal") == before)
        _ = writable
    }

    @Test("A log that cannot be written is an error naming the log, with its cause")
    func unwritableLog() throws {
        let directory = TemporaryDirectory()
        let path = directory.file("gone.sqlite")
        let store = try SQLiteStore(path: path, model: Self.model)
        // The log's name made a folder's: opening it for writing fails (EISDIR), whoever runs the test.
        try FileManager.default.removeItem(atPath: path + "-wal")
        try FileManager.default.createDirectory(atPath: path + "-wal", withIntermediateDirectories: false)
        defer { try? FileManager.default.removeItem(atPath: path + "-wal") }
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
