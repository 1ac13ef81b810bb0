import Foundation
import Testing
import CompressNIO
import NIOCore
import GRDB
import FerryModel
import FerryStore
import FerrySQLite
import FerryTestSupport
@testable import FerrySync

/// A push of a large change set: its body is made from the store's compressed form a piece at a time
/// as it is sent, never as the whole line (docs/RELIABILITY.md, §10).
@Suite("Push bodies made as they are sent")
struct PushBodyTests {
    static let model = try! ManagedObjectModel {
        Entity("Person") { Attribute("name", .string) }
    }

    /// Every piece of one reading of `body`.
    static func pieces(of body: StreamedBody) throws -> [Data] {
        var reading = body.makeReading()
        var pieces: [Data] = []
        while let piece = try reading.next() {
            pieces.append(piece)
            try #require(pieces.count < 10_000, "no end to the pieces")
        }
        return pieces
    }

    static func gunzip(_ pieces: [Data]) throws -> String {
        var packed = ByteBuffer(bytes: pieces.reduce(Data(), +))
        let unpacked = try packed.decompress(with: .gzip())
        return String(decoding: unpacked.readableBytesView, as: UTF8.self)
    }

    @Test("A push body with a large change set unpacks to the lines, a newline after each, sent a piece at a time; each try reads it again")
    func bodyOfALargeChangeSet() throws {
        let directory = TemporaryDirectory()
        let store = try SQLiteStore(path: directory.file("push.sqlite"), model: Self.model)
        try store.saveAroundALargeChangeSet()
        let whole = try store.changeSetLines()
        let page = try store.changeSetPage(after: [:], cursor: 0, limit: 10, maximumBytes: 1 << 30)
        try #require(page.lines.count == 3)
        #expect(page.lines[1].text == nil, "the large change set was read whole")
        let body = PushBody.streamed(page.lines)
        let pieces = try Self.pieces(of: body)
        // 1.3 MiB of text in pieces of 256 KiB of text each: at least six pieces, none empty.
        #expect(pieces.count >= 6 && pieces.allSatisfy { !$0.isEmpty }, "\(pieces.map(\.count))")
        #expect(try Self.gunzip(pieces) == whole.map { $0 + "\n" }.joined())
        // A request sent again (to another URL of the peer) reads the body again from its start.
        #expect(try Self.pieces(of: body) == pieces)
    }

    @Test("A page bounded in bytes holds the first lines that fit, and always the first, on both stores")
    func pageBoundedInBytes() throws {
        let directory = TemporaryDirectory()
        let stores: [any ReplicaStore & PersistentStore] = [try SQLiteStore(path: directory.file("bounded.sqlite"), model: Self.model),
                                                           InMemoryStore(model: Self.model)]
        for store in stores {
            try store.saveAroundALargeChangeSet()
            let whole = try store.changeSetLines(after: [:], limit: nil)
            let sizes = whole.map { $0.utf8.count + 1 }
            func count(_ maximumBytes: Int?) throws -> Int {
                try store.changeSetPage(after: [:], cursor: 0, limit: 10, maximumBytes: maximumBytes).lines.count
            }
            #expect(try count(1) == 1)
            #expect(try count(sizes[0] + sizes[1] - 1) == 1)
            #expect(try count(sizes[0] + sizes[1]) == 2)
            #expect(try count(nil) == 3)
            // From the large one on: it alone, however small the bound.
            let cursor = try store.changeSetPage(after: [:], cursor: 0, limit: 1).cursor
            let rest = try store.changeSetPage(after: [:], cursor: cursor, limit: 10, maximumBytes: 10)
            #expect(rest.lines.count == 1 && rest.lines[0].byteCount == sizes[1] - 1)
        }
    }

    @Test("A large change set damaged in the store fails the push body's reading with the store's error, not a body cut short in silence")
    func damagedLargeChangeSet() throws {
        let directory = TemporaryDirectory()
        let store = try SQLiteStore(path: directory.file("damaged.sqlite"), model: Self.model)
        try store.saveAroundALargeChangeSet()
        // (Damaged through a connection of its own, as a failing disk would leave it.)
        try DatabaseQueue(path: directory.file("damaged.sqlite")).write { db in
            try db.execute(sql: "UPDATE Z_FERRY_CHANGESET SET Z_BODY = substr(Z_BODY, 1, length(Z_BODY) / 2) WHERE Z_SEQ = 2")
        }
        let page = try store.changeSetPage(after: [:], cursor: 0, limit: 10)
        var reading = PushBody.streamed(page.lines).makeReading()
        var sent = 0
        do {
            while let piece = try reading.next() {
                sent += 1
                try #require(sent < 100)
                _ = piece
            }
            Issue.record("a damaged change set made a whole push body")
        } catch let error as LinePiecesError {
            #expect(error.description.contains("the store file is damaged"), "\(error)")
        }
        // Some pieces went before the damage was met: the peer sees a body that does not unpack, and applies nothing.
        #expect(sent >= 1)
    }
}
