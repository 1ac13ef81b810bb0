import Foundation
import Testing
import FerryModel
import FerryStore
import FerryTestSupport

@Suite("JSON interchange: values, batches, dumps")
struct InterchangeTests {
    @Test("The JSON writer escapes and keeps member order")
    func writer() {
        let value = JSONValue.object([("b", .string("a\"b\\c\n\u{1}é")), ("a", .array([.integer(1), .number(1.5), .bool(true), .null]))])
        #expect(value.text == #"{"b":"a\"b\\c\n\u0001é","a":[1,1.5,true,null]}"#)
        #expect(JSONValue.sortedObject(["b": .null, "a": .null]).text == #"{"a":null,"b":null}"#)
        #expect(JSONValue.number(.nan).text == #""NaN""#)
    }

    @Test("The JSON reader tells booleans, integers and numbers apart")
    func reader() throws {
        let value = try JSONValue.parse(#"{"t":true,"i":3,"d":3.5,"s":"x","n":null,"a":[1]}"#)
        #expect(value["t"] == .bool(true))
        #expect(value["i"] == .integer(3))
        #expect(value["d"] == .number(3.5))
        #expect(value["n"] == .null)
        #expect(throws: InterchangeError.self) { try JSONValue.parse("{bad") }
    }

    static let roundTrips: [(AttributeType, AttributeValue)] = [
        (.integer16, .integer(-7)), (.integer64, .integer(Int64.max)), (.decimal, .decimal(Decimal(string: "12.50")!)),
        (.double, .double(0.1)), (.float, .float(1.1)), (.string, .string("ü")), (.boolean, .boolean(false)),
        (.date, .date(Date(timeIntervalSince1970: 1_714_564_800.25))), (.binaryData, .binaryData(Data([0, 255]))),
        (.uuid, .uuid(UUID(uuidString: "96EBBFDE-1D44-4B8A-9B57-4A0C5C1B7E00")!)), (.uri, .uri(URL(string: "https://x.org/a")!)),
        (.transformable, .transformable(Data([1, 2]))),
    ]

    @Test("Every attribute type round-trips through JSON", arguments: roundTrips.indices)
    func roundTrip(index: Int) throws {
        let (type, value) = Self.roundTrips[index]
        let json = AttributeJSON.encode(value)
        let decoded = try AttributeJSON.decode(try JSONValue.parse(json.text), as: type).get()
        #expect(decoded == value, "\(type.xcodeName): \(json.text)")
    }

    @Test("Canonical forms: dates in UTC ISO 8601, floats by their own digits, decimals as strings")
    func canonicalForms() {
        #expect(AttributeJSON.encode(.date(Date(timeIntervalSince1970: 1_714_564_800))).text == #""2024-05-01T12:00:00Z""#)
        #expect(AttributeJSON.encode(.date(Date(timeIntervalSince1970: 1_714_564_800.25))).text == #""2024-05-01T12:00:00.25Z""#)
        #expect(AttributeJSON.encode(.float(1.1)).text == "1.1")
        #expect(AttributeJSON.encode(.decimal(Decimal(string: "0.10")!)).text == #""0.1""#)
        #expect(ISO8601.parse("2024-05-01T14:00:00+02:00") == Date(timeIntervalSince1970: 1_714_564_800))
        #expect(ISO8601.parse("2024-02-30T00:00:00Z") == nil)
        #expect(ISO8601.parse("yesterday") == nil)
    }

    @Test("Wrongly typed values are refused with what was expected")
    func wrongTypes() {
        guard case .failure(let failure) = AttributeJSON.decode(.string("3"), as: .integer32) else {
            Issue.record("accepted a string for an integer")
            return
        }
        #expect(failure.message.contains("Integer 32 takes a whole number"))
        if case .success = AttributeJSON.decode(.integer(70000), as: .integer16) { Issue.record("accepted an out-of-range Integer 16") }
        if case .success = AttributeJSON.decode(.string("not base64!"), as: .binaryData) { Issue.record("accepted bad base64") }
        if case .success = AttributeJSON.decode(.integer(1), as: .boolean) { Issue.record("accepted 1 for a boolean") }
    }

    static let malformedBatches: [(String, String)] = [
        ("", "holds no operations"),
        ("[1]", "must be an object"),
        (#"[{"op":"upsert"}]"#, #""op" must be "insert", "update" or "delete""#),
        (#"[{"op":"insert"}]"#, #"needs "entity""#),
        (#"[{"op":"update"}]"#, #"needs "object""#),
        (#"[{"op":"delete","object":"a","values":{"x":1}}]"#, "takes no values"),
        (#"[{"op":"insert","entity":"A","colour":"red"}]"#, #"unknown field "colour""#),
        ("[{]", "not valid JSON"),
        ("{\"op\":\"insert\"}", "must be a JSON array"),
    ]

    @Test("Malformed batches are rejected whole", arguments: malformedBatches.indices)
    func malformedBatch(index: Int) {
        let (text, message) = Self.malformedBatches[index]
        do {
            _ = try OperationBatch.parse(text)
            Issue.record("accepted \(text)")
        } catch {
            #expect(error.description.contains(message), "\(text): \(error)")
        }
    }

    @Test("One array over several lines is one save; JSON lines (CRLF, blank lines, blanks around) are one save each; a bad line is named")
    func batchForms() throws {
        let pretty = """
            [
              {"op":"insert","entity":"Person","ref":"a"},
              {"op":"insert","entity":"Person","ref":"b"}
            ]
            """
        #expect(try OperationBatch.parse(pretty).saves.map(\.count) == [2])
        #expect(try OperationBatch.parse(#"[{"op":"insert","entity":"Person"}]"#).saves.map(\.count) == [1])
        let lines = "[{\"op\":\"insert\",\"entity\":\"Person\"}]\r\n\n  [{\"op\":\"insert\",\"entity\":\"Person\"},{\"op\":\"delete\",\"object\":\"x\"}]\t\r\n"
        #expect(try OperationBatch.parse(lines).saves.map(\.count) == [1, 2])
        do {
            _ = try OperationBatch.parse("[{\"op\":\"insert\",\"entity\":\"Person\"}]\n\n[{\"op\":}]\n")
            Issue.record("accepted a bad third line")
        } catch {
            #expect(error.description.contains("line 3"), "\(error)")
        }
    }

    @Test("Values start lines: two on one line are refused, naming the line")
    func oneValuePerLine() {
        do {
            _ = try OperationBatch.parse("[{\"op\":\"insert\",\"entity\":\"Person\"}]\n" +
                                         "[{\"op\":\"insert\",\"entity\":\"Person\"}] [{\"op\":\"insert\",\"entity\":\"Person\"}]\n")
            Issue.record("accepted two arrays on one line")
        } catch {
            #expect(error.description.contains("line 2") && error.description.contains("more text after a value on its line"), "\(error)")
        }
    }

    @Test("Applying text (parsed on a thread of its own while checked) is applying the parsed batch: same outcome, same first error",
          arguments: TestStoreKind.allCases)
    func applyText(kind: TestStoreKind) throws {
        let good = """
            [{"op":"insert","entity":"Person","ref":"b","values":{"id":2,"name":"B","manager":"a"}},\
            {"op":"insert","entity":"Person","ref":"a","values":{"id":1,"name":"A"}}]
            [{"op":"update","object":"b","values":{"name":"Bea"}},{"op":"insert","entity":"Organization","ref":"o","values":{"leader":"a"}}]
            [{"op":"delete","object":"b"}]
            """
        let viaText = try TestContainer(model: try SampleModels.load("OrgChart"), kind: kind)
        let viaBatch = try TestContainer(model: try SampleModels.load("OrgChart"), kind: kind)
        let outcome = try BatchApplier(container: viaText.container).apply(text: good)
        let expected = try BatchApplier(container: viaBatch.container).apply(try OperationBatch.parse(good))
        #expect(outcome.committedSaves == 3 && expected.committedSaves == 3)
        #expect(outcome.insertedObjects.map(\.ref) == ["b", "a", "o"], "in the input's order")
        #expect(outcome.insertedObjects.map(\.objectID.primaryKey) == expected.insertedObjects.map(\.objectID.primaryKey))
        var dumps: [[String]] = []
        for test in [viaText, viaBatch] {
            var lines: [String] = []
            try StoreDump(store: test.container.store).write {
                lines.append($0.replacingOccurrences(of: test.container.store.identifier.uuidString, with: "S"))
            }
            dumps.append(lines)
        }
        #expect(dumps[0] == dumps[1] && dumps[0].count == 2)

        // A wrong operation early and bad JSON later: the JSON error is reported (the whole text is read), nothing applied.
        let bad = "[{\"op\":\"insert\",\"entity\":\"Robot\"}]\n[{\"op\":\"insert\",\"entity\":\"Person\"}]\n[{\"op\":}]\n"
        let fresh = try TestContainer(model: try SampleModels.load("OrgChart"), kind: kind)
        for apply in [{ try BatchApplier(container: fresh.container).apply(text: bad) },
                      { try BatchApplier(container: fresh.container).apply(try OperationBatch.parse(bad)) }] as [() throws -> BatchApplier.Outcome] {
            do {
                _ = try apply()
                Issue.record("applied \(bad)")
            } catch {
                #expect("\(error)".contains("line 3") && "\(error)".contains("not valid JSON"), "\(error)")
            }
        }
        let robot = "[{\"op\":\"insert\",\"entity\":\"Person\"}]\n[{\"op\":\"insert\",\"entity\":\"Robot\"}]\n"
        do {
            _ = try BatchApplier(container: fresh.container).apply(text: robot)
            Issue.record("applied \(robot)")
        } catch {
            #expect(error.description == #"save 2, operation 1: the model has no entity "Robot""#, "\(error)")
        }
        #expect(try fresh.context().count(for: FetchRequest(entityName: "Person")) == 0, "nothing applied")
    }

    @Test("A batch is checked against the model before anything is applied", arguments: TestStoreKind.allCases)
    func batchChecks(kind: TestStoreKind) throws {
        let test = try TestContainer(model: try SampleModels.load("OrgChart"), kind: kind)
        let applier = BatchApplier(container: test.container)
        let cases: [(String, String)] = [
            (#"[{"op":"insert","entity":"Robot","ref":"r"}]"#, #"no entity "Robot""#),
            (#"[{"op":"insert","entity":"Person","ref":"p","values":{"age":3}}]"#, #"no property "age""#),
            (#"[{"op":"insert","entity":"Person","ref":"p","values":{"name":3}}]"#, "String takes a string"),
            (#"[{"op":"insert","entity":"Person","ref":"p","values":{"manager":"ghost"}}]"#, #"ref "ghost" is not defined"#),
            (#"[{"op":"insert","entity":"Person","ref":"p","values":{"employees":"p"}}]"#, "takes an array of refs or URIs"),
            (#"[{"op":"insert","entity":"Organization","ref":"o"},{"op":"insert","entity":"Person","ref":"p","values":{"manager":"o"}}]"#,
             "takes Person objects"),
            (#"[{"op":"insert","entity":"Person","ref":"p"},{"op":"insert","entity":"Person","ref":"p"}]"#, "defined twice"),
            (#"[{"op":"delete","object":"x-coredata://96EBBFDE-1D44-4B8A-9B57-4A0C5C1B7E00/Person/p1"}]"#, "belongs to another store"),
            ("[{\"op\":\"update\",\"object\":\"x-coredata://\(test.container.store.identifier.uuidString)/Person/p9\",\"values\":{}}]", "no object"),
            ("[{\"op\":\"insert\",\"entity\":\"Person\",\"ref\":\"ok\"}]\n[{\"op\":\"update\",\"object\":\"later\"}]\n" +
                "[{\"op\":\"insert\",\"entity\":\"Person\",\"ref\":\"later\"}]",
             #"ref "later" is not defined"#),
        ]
        for (text, message) in cases {
            do {
                _ = try applier.apply(try OperationBatch.parse(text))
                Issue.record("applied \(text)")
            } catch {
                #expect(error.description.contains(message), "\(text): \(error)")
            }
            let context = test.context()
            #expect(try context.count(for: FetchRequest(entityName: "Person")) == 0, "nothing applied for \(text)")
        }
    }

    @Test("Saves apply in order; a failing save stops the batch and writes nothing of its own", arguments: TestStoreKind.allCases)
    func batchApply(kind: TestStoreKind) throws {
        let test = try TestContainer(model: try SampleModels.load("Orders"), kind: kind)
        let text = """
            [{"op":"insert","entity":"Customer","ref":"ann","values":{"name":"Ann"}},\
            {"op":"insert","entity":"Order","ref":"o","values":{"date":"2024-05-01T12:00:00Z","customer":"ann"}}]
            [{"op":"update","object":"ann","values":{"info":"vip"}},{"op":"delete","object":"o"}]
            [{"op":"insert","entity":"Customer","ref":"nameless"}]
            [{"op":"insert","entity":"Customer","ref":"never","values":{"name":"Never"}}]
            """
        let outcome = try BatchApplier(container: test.container).apply(try OperationBatch.parse(text))
        #expect(outcome.committedSaves == 2)
        #expect(outcome.refs.keys.sorted() == ["ann", "o"])
        #expect(outcome.refs["ann"]?.hasSuffix("/Customer/p1") == true)
        let failure = try #require(outcome.failure)
        #expect(failure.save == 3)
        #expect(failure.error.validationErrors.first?.key == "name")
        #expect(failure.refsByObjectURI.values.sorted() == ["nameless"])
        let context = test.context()
        #expect(try context.count(for: FetchRequest(entityName: "Order")) == 0)
        let customers = try context.all("Customer")
        #expect(customers.count == 1)
        #expect(try customers.first?.string("info") == "vip")
    }

    @Test("A dump is canonical: sorted, every property present, identical for identical content", arguments: TestStoreKind.allCases)
    func dump(kind: TestStoreKind) throws {
        let test = try TestContainer(model: try SampleModels.load("OrgChart"), kind: kind)
        let context = test.context()
        let people = try (1...12).map { try context.make("Person", ["id": Int64($0), "name": "P\($0)"]) }
        for person in people.dropFirst() { try person.setValue(people[0], forKey: "manager") }
        try context.make("Organization", ["name": "Acme", "leader": people[0]])
        try context.save()
        var lines: [String] = []
        try StoreDump(store: test.container.store).write { lines.append($0) }
        #expect(lines.count == 13)
        let uris = try lines.map { try JSONValue.parse($0)["uri"]?.stringValue ?? "" }
        #expect(uris == uris.sorted(), "sorted by URI (so p10 comes before p2)")
        let store = test.container.store.identifier.uuidString
        let organization = #"{"entity":"Organization","uri":"x-coredata://\#(store)/Organization/p1","# +
            #""values":{"id":0,"leader":"x-coredata://\#(store)/Person/p1","name":"Acme"}}"#
        #expect(lines[0] == organization)
        let boss = try #require(lines.first { $0.contains(#""uri":"x-coredata://\#(store)/Person/p1""#) })
        let employees = try #require(try JSONValue.parse(boss)["values"]?["employees"])
        guard case .array(let members) = employees else { Issue.record("employees is not an array"); return }
        #expect(members.compactMap(\.stringValue) == members.compactMap(\.stringValue).sorted())
        #expect(members.count == 11)
        var again: [String] = []
        try StoreDump(store: test.container.store).write { again.append($0) }
        #expect(again == lines)
    }
}
