import Foundation
import Testing
import GRDB
import FerryModel
import FerryStore
@testable import FerrySQLite
import FerryTestSupport

/// What a push reads: the change sets that fit one request (`maximumBytes`, always at least one),
/// and none of the others. A push used to read `sync.batch_size` change sets whole (500 by
/// default) and send the few that fit 4 MiB, so a backlog of large change sets was read whole on
/// every round.
@Suite("Reading the change sets of one push")
struct BoundedLineReadTests {
    static let model = try! ManagedObjectModel {
        Entity("Person") { Attribute("name", .string) }
    }

    /// A store with five change sets: small (1), large (2, about 1.3 MiB of text), small (3 and
    /// 4), large (5).
    func storeWithFiveChangeSets() throws -> (TemporaryDirectory, SQLiteStore) {
        let directory = TemporaryDirectory()
        let store = try SQLiteStore(path: directory.file("five.sqlite"), model: Self.model)
        let context = try PersistentContainer(store: store).newContext()
        for size in [1, 12_000, 1, 1, 12_000] {
            for index in 0..<size { try context.make("Person", ["name": "Person number \(index)"]) }
            try context.save()
        }
        return (directory, store)
    }

    @Test("The lines that fit the bound, a newline after each, in order; always the first, however large")
    func bound() throws {
        let (directory, store) = try storeWithFiveChangeSets()
        defer { withExtendedLifetime(directory) {} }
        let all = try store.changeSetLines()
        try #require(all.count == 5)
        let sizes = all.map { $0.utf8.count + 1 }
        func read(_ maximumBytes: Int, after vector: VersionVector = [:], limit: Int? = nil) throws -> [String] {
            try store.changeSetPage(after: vector, cursor: 0, limit: limit ?? Int.max, maximumBytes: maximumBytes).texts()
        }
        #expect(try read(sizes[0] + sizes[1]) == Array(all[0..<2]), "exactly two lines' bytes")
        #expect(try read(sizes[0] + sizes[1] - 1) == [all[0]], "one byte short of two lines")
        #expect(try read(1) == [all[0]], "the first goes even past the bound")
        #expect(try read(1, after: [store.identifier: 1]) == [all[1]], "a large first line goes alone")
        #expect(try read(sizes.reduce(0, +)) == all)
        #expect(try read(1 << 30, limit: 3) == Array(all[0..<3]), "the count's limit holds too")
        #expect(try read(sizes[2] + sizes[3] + sizes[4] - 1, after: [store.identifier: 2]) == Array(all[2..<4]))
        #expect(try read(1 << 30, after: [store.identifier: 5]).isEmpty)
    }

    @Test("The change sets past the bound are not read: one damaged in the store does not fail the read of those before it")
    func pastTheBoundNotRead() throws {
        let (directory, store) = try storeWithFiveChangeSets()
        defer { withExtendedLifetime(directory) {} }
        let all = try store.changeSetLines()
        try #require(all.count == 5)
        // The last change set's stored form cut in half: inflating it fails.
        try store.write { db in try db.execute(sql: "UPDATE Z_FERRY_CHANGESET SET Z_BODY = substr(Z_BODY, 1, length(Z_BODY) / 2) WHERE Z_SEQ = 5") }
        #expect(throws: (any Error).self, "the damage is not met by a whole read") { try store.changeSetLines() }
        let bounded = all[0..<4].reduce(0) { $0 + $1.utf8.count + 1 }
        #expect(try store.changeSetPage(after: [:], cursor: 0, limit: Int.max, maximumBytes: bounded).texts() == Array(all[0..<4]))
    }
}
