import Foundation
import Testing
import FerryModel
import FerryStore
import FerrySQLite
import FerrySync

/// The change-set wire format cannot drift by accident: a fixed change set must
/// encode to the bytes of the golden file, and the golden file must decode to it.
/// After a deliberate format change, regenerate with `FERRY_UPDATE_GOLDEN=1`
/// (and raise `ChangeSet.formatVersion` if old readers cannot read it).
@Suite("Change-set wire format")
struct WireFormatTests {
    static let model = try! ManagedObjectModel {
        Entity("Sample") {
            Attribute("i16", .integer16); Attribute("i64", .integer64); Attribute("decimal", .decimal)
            Attribute("double", .double); Attribute("float", .float); Attribute("string", .string)
            Attribute("bool", .boolean); Attribute("date", .date); Attribute("data", .binaryData)
            Attribute("uuid", .uuid); Attribute("uri", .uri)
            Relationship("parent", to: "Sample", inverse: "children")
            Relationship("children", to: "Sample", inverse: "parent", toMany: true)
            Relationship("tags", to: "Tag", inverse: "samples", toMany: true)
        }
        Entity("Tag") { Attribute("label", .string); Relationship("samples", to: "Sample", inverse: "tags", toMany: true) }
    }

    static let origin = UUID(uuidString: "0A0B0C0D-0000-4000-8000-000000000001") ?? UUID()
    static let peer = UUID(uuidString: "0A0B0C0D-0000-4000-8000-000000000002") ?? UUID()
    static func uri(_ entity: String, _ key: Int) -> String { "x-coredata://\(origin.uuidString)/\(entity)/p\(key)" }

    static let sets: [ChangeSet] = [
        ChangeSet(origin: origin, sequence: 1, timestamp: HybridTimestamp(rawValue: 113_000_000_000_000_001), author: "importer",
                  contextName: "main", modelHash: model.versionHash, changes: [
            ObjectChange(kind: .insert, uri: uri("Sample", 1), entity: "Sample", values: [
                "i16": .attribute(.integer(-7)), "i64": .attribute(.integer(9_007_199_254_740_993)),
                "decimal": .attribute(.decimal(Decimal(string: "12.50") ?? 0)), "double": .attribute(.double(0.1)),
                "float": .attribute(.float(2.5)), "string": .attribute(.string("Zoë \"quoted\"\n")), "bool": .attribute(.boolean(true)),
                "date": .attribute(.date(Date(timeIntervalSince1970: 1_700_000_000.25))), "data": .attribute(.binaryData(Data([0, 1, 254, 255]))),
                "uuid": .attribute(.uuid(peer)), "uri": .attribute(.uri(URL(string: "https://example.com/a?b=c") ?? URL(fileURLWithPath: "/"))),
            ]),
            ObjectChange(kind: .insert, uri: uri("Tag", 1), entity: "Tag", values: ["label": .attribute(.string("red"))]),
            ObjectChange(kind: .insert, uri: uri("Sample", 2), entity: "Sample", values: ["parent": .object(uri("Sample", 1))],
                         added: ["tags": [uri("Tag", 1)]]),
        ]),
        ChangeSet(origin: origin, sequence: 2, timestamp: HybridTimestamp(rawValue: 113_000_000_000_065_536), modelHash: model.versionHash,
                  dependencies: [peer: 4], changes: [
            ObjectChange(kind: .update, uri: uri("Sample", 2), entity: "Sample", values: ["string": .null, "parent": .null]),
            ObjectChange(kind: .update, uri: uri("Sample", 2), entity: "Sample", removed: ["tags": [uri("Tag", 1)]]),
            ObjectChange(kind: .delete, uri: uri("Sample", 1), entity: "Sample", values: ["i16": .attribute(.integer(-7))]),
            ObjectChange(kind: .restore, uri: uri("Sample", 3), entity: "Sample", values: ["bool": .attribute(.boolean(false))]),
        ]),
    ]

    static var goldenPath: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures/changesets-v1.jsonl").path
    }

    @Test("Encoding matches the golden file byte for byte, and the golden file decodes to the same change sets")
    func golden() throws {
        let encoded = Self.sets.map(ChangeSetCodec.encode).joined(separator: "\n") + "\n"
        if ProcessInfo.processInfo.environment["FERRY_UPDATE_GOLDEN"] != nil {
            try encoded.write(toFile: Self.goldenPath, atomically: true, encoding: .utf8)
            Issue.record("wrote \(Self.goldenPath); unset FERRY_UPDATE_GOLDEN and run again")
            return
        }
        let golden = try String(contentsOfFile: Self.goldenPath, encoding: .utf8)
        #expect(encoded == golden)
        let decoded = try golden.split(separator: "\n").map { line -> ChangeSet in
            guard case .changeSet(let changeSet) = try ChangeSetCodec.decode(String(line), model: Self.model) else {
                throw ChangeSetError.malformed("other model")
            }
            return changeSet
        }
        #expect(decoded == Self.sets)
    }

    static let malformed: [(String, String)] = [
        ("not json", "not JSON"),
        ("[]", "a change set is a JSON object"),
        (#"{"format":3}"#, "change set format 3 is not supported (this Ferry reads formats 1…2); upgrade Ferry"),
        (#"{"format":1,"origin":"x"}"#, "'origin' must be a store UUID"),
        (#"{"format":1,"origin":"0A0B0C0D-0000-4000-8000-000000000001","seq":0}"#, "'seq' must be a whole number ≥ 1"),
        (#"{"format":1,"origin":"0A0B0C0D-0000-4000-8000-000000000001","seq":1,"hlc":-1}"#, "'hlc' must be a whole number ≥ 0"),
        (#"{"format":1,"origin":"0A0B0C0D-0000-4000-8000-000000000001","seq":1,"hlc":1}"#, "'model' (the model version hash) is missing"),
        (#"{"format":1,"origin":"0A0B0C0D-0000-4000-8000-000000000001","seq":1,"hlc":1,"model":"MODEL","changes":{}}"#, "'changes' must be an array"),
        (#"{"format":1,"origin":"0A0B0C0D-0000-4000-8000-000000000001","seq":1,"hlc":1,"model":"MODEL","changes":[{"op":"upsert"}]}"#, "changes[0].op must be"),
        (#"{"format":1,"origin":"0A0B0C0D-0000-4000-8000-000000000001","seq":1,"hlc":1,"model":"MODEL","changes":[{"op":"insert","entity":"Robot"}]}"#,
         "the model has no entity 'Robot'"),
        (#"{"format":1,"origin":"0A0B0C0D-0000-4000-8000-000000000001","seq":1,"hlc":1,"model":"MODEL","# +
            #""changes":[{"op":"insert","entity":"Tag","uri":"x-coredata:///Tag/t1"}]}"#,
         "is not an object URI"),
        (#"{"format":1,"origin":"0A0B0C0D-0000-4000-8000-000000000001","seq":1,"hlc":1,"model":"MODEL","# +
            #""changes":[{"op":"insert","entity":"Tag","uri":"x-coredata://0A0B0C0D-0000-4000-8000-000000000001/Sample/p1"}]}"#,
         "does not name a Tag"),
        (#"{"format":1,"origin":"0A0B0C0D-0000-4000-8000-000000000001","seq":1,"hlc":1,"model":"MODEL","# +
            #""changes":[{"op":"insert","entity":"Tag","uri":"x-coredata://0A0B0C0D-0000-4000-8000-000000000001/Tag/p1","values":{"colour":"red"}}]}"#,
         "entity 'Tag' has no recorded property 'colour'"),
        (#"{"format":1,"origin":"0A0B0C0D-0000-4000-8000-000000000001","seq":1,"hlc":1,"model":"MODEL","# +
            #""changes":[{"op":"insert","entity":"Tag","uri":"x-coredata://0A0B0C0D-0000-4000-8000-000000000001/Tag/p1","values":{"label":5}}]}"#,
         "String takes a string; got a number 5"),
        (#"{"format":1,"origin":"0A0B0C0D-0000-4000-8000-000000000001","seq":1,"hlc":1,"model":"MODEL","# +
            #""changes":[{"op":"insert","entity":"Sample","uri":"x-coredata://0A0B0C0D-0000-4000-8000-000000000001/Sample/p1","values":{"i16":70000}}]}"#,
         "Integer 16 takes a whole number within the range"),
        (#"{"format":1,"origin":"0A0B0C0D-0000-4000-8000-000000000001","seq":1,"hlc":1,"model":"MODEL","# +
            #""changes":[{"op":"insert","entity":"Sample","uri":"x-coredata://0A0B0C0D-0000-4000-8000-000000000001/Sample/p1","# +
            #""values":{"parent":"x-coredata://0A0B0C0D-0000-4000-8000-000000000001/Tag/p1"}}]}"#,
         "does not name a Sample"),
        (#"{"format":1,"origin":"0A0B0C0D-0000-4000-8000-000000000001","seq":1,"hlc":1,"model":"MODEL","# +
            #""changes":[{"op":"insert","entity":"Sample","uri":"x-coredata://0A0B0C0D-0000-4000-8000-000000000001/Sample/p1","values":{"children":[]}}]}"#,
         "entity 'Sample' has no recorded property 'children'"),
        (#"{"format":1,"origin":"0A0B0C0D-0000-4000-8000-000000000001","seq":1,"hlc":1,"model":"MODEL","# +
            #""changes":[{"op":"update","entity":"Tag","uri":"x-coredata://0A0B0C0D-0000-4000-8000-000000000001/Tag/p1","added":{"label":[]}}]}"#,
         "has no recorded property 'label'"),
        (#"{"format":1,"origin":"0A0B0C0D-0000-4000-8000-000000000001","seq":1,"hlc":1,"model":"MODEL","# +
            #""changes":[{"op":"update","entity":"Sample","uri":"x-coredata://0A0B0C0D-0000-4000-8000-000000000001/Sample/p1","added":{"tags":["nope"]}}]}"#,
         "'nope' is not an object URI"),
        (#"{"format":1,"origin":"0A0B0C0D-0000-4000-8000-000000000001","seq":1,"hlc":1,"model":"MODEL","# +
            #""changes":[{"op":"update","entity":"Tag","uri":"x-coredata://0A0B0C0D-0000-4000-8000-000000000001/Tag/p1","added":{"samples":[]}}]}"#,
         "entity 'Tag' has no recorded property 'samples'"),
        (#"{"format":1,"origin":"0A0B0C0D-0000-4000-8000-000000000001","seq":1,"hlc":1,"model":"MODEL","deps":{"x":1},"changes":[]}"#,
         "'deps' entry 'x' must map a store UUID"),
    ]

    @Test("Malformed change sets are refused with the field and the problem", arguments: malformed.indices)
    func refused(index: Int) {
        let (text, message) = Self.malformed[index]
        let line = text.replacingOccurrences(of: "MODEL", with: Self.model.versionHash)
        do {
            let decoded = try ChangeSetCodec.decode(line, model: Self.model)
            Issue.record("accepted \(line): \(decoded)")
        } catch {
            #expect(error.description.contains(message), "\(error.description)")
        }
    }

    // MARK: - Format 2: positions in ordered relationships

    static let orderedModel = try! ManagedObjectModel {
        Entity("List") {
            Attribute("name", .string)
            Relationship("items", to: "Item", inverse: "list", toMany: true, ordered: true)
            Relationship("labels", to: "Label", inverse: "lists", toMany: true)
        }
        Entity("Item") { Attribute("title", .string); Relationship("list", to: "List", inverse: "items") }
        Entity("Label") { Attribute("name", .string); Relationship("lists", to: "List", inverse: "labels", toMany: true) }
    }

    static let orderedSets: [ChangeSet] = [
        ChangeSet(origin: origin, sequence: 1, timestamp: HybridTimestamp(rawValue: 113_000_000_000_000_001), modelHash: orderedModel.versionHash, changes: [
            ObjectChange(kind: .insert, uri: uri("Item", 1), entity: "Item", values: ["list": .object(uri("List", 1))]),
            ObjectChange(kind: .insert, uri: uri("List", 1), entity: "List", values: ["name": .attribute(.string("todo"))],
                         positions: ["items": [uri("Item", 1): "V001"]]),
        ]),
        ChangeSet(origin: origin, sequence: 2, timestamp: HybridTimestamp(rawValue: 113_000_000_000_065_536), modelHash: orderedModel.versionHash, changes: [
            ObjectChange(kind: .update, uri: uri("List", 1), entity: "List", positions: ["items": [uri("Item", 1): "V002", uri("Item", 2): "G"]]),
            ObjectChange(kind: .merge, uri: uri("Item", 3), entity: "Item", mergedInto: uri("Item", 1)),
        ]),
        // No positions: written in format 1, so peers that read only format 1 still read it.
        ChangeSet(origin: origin, sequence: 3, timestamp: HybridTimestamp(rawValue: 113_000_000_000_131_072), modelHash: orderedModel.versionHash, changes: [
            ObjectChange(kind: .update, uri: uri("List", 1), entity: "List", values: ["name": .null]),
        ]),
        // A delete carrying its many-to-many memberships (either side), for a minimum-count repair.
        ChangeSet(origin: origin, sequence: 4, timestamp: HybridTimestamp(rawValue: 113_000_000_000_196_608), modelHash: orderedModel.versionHash, changes: [
            ObjectChange(kind: .delete, uri: uri("Label", 1), entity: "Label", values: ["name": .attribute(.string("urgent"))],
                         added: ["lists": [uri("List", 1)]]),
        ]),
    ]

    static var orderedGoldenPath: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures/changesets-v2.jsonl").path
    }

    @Test("Positions, merges and a delete's memberships need format 2: they match the golden file, and change sets without them stay format 1")
    func goldenPositions() throws {
        let encoded = Self.orderedSets.map(ChangeSetCodec.encode).joined(separator: "\n") + "\n"
        if ProcessInfo.processInfo.environment["FERRY_UPDATE_GOLDEN"] != nil {
            try encoded.write(toFile: Self.orderedGoldenPath, atomically: true, encoding: .utf8)
            Issue.record("wrote \(Self.orderedGoldenPath); unset FERRY_UPDATE_GOLDEN and run again")
            return
        }
        let golden = try String(contentsOfFile: Self.orderedGoldenPath, encoding: .utf8)
        #expect(encoded == golden)
        let lines = golden.split(separator: "\n").map(String.init)
        #expect(lines.map { $0.contains("\"format\":2") } == [true, true, false, true])
        let decoded = try lines.map { line -> ChangeSet in
            guard case .changeSet(let changeSet) = try ChangeSetCodec.decode(line, model: Self.orderedModel) else {
                throw ChangeSetError.malformed("other model")
            }
            return changeSet
        }
        #expect(decoded == Self.orderedSets)
    }

    static let malformedPositions: [(String, String)] = [
        (#"{"format":1,"origin":"0A0B0C0D-0000-4000-8000-000000000001","seq":1,"hlc":1,"model":"MODEL","# +
            #""changes":[{"op":"update","entity":"List","uri":"x-coredata://0A0B0C0D-0000-4000-8000-000000000001/List/p1","# +
            #""order":{"items":{"x-coredata://0A0B0C0D-0000-4000-8000-000000000001/Item/p1":"V"}}}]}"#,
         "needs format 2"),
        (#"{"format":2,"origin":"0A0B0C0D-0000-4000-8000-000000000001","seq":1,"hlc":1,"model":"MODEL","# +
            #""changes":[{"op":"update","entity":"List","uri":"x-coredata://0A0B0C0D-0000-4000-8000-000000000001/List/p1","order":{"labels":{}}}]}"#,
         "entity 'List' has no recorded property 'labels'"),
        (#"{"format":2,"origin":"0A0B0C0D-0000-4000-8000-000000000001","seq":1,"hlc":1,"model":"MODEL","# +
            #""changes":[{"op":"update","entity":"List","uri":"x-coredata://0A0B0C0D-0000-4000-8000-000000000001/List/p1","# +
            #""order":{"items":{"x-coredata://0A0B0C0D-0000-4000-8000-000000000001/Item/p1":"V0"}}}]}"#,
         "must be 1…256 base-62 digits"),
        (#"{"format":2,"origin":"0A0B0C0D-0000-4000-8000-000000000001","seq":1,"hlc":1,"model":"MODEL","# +
            #""changes":[{"op":"update","entity":"List","uri":"x-coredata://0A0B0C0D-0000-4000-8000-000000000001/List/p1","# +
            #""order":{"items":{"x-coredata://0A0B0C0D-0000-4000-8000-000000000001/Label/p1":"V"}}}]}"#,
         "does not name a Item"),
        (#"{"format":2,"origin":"0A0B0C0D-0000-4000-8000-000000000001","seq":1,"hlc":1,"model":"MODEL","# +
            #""changes":[{"op":"delete","entity":"List","uri":"x-coredata://0A0B0C0D-0000-4000-8000-000000000001/List/p1","order":{}}]}"#,
         "a delete carries no positions"),
        (#"{"format":1,"origin":"0A0B0C0D-0000-4000-8000-000000000001","seq":1,"hlc":1,"model":"MODEL","# +
            #""changes":[{"op":"merge","entity":"Item","uri":"x-coredata://0A0B0C0D-0000-4000-8000-000000000001/Item/p2","# +
            #""into":"x-coredata://0A0B0C0D-0000-4000-8000-000000000001/Item/p1"}]}"#,
         "a merge needs format 2"),
        (#"{"format":2,"origin":"0A0B0C0D-0000-4000-8000-000000000001","seq":1,"hlc":1,"model":"MODEL","# +
            #""changes":[{"op":"merge","entity":"Item","uri":"x-coredata://0A0B0C0D-0000-4000-8000-000000000001/Item/p2"}]}"#,
         "into (the object merged into) is missing"),
        (#"{"format":2,"origin":"0A0B0C0D-0000-4000-8000-000000000001","seq":1,"hlc":1,"model":"MODEL","# +
            #""changes":[{"op":"merge","entity":"Item","uri":"x-coredata://0A0B0C0D-0000-4000-8000-000000000001/Item/p2","# +
            #""into":"x-coredata://0A0B0C0D-0000-4000-8000-000000000001/Item/p2"}]}"#,
         "cannot be merged into itself"),
        (#"{"format":2,"origin":"0A0B0C0D-0000-4000-8000-000000000001","seq":1,"hlc":1,"model":"MODEL","# +
            #""changes":[{"op":"merge","entity":"Item","uri":"x-coredata://0A0B0C0D-0000-4000-8000-000000000001/Item/p2","# +
            #""into":"x-coredata://0A0B0C0D-0000-4000-8000-000000000001/List/p1"}]}"#,
         "does not name a Item"),
        (#"{"format":2,"origin":"0A0B0C0D-0000-4000-8000-000000000001","seq":1,"hlc":1,"model":"MODEL","# +
            #""changes":[{"op":"merge","entity":"Item","uri":"x-coredata://0A0B0C0D-0000-4000-8000-000000000001/Item/p2","# +
            #""into":"x-coredata://0A0B0C0D-0000-4000-8000-000000000001/Item/p1","values":{}}]}"#,
         "a merge carries no 'values'"),
        (#"{"format":2,"origin":"0A0B0C0D-0000-4000-8000-000000000001","seq":1,"hlc":1,"model":"MODEL","# +
            #""changes":[{"op":"update","entity":"Item","uri":"x-coredata://0A0B0C0D-0000-4000-8000-000000000001/Item/p2","# +
            #""into":"x-coredata://0A0B0C0D-0000-4000-8000-000000000001/Item/p1"}]}"#,
         "into belongs to merges only"),
        (#"{"format":1,"origin":"0A0B0C0D-0000-4000-8000-000000000001","seq":1,"hlc":1,"model":"MODEL","# +
            #""changes":[{"op":"delete","entity":"Label","uri":"x-coredata://0A0B0C0D-0000-4000-8000-000000000001/Label/p1","# +
            #""added":{"lists":["x-coredata://0A0B0C0D-0000-4000-8000-000000000001/List/p1"]}}]}"#,
         "a delete's memberships ('added') needs format 2"),
        (#"{"format":2,"origin":"0A0B0C0D-0000-4000-8000-000000000001","seq":1,"hlc":1,"model":"MODEL","# +
            #""changes":[{"op":"delete","entity":"Label","uri":"x-coredata://0A0B0C0D-0000-4000-8000-000000000001/Label/p1","# +
            #""added":{"name":["x-coredata://0A0B0C0D-0000-4000-8000-000000000001/List/p1"]}}]}"#,
         "no recorded property 'name'"),
    ]

    @Test("Malformed positions are refused with the field and the problem", arguments: malformedPositions.indices)
    func refusedPositions(index: Int) {
        let (text, message) = Self.malformedPositions[index]
        let line = text.replacingOccurrences(of: "MODEL", with: Self.orderedModel.versionHash)
        do {
            let decoded = try ChangeSetCodec.decode(line, model: Self.orderedModel)
            Issue.record("accepted \(line): \(decoded)")
        } catch {
            #expect(error.description.contains(message), "\(error.description)")
        }
    }

    @Test("A change set of another model version is recognised, not refused")
    func otherModel() throws {
        let line = #"{"changes":[{"entity":"Gadget","op":"insert","uri":"x-coredata://0A0B0C0D-0000-4000-8000-000000000001/Gadget/p1"}],"# +
            #""format":1,"hlc":5,"model":"another","origin":"0A0B0C0D-0000-4000-8000-000000000001","seq":3}"#
        guard case .otherModel(let origin, let sequence, let hash, _) = try ChangeSetCodec.decode(line, model: Self.model) else {
            Issue.record("decoded as this model's")
            return
        }
        #expect(origin == Self.origin && sequence == 3 && hash == "another")
    }
}

@Suite("JSON lines")
struct JSONLinesTests {
    @Test("Cut at newline bytes, empty lines left out, multi-byte characters intact")
    func split() {
        let text = "{\"a\":\"é\"}\n\n{\"b\":\"👩‍👩‍👧\"}\r\n{\"c\":1}"
        let lines = JSONLines.split(Data(text.utf8))
        #expect(lines == ["{\"a\":\"é\"}", "{\"b\":\"👩‍👩‍👧\"}\r", "{\"c\":1}"])
        #expect(JSONLines.split(Data()).isEmpty)
        #expect(JSONLines.split(Data("\n\n".utf8)).isEmpty)
        #expect(JSONLines.split(Data("x\n".utf8)) == ["x"])
    }
}
