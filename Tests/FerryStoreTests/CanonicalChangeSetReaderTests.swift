import Foundation
import Testing
import FerryModel
@testable import FerryStore

/// The canonical change-set reader (no JSON tree) answers exactly what the
/// general reader answers, and only for lines as Ferry writes them; anything
/// else it leaves to the general reader.
@Suite("Change sets: the canonical reader")
struct CanonicalChangeSetReaderTests {
    static let model = try! ManagedObjectModel {
        Entity("Item") {
            Attribute("name", .string)
            Attribute("count", .integer64)
            Attribute("small", .integer16)
            Attribute("price", .double)
            Attribute("flag", .boolean)
            Attribute("when", .date)
            Attribute("blob", .binaryData)
            Attribute("uid", .uuid)
            Relationship("parent", to: "Item", inverse: "children")
            Relationship("children", to: "Item", inverse: "parent", toMany: true)
            Relationship("tags", to: "Tag", inverse: "items", toMany: true)
        }
        Entity("Tag") {
            Attribute("label", .string)
            Relationship("items", to: "Item", inverse: "tags", toMany: true)
        }
    }
    static let origin = UUID(uuidString: "0A0B0C0D-0000-4000-8000-000000000001")!
    static let other = UUID(uuidString: "0A0B0C0D-0000-4000-8000-000000000002")!
    static func uri(_ entity: String, _ key: Int, store: UUID = origin) -> String { "x-coredata://\(store.uuidString)/\(entity)/p\(key)" }

    static func line(_ changes: [ObjectChange], author: String? = nil, context: String? = nil, deps: [UUID: Int64] = [:]) -> String {
        ChangeSetCodec.encode(ChangeSet(origin: origin, sequence: 7, timestamp: HybridTimestamp(rawValue: 123_456), author: author,
                                        contextName: context, modelHash: model.versionHash, dependencies: deps, changes: changes))
    }

    /// What the general reader gives: a change set, another model, or an error.
    static func general(_ text: String) -> String {
        do {
            switch try ChangeSetCodec.decodeTree(text, model: model, versionHash: nil) {
            case .changeSet(let changeSet): return "changeSet \(ChangeSetCodec.encode(changeSet)) \(changeSet.hashValue)"
            case .otherModel(let origin, let sequence, let hash, _): return "otherModel \(origin) \(sequence) \(hash)"
            }
        } catch {
            return "error \(error)"
        }
    }

    /// Checks that the canonical reader agrees with the general one, and says whether it took the line.
    @discardableResult
    static func agrees(_ text: String, sourceLocation: SourceLocation = #_sourceLocation) -> Bool {
        guard let fast = ChangeSetCodec.decodeCanonical(text, model: model, versionHash: nil) else { return false }
        guard case .changeSet(let changeSet) = fast else {
            Issue.record("the canonical reader only answers change sets", sourceLocation: sourceLocation)
            return true
        }
        guard case .changeSet(let expected) = try? ChangeSetCodec.decodeTree(text, model: model, versionHash: nil) else {
            Issue.record("the canonical reader took a line the general reader refuses: \(general(text)) — \(text)", sourceLocation: sourceLocation)
            return true
        }
        #expect(changeSet == expected, "\(text)", sourceLocation: sourceLocation)
        return true
    }

    @Test("Lines as Ferry writes them take the canonical reader and decode to the same change set")
    func canonicalLines() {
        let lines = [
            Self.line([ObjectChange(kind: .insert, uri: Self.uri("Item", 1), entity: "Item", values: [
                "name": .attribute(.string("Ann ✓ 🚢")), "count": .attribute(.integer(-9_223_372_036_854_775_808)), "small": .attribute(.integer(-7)),
                "price": .attribute(.double(3)), "flag": .attribute(.boolean(true)), "parent": .object(Self.uri("Item", 9, store: Self.other)),
            ])]),
            Self.line([ObjectChange(kind: .insert, uri: Self.uri("Item", 2), entity: "Item")], author: "importer", context: "main",
                      deps: [Self.other: 3, UUID(uuidString: "FFFFFFFF-0000-4000-8000-000000000003")!: 1]),
            Self.line([ObjectChange(kind: .update, uri: Self.uri("Item", 1), entity: "Item",
                                    values: ["name": .null, "parent": .null, "flag": .attribute(.boolean(false))]),
                       ObjectChange(kind: .delete, uri: Self.uri("Tag", 4), entity: "Tag", values: ["label": .attribute(.string("old"))]),
                       ObjectChange(kind: .delete, uri: Self.uri("Tag", 5), entity: "Tag"),
                       ObjectChange(kind: .restore, uri: Self.uri("Item", 3), entity: "Item", values: ["count": .attribute(.integer(0))])]),
            Self.line([]),
        ]
        for line in lines {
            #expect(Self.agrees(line), "not taken: \(line)")
        }
    }

    @Test("Anything else is left to the general reader, which decodes it or says what is wrong")
    func everythingElse() throws {
        let base = Self.line([ObjectChange(kind: .insert, uri: Self.uri("Item", 1), entity: "Item", values: [
            "count": .attribute(.integer(5)), "name": .attribute(.string("Ann")),
        ])])
        #expect(Self.agrees(base))
        let variants: [String] = [
            base.replacingOccurrences(of: ",\"op\"", with: ", \"op\""),                         // whitespace
            base.replacingOccurrences(of: "\"Ann\"", with: "\"A\\u006en\""),                     // an escape
            base.replacingOccurrences(of: "\"count\":5", with: "\"count\":05"),                  // leading zero
            base.replacingOccurrences(of: "\"count\":5", with: "\"count\":9223372036854775808"), // past Int64
            base.replacingOccurrences(of: "\"count\":5,\"name\":\"Ann\"", with: "\"name\":\"Ann\",\"count\":5"),  // keys out of order
            base.replacingOccurrences(of: "\"count\":5,\"name\":\"Ann\"", with: "\"count\":5,\"count\":6"),       // a duplicate key
            base.replacingOccurrences(of: "\"count\":5", with: "\"count\":5,\"nope\":1"),        // an unknown property
            base.replacingOccurrences(of: "\"count\":5", with: "\"children\":[]"),               // a to-many in values
            base.replacingOccurrences(of: "\"count\":5", with: "\"count\":\"5\""),               // a wrong type
            base.replacingOccurrences(of: "\"count\":5", with: "\"small\":99999"),               // out of Integer 16's range
            base.replacingOccurrences(of: "\"count\":5", with: "\"c\u{301}ount\":5"),            // a key that is not ASCII
            base.replacingOccurrences(of: Self.model.versionHash, with: "another-model"),       // another model
            base.replacingOccurrences(of: "\"format\":1", with: "\"format\":2"),
            base.replacingOccurrences(of: "\"seq\":7", with: "\"seq\":0"),
            base.replacingOccurrences(of: "/Item/p1", with: "/Tag/p1"),                          // a URI of another entity
            base.replacingOccurrences(of: "{\"entity\"", with: "{\"added\":{\"tags\":[]},\"entity\""),  // memberships
            base.replacingOccurrences(of: "\"op\":\"insert\"", with: "\"op\":\"insert\",\"extra\":1"),
            base + " ",
            base + "x",
            String(base.dropLast()),
            base.replacingOccurrences(of: "\"changes\":[", with: "\"author\":null,\"changes\":["),
        ]
        for variant in variants {
            #expect(variant != base)
            #expect(!Self.agrees(variant), "taken: \(variant)")
            #expect(!Self.general(variant).isEmpty)
        }
        // Numbers both readers read the same way (a count of 5.0 is 5; 5.5 is refused by both).
        for number in ["-0", "-9223372036854775808", "5.0", "5e0", "-5E+1", "5.5", "1e400"] {
            let variant = base.replacingOccurrences(of: "\"count\":5", with: "\"count\":\(number)")
            let taken = Self.agrees(variant)
            #expect(taken == Self.general(variant).hasPrefix("changeSet"), "\(number)")
        }
        for number in ["0.5", "-1.25e-3", "3.0", "1E2"] {
            #expect(Self.agrees(base.replacingOccurrences(of: "\"count\":5,\"name\":\"Ann\"", with: "\"name\":\"Ann\",\"price\":\(number)")), "\(number)")
        }
        for number in ["1.", ".5", "1e", "1e+", "-", "01.5", "1.5.5"] {
            #expect(!Self.agrees(base.replacingOccurrences(of: "\"count\":5,\"name\":\"Ann\"", with: "\"name\":\"Ann\",\"price\":\(number)")), "\(number)")
        }
    }

    @Test("A URI whose store and entity part was checked before still has its row reference checked")
    func repeatedURIPrefixes() {
        func twoInserts(_ second: String, parent: String? = nil) -> String {
            Self.line([ObjectChange(kind: .insert, uri: Self.uri("Item", 1), entity: "Item", values: ["parent": .object(Self.uri("Item", 9))]),
                       ObjectChange(kind: .insert, uri: second, entity: "Item", values: ["parent": .object(parent ?? Self.uri("Item", 8))])])
        }
        #expect(Self.agrees(twoInserts(Self.uri("Item", 2))))
        #expect(Self.agrees(twoInserts(Self.uri("Item", 2).replacingOccurrences(of: "/p2", with: "/p02"))), "leading zeros are allowed")
        for tail in ["p0", "p000", "p", "q2", "p2x", "p1234567890123456789"] {
            let line = twoInserts(Self.uri("Item", 2).replacingOccurrences(of: "/p2", with: "/\(tail)"))
            #expect(!Self.agrees(line), "\(tail)")
            #expect(Self.general(line).hasPrefix("error"), "\(tail)")
        }
        for parent in [Self.uri("Tag", 3), Self.uri("Item", 0), "x-coredata:///Item/t0A0B0C0D-0000-4000-8000-0000000000011"] {
            let line = twoInserts(Self.uri("Item", 2), parent: parent)
            #expect(!Self.agrees(line), "\(parent)")
            #expect(Self.general(line).hasPrefix("error"), "\(parent)")
        }
    }

    @Test("Dates, binary data and UUIDs (strings and numbers in their JSON form) decode the same on both readers")
    func otherTypes() {
        let line = Self.line([ObjectChange(kind: .insert, uri: Self.uri("Item", 1), entity: "Item", values: [
            "when": .attribute(.date(Date(timeIntervalSince1970: 1_700_000_000.25))), "blob": .attribute(.binaryData(Data([0, 1, 2, 255]))),
            "uid": .attribute(.uuid(Self.other)), "price": .attribute(.double(0.1)),
        ])])
        Self.agrees(line)  // (taken or not, it agrees; a double like 0.1 is left to the general reader)
        #expect(Self.general(line).hasPrefix("changeSet"))
    }
}
