import Foundation
import Testing
import GRDB
import FerryModel
import FerryStore
@testable import FerrySQLite
import FerryTestSupport

/// A page gives a change set of 1 MiB or more in its stored (compressed) form, made into text a
/// piece at a time as it is read, so that a server sending it to many slow peers does not hold a
/// copy of the whole line for each (docs/RELIABILITY.md, §10).
@Suite("Large change sets are read in pieces")
struct LargeLinePiecesTests {
    static let model = try! ManagedObjectModel {
        Entity("Person") { Attribute("name", .string) }
    }

    /// A store with a small change set (1), a large one (2, about 1.3 MiB of text) and a small one (3).
    func storeWithLargeChangeSet() throws -> (TemporaryDirectory, SQLiteStore) {
        let directory = TemporaryDirectory()
        let store = try SQLiteStore(path: directory.file("large.sqlite"), model: Self.model)
        try store.saveAroundALargeChangeSet()
        return (directory, store)
    }

    func pieces(of line: ChangeSetPage.Line, maximumBytes: Int) throws -> [[UInt8]] {
        var reading = line.pieces()
        var pieces: [[UInt8]] = []
        while let piece = try reading.next(maximumBytes: maximumBytes) {
            pieces.append(piece)
            try #require(pieces.count < 10_000, "no end to the pieces")
        }
        return pieces
    }

    @Test("A change set of 1 MiB or more comes in pieces no larger than asked, which make its line; smaller ones come whole")
    func piecesMakeTheLine() throws {
        let (directory, store) = try storeWithLargeChangeSet()
        defer { withExtendedLifetime(directory) {} }
        let whole = try store.changeSetLines()
        let page = try store.changeSetPage(after: [:], cursor: 0, limit: 10)
        try #require(page.lines.count == 3 && whole.count == 3)
        #expect(whole[1].utf8.count >= StoredBody.piecewiseLength, "\(whole[1].utf8.count) bytes")
        #expect(page.lines[0].text == whole[0] && page.lines[2].text == whole[2])
        let large = page.lines[1]
        #expect(large.text == nil, "the large change set was held whole")
        #expect(large.byteCount == whole[1].utf8.count)
        for maximum in [100_000, 256 << 10, 1 << 22] {
            let pieces = try pieces(of: large, maximumBytes: maximum)
            // Every piece but the last is as large as asked.
            #expect(pieces.dropLast().allSatisfy { $0.count == maximum } && pieces.last.map { !$0.isEmpty && $0.count <= maximum } == true,
                    "\(pieces.map(\.count)) for at most \(maximum)")
            #expect(pieces.flatMap { $0 } == Array(whole[1].utf8))
        }
        #expect(try large.wholeText() == whole[1])
        #expect(try page.texts() == whole)
        // A small line's pieces make it too.
        #expect(try pieces(of: page.lines[0], maximumBytes: 7).flatMap { $0 } == Array(whole[0].utf8))
    }

    @Test("A large change set whose stored form is damaged is a clear error as it is read, not a wrong line",
          arguments: [
            // Cut in the middle.
            ("substr(Z_BODY, 1, length(Z_BODY) / 2)", "ends after"),
            // Its recorded length smaller than what it inflates to.
            ("CAST(x'00100000' || substr(Z_BODY, 5) AS BLOB)", "inflates past"),
            // Its recorded length larger.
            ("CAST(x'7fffffff' || substr(Z_BODY, 5) AS BLOB)", "ends after"),
            // Bytes in the middle overwritten.
            ("CAST(substr(Z_BODY, 1, length(Z_BODY) / 2) || zeroblob(64) || substr(Z_BODY, length(Z_BODY) / 2 + 65) AS BLOB)", "does not inflate"),
            // Its checksum (the stream's last 4 bytes) cut off: every byte of the text is there, unchecked.
            ("substr(Z_BODY, 1, length(Z_BODY) - 4)", "ends before its checksum"),
          ])
    func damaged(_ damage: (sql: String, error: String)) throws {
        let (directory, store) = try storeWithLargeChangeSet()
        defer { withExtendedLifetime(directory) {} }
        try store.write { db in try db.execute(sql: "UPDATE Z_FERRY_CHANGESET SET Z_BODY = \(damage.sql) WHERE Z_SEQ = 2") }
        let large = try store.changeSetPage(after: [:], cursor: 0, limit: 10).lines[1]
        #expect(large.text == nil)
        do {
            _ = try pieces(of: large, maximumBytes: 256 << 10)
            Issue.record("read a damaged change set's pieces")
        } catch let error as LinePiecesError {
            #expect(error.description.contains(damage.error) && error.description.contains("the store file is damaged"), "\(error)")
        }
        #expect(throws: LinePiecesError.self) { try large.wholeText() }
    }

    @Test("Randomly damaged stored forms (bytes flipped, cut, grown) read as the line or as an error, never as another line")
    func randomDamage() throws {
        let (directory, store) = try storeWithLargeChangeSet()
        defer { withExtendedLifetime(directory) {} }
        let line = Array(try store.changeSetLines()[1].utf8)
        let stored = try store.read { db in try Data.fetchOne(db, sql: "SELECT Z_BODY FROM Z_FERRY_CHANGESET WHERE Z_SEQ = 2") }
        let original = try #require(stored)
        var random = SeededGenerator(seed: 20_261_129)
        // Per kind of damage: how many rounds read as the line, how many were refused.
        var read = [0, 0, 0, 0]
        var refused = [0, 0, 0, 0]
        for round in 0..<200 {
            let kind = round % 4
            var damaged = [UInt8](original)
            switch kind {
            case 0:  // a few bytes flipped anywhere, the length header and the zlib trailer included
                for _ in 0..<Int.random(in: 1...4, using: &random) {
                    damaged[Int.random(in: 0..<damaged.count, using: &random)] ^= UInt8.random(in: 1...255, using: &random)
                }
            case 1:  // cut anywhere after the length header
                damaged.removeLast(Int.random(in: 1..<(damaged.count - 4), using: &random))
            case 2:  // bytes added at the end
                damaged += (0..<Int.random(in: 1...64, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }
            default:  // one byte flipped within the zlib trailer (the stream's check of what it inflates to)
                damaged[damaged.count - Int.random(in: 1...4, using: &random)] ^= 0x5A
            }
            do {
                let pieces = try pieces(of: try StoredBody.line(Data(damaged).databaseValue), maximumBytes: 100_000)
                #expect(pieces.flatMap { $0 } == line, "round \(round): a damaged stored form read as another line")
                read[kind] += 1
            } catch {
                #expect(error is LinePiecesError, "round \(round): \(error)")
                refused[kind] += 1
            }
        }
        print("random damage (flipped, cut, grown, trailer): refused \(refused), read as the line \(read)")
        // Every flip and every cut is found, the trailer's check included; bytes after a whole stream are not read.
        #expect(refused[0] == 50 && refused[1] == 50 && refused[3] == 50, "refused \(refused)")
        #expect(read[2] == 50, "read \(read)")
    }
}
