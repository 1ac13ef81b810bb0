import Foundation
import Testing
import GRDB
import FerryModel
import FerryStore
@testable import FerrySQLite
import FerryTestSupport

/// Every save records one change set, in the save's transaction.
@Suite("Change sets are recorded on every save")
struct ChangeRecordingTests {
    static let model = try! ManagedObjectModel {
        Entity("Person") {
            Attribute("name", .string)
            Attribute("age", .integer16)
            Attribute("scratch", .string, transient: true)
            Relationship("manager", to: "Person", inverse: "reports")
            Relationship("reports", to: "Person", inverse: "manager", toMany: true)
            Relationship("desk", to: "Desk", inverse: "owner")
            Relationship("clubs", to: "Club", inverse: "members", toMany: true)
        }
        Entity("Desk") { Attribute("number", .integer32); Relationship("owner", to: "Person", inverse: "desk") }
        Entity("Club") { Attribute("title", .string); Relationship("members", to: "Person", inverse: "clubs", toMany: true) }
    }

    func open() throws -> (TemporaryDirectory, SQLiteStore, PersistentContainer) {
        let directory = TemporaryDirectory()
        let store = try SQLiteStore(path: directory.file("h.sqlite"), model: Self.model)
        return (directory, store, try PersistentContainer(store: store))
    }

    @Test("Insert, update and delete each record their change set: sequence, clock, author, model, values")
    func recording() throws {
        let (directory, store, container) = try open()
        defer { withExtendedLifetime(directory) {} }
        let context = container.newContext()
        context.transactionAuthor = "importer"
        context.name = "main"
        let boss = try context.make("Person", ["name": "Ann", "age": Int16(50), "scratch": "never recorded"])
        let bob = try context.make("Person", ["name": "Bob", "manager": boss])
        let desk = try context.make("Desk", ["number": Int32(7), "owner": bob])
        let club = try context.make("Club", ["title": "Chess"])
        try club.setValue(Set([bob, boss]), forKey: "members")
        try context.save()

        var sets = try store.changeSets()
        try #require(sets.count == 1)
        let first = sets[0]
        #expect(first.origin == store.identifier && first.sequence == 1)
        #expect(first.author == "importer" && first.contextName == "main")
        #expect(first.modelHash == Self.model.versionHash)
        #expect(first.changes.map(\.kind) == [.insert, .insert, .insert, .insert])
        let byURI = Dictionary(uniqueKeysWithValues: first.changes.map { ($0.uri, $0) })
        let ann = try #require(byURI[boss.objectID.uriString])
        #expect(ann.values == ["name": .attribute(.string("Ann")), "age": .attribute(.integer(50))], "no transient, no nil, no to-many side")
        #expect(byURI[bob.objectID.uriString]?.values["manager"] == .object(boss.objectID.uriString))
        // One-to-one: recorded on one side only (Desk.owner sorts before Person.desk).
        #expect(byURI[desk.objectID.uriString]?.values["owner"] == .object(bob.objectID.uriString))
        #expect(byURI[bob.objectID.uriString]?.values["desk"] == nil)
        // Many-to-many: recorded on the side that owns the join table (Club.members sorts before Person.clubs).
        #expect(Set(byURI[club.objectID.uriString]?.added["members"] ?? []) == Set([bob.objectID.uriString, boss.objectID.uriString]))
        #expect(byURI[bob.objectID.uriString]?.added.isEmpty == true)

        try bob.setValue("Robert", forKey: "name")
        try bob.setValue("scratch only", forKey: "scratch")
        try context.save()
        try boss.setValue("scratch only", forKey: "scratch")
        try context.save()  // only a transient changed: nothing to record
        context.delete(bob)
        try context.save()

        sets = try store.changeSets()
        try #require(sets.count == 3)
        #expect(sets.map(\.sequence) == [1, 2, 3])
        #expect(sets[0].timestamp < sets[1].timestamp && sets[1].timestamp < sets[2].timestamp)
        #expect(sets[1].changes == [ObjectChange(kind: .update, uri: bob.objectID.uriString, entity: "Person",
                                                 values: ["name": .attribute(.string("Robert"))])])
        // The delete: Bob's tombstone with his last values; nullify updates of the desk and the club's membership.
        let delete = try #require(sets[2].changes.first { $0.kind == .delete })
        #expect(delete.uri == bob.objectID.uriString)
        #expect(delete.values == ["name": .attribute(.string("Robert")), "manager": .object(boss.objectID.uriString)])
        #expect(sets[2].changes.contains { $0.kind == .update && $0.uri == desk.objectID.uriString && $0.values["owner"] == .null })
        #expect(sets[2].changes.contains { $0.kind == .update && $0.uri == club.objectID.uriString && $0.removed["members"] == [bob.objectID.uriString] })
        // What the store wrote is canonical: decoding and encoding again gives the same bytes.
        for line in try store.changeSetLines() {
            guard case .changeSet(let decoded) = try ChangeSetCodec.decode(line, model: Self.model) else {
                Issue.record("not decodable with the store's model: \(line)")
                continue
            }
            #expect(ChangeSetCodec.encode(decoded) == line)
        }
        // A short body is stored as TEXT (bound from the writer's bytes), with non-ASCII intact; a long
        // one as a BLOB of its zlib stream, much smaller, and read back exactly.
        let zoë = try context.make("Person", ["name": "Zoë 🐘 \u{301}"])
        try context.save()
        for index in 0..<200 { try context.make("Person", ["name": "Person \(index) 🐘"]) }
        try context.save()
        let stored = try store.read { db in
            try Row.fetchAll(db, sql: "SELECT typeof(Z_BODY) AS kind, Z_BODY AS body, length(Z_BODY) AS size FROM Z_FERRY_CHANGESET ORDER BY Z_SEQ")
        }
        let lines = try store.changeSetLines()
        #expect(stored.map { $0["kind"] as String } == lines.map { $0.utf8.count >= 512 ? "blob" : "text" })
        #expect(stored[3]["kind"] == "text" && stored[4]["kind"] == "blob")
        let short = try #require(stored[3]["body"] as String?)
        #expect(short.contains("\"Zoë 🐘 \u{301}\""), "\(short)")
        #expect(lines[3] == short)
        let long = try #require(lines.last)
        #expect(long.contains("\"Person 199 🐘\"") && long.utf8.count > 5 * (stored[4]["size"] as Int),
                "\(long.utf8.count) bytes stored in \(stored[4]["size"] as Int)")
        #expect(try store.changeSets().dropLast().last?.changes.first?.uri == zoë.objectID.uriString)
        #expect(try store.changeSets().last?.changes.count == 200)
    }

    @Test("A body compressed in two steps (its beginning ahead of the transaction) reads back as the one text; a body not the prefix's is left to one step")
    func twoStepCompression() throws {
        // Half incompressible (so the stream outgrows any first guess of its size), half repetitive.
        var generator = SystemRandomNumberGenerator()
        let noise = (0..<40_000).map { _ in "0123456789abcdef".randomElement(using: &generator) ?? "0" }
        let body = Array(("{\"changes\":[\"" + String(noise) + "\"," + (0..<3_000).map { "{\"n\":\($0)}" }.joined(separator: ",") + "],\"seq\":7}").utf8)
        let prefixLength = body.count - 9
        let compressed = try body.withUnsafeBufferPointer { try CompressedPrefix(UnsafeBufferPointer(rebasing: $0[..<prefixLength])) }
        let prefix = try #require(compressed)
        let stored = try #require(try body.withUnsafeBufferPointer { try prefix.finish($0) })
        #expect(stored.count < body.count / 2)
        #expect(try StoredBody.text(Data(stored).databaseValue) == String(decoding: body, as: UTF8.self))
        // Shorter than the prefix: not this body.
        let other = try #require(try body.withUnsafeBufferPointer { try CompressedPrefix(UnsafeBufferPointer(rebasing: $0[..<prefixLength])) })
        #expect(try body.withUnsafeBufferPointer { try other.finish(UnsafeBufferPointer(rebasing: $0[..<100])) } == nil)
        // A prefix too short to be worth compressing is not.
        #expect(try body.withUnsafeBufferPointer { try CompressedPrefix(UnsafeBufferPointer(rebasing: $0[..<100])) } == nil)
    }

    @Test("A large body reads back whole, compressed in one step and in two; the stored form grows with the stream, not with the body")
    func largeBodyCompression() throws {
        // About 3.2 MB: repetitive text with a run of noise every 100 objects.
        var generator = SystemRandomNumberGenerator()
        let objects = (0..<40_000).map { index in
            let noise = index % 100 == 0 ? String((0..<300).map { _ in "0123456789abcdef".randomElement(using: &generator) ?? "0" }) : ""
            return "{\"uri\":\"x-coredata://A/Person/p\(index)\",\"values\":{\"name\":\"Person \(index) 🐘\(noise)\"}}"
        }
        let body = Array(("{\"changes\":[" + objects.joined(separator: ",") + "],\"seq\":7}").utf8)
        let text = String(decoding: body, as: UTF8.self)
        #expect(body.count > 12 * ZlibDeflater.outputChunk, "\(body.count) bytes")

        let oneStep = try #require(try body.withUnsafeBufferPointer { try StoredBody.compressed($0) })
        #expect(try StoredBody.text(Data(oneStep).databaseValue) == text)
        #expect(oneStep.count < body.count / 4, "\(oneStep.count) of \(body.count) bytes")
        // A prefix that ends inside one of zlib's output chunks, and a tail of several.
        let prefixLength = 5 * ZlibDeflater.outputChunk + 12_345
        let prefix = try #require(try body.withUnsafeBufferPointer { try CompressedPrefix(UnsafeBufferPointer(rebasing: $0[..<prefixLength])) })
        let twoSteps = try #require(try body.withUnsafeBufferPointer { try prefix.finish($0) })
        #expect(twoSteps == oneStep, "two steps make the stream one step makes")

        // The stored form grows by doubling as zlib writes, not by a bound on the body's size made first.
        #expect(oneStep.capacity <= 2 * oneStep.count + ZlibDeflater.outputChunk && oneStep.capacity < body.count / 2,
                "\(oneStep.capacity) bytes held for a stored form of \(oneStep.count) from \(body.count)")
    }

    @Test("A stored body is a standard zlib stream at the fastest level: what stores written with compress-nio hold reads back")
    func storedFormIsStandardZlib() throws {
        // The form the store wrote through compress-nio (zlib level 1, 32 KB window, memory level 8):
        // the length (600, big-endian), then the stream of 600 × "a" (as Python's zlib.compress(b"a" * 600, 1)).
        let earlier: [UInt8] = [0, 0, 0x02, 0x58, 0x78, 0x01, 0x4b, 0x4c, 0x1c, 0x05, 0xa3, 0x21, 0x40, 0xfd, 0x10, 0x00, 0x00, 0xee, 0xba, 0xe3, 0x59]
        #expect(try StoredBody.text(Data(earlier).databaseValue) == String(repeating: "a", count: 600))
        let made = try #require(try Array(String(repeating: "a", count: 600).utf8).withUnsafeBufferPointer { try StoredBody.compressed($0) })
        #expect(made == earlier)
    }

    @Test("A large compressed body reads back whole; cut, misrecorded, its checksum wrong or not UTF-8, it is the store's error")
    func largeBodyReadWhole() throws {
        let text = (0..<60_000).map { "{\"name\":\"Person \($0) 🐘\"}" }.joined(separator: ",")
        let body = Array(text.utf8)
        #expect(body.count >= StoredBody.piecewiseLength, "\(body.count) bytes")
        let stored = try #require(try body.withUnsafeBufferPointer { try StoredBody.compressed($0) })
        #expect(try StoredBody.text(Data(stored).databaseValue) == text)

        func length(_ value: Int) -> [UInt8] { [UInt8(value >> 24), UInt8((value >> 16) & 0xFF), UInt8((value >> 8) & 0xFF), UInt8(value & 0xFF)] }
        var notUTF8 = body
        notUTF8[1_000] = 0xFF
        let damaged: [(String, [UInt8])] = [
            ("cut short", Array(stored.prefix(stored.count / 2))),
            ("a recorded length one byte short", length(body.count - 1) + stored.dropFirst(4)),
            ("a recorded length one byte long", length(body.count + 1) + stored.dropFirst(4)),
            ("a checksum changed", Array(stored.dropLast()) + [stored[stored.count - 1] ^ 0x01]),
            ("its checksum cut off", Array(stored.dropLast(4))),
            ("not UTF-8", try #require(try notUTF8.withUnsafeBufferPointer { try StoredBody.compressed($0) })),
        ]
        // (Bytes after a whole stream are ignored, as before: the text it holds is whole and checked.)
        for (what, value) in damaged {
            #expect(throws: StoredBodyError.self, "\(what)") { _ = try StoredBody.text(Data(value).databaseValue) }
        }
    }

    @Test("A damaged compressed body is a clear error naming the cause, not a crash or a garbled line")
    func damagedBody() throws {
        let (directory, store, container) = try open()
        defer { withExtendedLifetime(directory) {} }
        let context = container.newContext()
        for index in 0..<50 { try context.make("Person", ["name": "Person \(index)"]) }
        try context.save()
        try store.write { db in try db.execute(sql: "UPDATE Z_FERRY_CHANGESET SET Z_BODY = x'789c0badbeef'") }
        do {
            _ = try store.changeSetLines()
            Issue.record("read a damaged body")
        } catch {
            #expect("\(error)".contains("does not inflate to text: the store file is damaged"), "\(error)")
        }
    }

    @Test("A save that fails records nothing; the state reports the vector")
    func atomicity() throws {
        let (directory, store, container) = try open()
        defer { withExtendedLifetime(directory) {} }
        let writer = container.newContext()
        let ann = try writer.make("Person", ["name": "Ann"])
        try writer.save()
        let other = container.newContext()
        let sameAnn = try other.existingObject(with: ann.objectID)
        try sameAnn.setValue("Annie", forKey: "name")
        try other.save()
        try ann.setValue("Anna", forKey: "name")
        #expect(throws: SaveError.self) { try writer.save() }
        #expect(try store.changeSets().count == 2, "the conflicting save left no change set")
        let state = try store.historyState()
        #expect(state.vector == [store.identifier: 2])
        let stateJSON = #"{"model":"\#(Self.model.versionHash)","store":"\#(store.identifier.uuidString)","# +
            #""vector":{"\#(store.identifier.uuidString)":2}}"#
        #expect(state.json == stateJSON)
    }

    @Test("A large save's inserts, written beside their rows on another thread, are recorded like a small save's; a conflict leaves nothing")
    func largeSaves() throws {
        let (directory, store, container) = try open()
        defer { withExtendedLifetime(directory) {} }
        let context = container.newContext()
        // Small (written in place), then large (written on the recording thread).
        let early = try (0..<10).map { try context.make("Person", ["name": "Early \($0)", "age": Int16($0)]) }
        try context.save()
        var people: [ManagedObject] = []
        for index in 0..<(InsertTextInAdvance.minimumInserts + 36) {
            let manager = index % 3 == 0 ? early[index % early.count] : people.last
            people.append(try context.make("Person", ["name": "Person \(index)", "age": Int16(index % 90), "manager": manager as Any]))
        }
        let desk = try context.make("Desk", ["number": Int32(1), "owner": people[5]])
        try people[0].setValue("Renamed", forKey: "name")  // an update in the same save follows the inserts
        try early[1].setValue("Early one, renamed", forKey: "name")
        try context.save()

        let sets = try store.changeSets()
        try #require(sets.count == 2)
        let large = sets[1]
        #expect(large.changes.filter { $0.kind == .insert }.count == people.count + 1)
        let byURI = Dictionary(uniqueKeysWithValues: large.changes.filter { $0.kind == .insert }.map { ($0.uri, $0) })
        for (index, person) in people.enumerated() {
            let change = try #require(byURI[person.objectID.uriString])
            let manager = try #require(person.value(forKey: "manager") as? ManagedObject)
            #expect(change.values["manager"] == .object(manager.objectID.uriString))
            #expect(change.values["age"] == .attribute(.integer(Int64(index % 90))))
            #expect(change.values["name"] == .attribute(.string(index == 0 ? "Renamed" : "Person \(index)")))
        }
        #expect(byURI[desk.objectID.uriString]?.values["owner"] == .object(people[5].objectID.uriString))
        #expect(large.changes.contains { $0.kind == .update && $0.uri == early[1].objectID.uriString })
        #expect(large.changes.firstIndex { $0.kind == .update } ?? 0 > people.count, "inserts come first")
        for line in try store.changeSetLines() {
            guard case .changeSet(let decoded) = try ChangeSetCodec.decode(line, model: Self.model) else {
                Issue.record("not decodable with the store's model: \(line)")
                continue
            }
            #expect(ChangeSetCodec.encode(decoded) == line)
        }

        // A large save that conflicts records nothing, and the next save records normally.
        let other = container.newContext()
        try other.existingObject(with: early[2].objectID).setValue("Changed elsewhere", forKey: "name")
        try other.save()
        for index in 0..<(InsertTextInAdvance.minimumInserts * 2) { _ = try context.make("Person", ["name": "Late \(index)"]) }
        try early[2].setValue("Changed here", forKey: "name")
        #expect(throws: SaveError.self) { try context.save() }
        #expect(try store.changeSets().count == 3, "the conflicting save left no change set")
        context.rollback()
        _ = try (0..<InsertTextInAdvance.minimumInserts).map { try context.make("Person", ["name": "After \($0)"]) }
        try context.save()
        #expect(try store.changeSets().last?.changes.count == InsertTextInAdvance.minimumInserts)
    }

    @Test("Two processes' worth of writers on one file share one gap-free sequence")
    func sharedFile() throws {
        let (directory, store, container) = try open()
        defer { withExtendedLifetime(directory) {} }
        let second = try SQLiteStore(path: store.path, model: Self.model)
        let secondContainer = try PersistentContainer(store: second)
        for index in 0..<10 {
            let context = (index % 2 == 0 ? container : secondContainer).newContext()
            try context.make("Person", ["name": "P\(index)"])
            try context.save()
        }
        let sets = try store.changeSets()
        #expect(sets.map(\.sequence) == Array(1...10))
        #expect(zip(sets, sets.dropFirst()).allSatisfy { $0.timestamp < $1.timestamp })
    }
}
