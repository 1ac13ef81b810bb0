import Foundation
import Testing
import FerryTestTraits
import FerryModel
import FerryStore
import FerrySigning
import FerrySync
import FerryTestSupport

@Suite("The ferry command line", .blocking)
struct CommandLineTests {
    let orgChart = SampleModels.path("OrgChart")
    let orders = SampleModels.path("Orders")

    func lines(_ text: String) -> [String] { text.split(separator: "\n").map(String.init) }

    @Test("model check --json prints exactly the documented shape")
    func modelCheckJSON() throws {
        let result = try FerryProcess.run(["model", "check", "--json", orgChart])
        #expect(result.status == 0)
        let expected = #"{"entities":[{"name":"Organization","parent":null,"abstract":false,"attributes":[{"name":"id","type":"Integer 16","# +
            #""optional":true},{"name":"name","type":"String","optional":true}],"relationships":[{"name":"leader","destination":"Person","toMany":false,"# +
            #""deleteRule":"Nullify","inverse":null,"optional":true}]},{"name":"Person","parent":null,"abstract":false,"attributes":[{"name":"id","# +
            #""type":"Integer 64","optional":true},{"name":"name","type":"String","optional":true}],"# +
            #""relationships":[{"name":"employees","destination":"Person","toMany":true,"deleteRule":"Nullify","inverse":"manager","optional":true},"# +
            #"{"name":"manager","destination":"Person","toMany":false,"deleteRule":"Nullify","inverse":"employees","optional":true}]}]}"#
        #expect(result.standardOutput == expected + "\n")
    }

    @Test("model check --json says what a derived attribute derives")
    func modelCheckDerived() throws {
        let directory = TemporaryDirectory()
        let path = directory.file("Derived.xcdatamodel")
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        let contents = #"<model><entity name="Tag"><attribute name="name" optional="YES" attributeType="String"/>"# +
            #"<attribute name="key" optional="YES" attributeType="String" derived="YES" derivationExpression="canonical:(name)"/></entity></model>"#
        try contents.write(toFile: path + "/contents", atomically: true, encoding: .utf8)
        let result = try FerryProcess.run(["model", "check", "--json", path])
        #expect(result.status == 0)
        #expect(result.standardOutput.contains(#"{"name":"key","type":"String","optional":true,"derivedFrom":"canonical:(name)"}"#), "\(result.standardOutput)")
        #expect(result.standardOutput.contains(#"{"name":"name","type":"String","optional":true}"#))
    }

    @Test("model check reads every real model file and reports inheritance")
    func modelCheckFixtures() throws {
        let path = "\(SampleModels.realModelsDirectory)/ashalkhakov__FreeCoreData__EmployeeDirectory.xcdatamodel.contents"
        let result = try FerryProcess.run(["model", "check", "--json", path])
        #expect(result.status == 0)
        let json = try JSONValue.parse(result.standardOutput)
        guard case .array(let entities)? = json["entities"] else { Issue.record("no entities"); return }
        let person = entities.first { $0["name"] == .string("Person") }
        #expect(person?["abstract"] == .bool(true))
        let employee = entities.first { $0["name"] == .string("Employee") }
        #expect(employee?["parent"] == .string("Person"))
        let plain = try FerryProcess.run(["model", "check", path])
        #expect(plain.standardOutput.hasPrefix("ok: 5 entities, version hash "))
    }

    @Test("model check on a bad file names the file, line and problem, and exits 1")
    func modelCheckBad() throws {
        let directory = TemporaryDirectory()
        let bad = directory.file("Bad.xcdatamodel")
        try FileManager.default.createDirectory(atPath: bad, withIntermediateDirectories: true)
        try Data("<model>\n<entity name=\"A\">\n<attribute name=\"x\" attributeType=\"Quaternion\"/>\n</entity>\n</model>".utf8)
            .write(to: URL(fileURLWithPath: bad + "/contents"))
        let result = try FerryProcess.run(["model", "check", bad])
        #expect(result.status == 1)
        #expect(result.standardError.contains("\(bad)/contents:3"))
        #expect(result.standardError.contains("attributeType 'Quaternion' is not supported"))
        #expect(result.standardOutput.isEmpty)
    }

    @Test("init creates a store and its signing key (owner-only) and prints its UUID; state shows the public key; it refuses an existing path or key")
    func initStore() throws {
        let directory = TemporaryDirectory()
        let store = directory.file("s.sqlite")
        let result = try FerryProcess.run(["init", "--store", store, "--model", orgChart])
        #expect(result.status == 0)
        let uuid = result.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(UUID(uuidString: uuid) != nil)
        let keyFile = store + ".key"
        #expect(try FileManager.default.attributesOfItem(atPath: keyFile)[.posixPermissions] as? Int == 0o600)
        let publicKey = try StoreSigningKey(contentsOf: keyFile).publicKey
        #expect(result.standardError.contains("signing key: \(keyFile) (public key \(publicKey))"))
        let state = try FerryProcess.run(["state", "--store", store])
        #expect(state.status == 0 && state.standardOutput.contains(#""public_key":"\#(publicKey)""#), "\(state.standardOutput)")
        let again = try FerryProcess.run(["init", "--store", store, "--model", orgChart])
        #expect(again.status == 1)
        #expect(again.standardError.contains("already exists"))
        // A key left where a new store's would go is not overwritten: the init is refused, no store made.
        let elsewhere = directory.file("t.sqlite")
        try FileManager.default.copyItem(atPath: keyFile, toPath: elsewhere + ".key")
        let refused = try FerryProcess.run(["init", "--store", elsewhere, "--model", orgChart])
        #expect(refused.status == 1 && refused.standardError.contains("t.sqlite.key already exists"))
        #expect(!FileManager.default.fileExists(atPath: elsewhere))
    }

    @Test("origins lists the vector's origins; remove forgets one, and refuses the store's own")
    func origins() throws {
        let directory = TemporaryDirectory()
        let store = directory.file("s.sqlite")
        let uuid = try FerryProcess.run(["init", "--store", store, "--model", orgChart]).standardOutput.trimmingCharacters(in: .whitespacesAndNewlines)
        let put = try FerryProcess.run(["put", "--store", store, "--model", orgChart, "-"],
                                       input: #"[{"op":"insert","entity":"Person","ref":"a","values":{"name":"A"}}]"#)
        #expect(put.status == 0, "\(put.standardError)")
        let listed = try FerryProcess.run(["origins", "list", "--store", store, "--model", orgChart])
        #expect(listed.status == 0 && listed.standardOutput == #"{"origin":"\#(uuid)","own":true,"seq":1}"# + "\n", "\(listed.standardOutput)")
        let own = try FerryProcess.run(["origins", "remove", "--store", store, "--model", orgChart, uuid])
        #expect(own.status == 1 && own.standardError.contains("own origin"), "\(own.standardError)")
        let other = try FerryProcess.run(["origins", "remove", "--store", store, "--model", orgChart, UUID().uuidString])
        #expect(other.status == 0 && other.standardOutput.contains(#""removed":0"#), "\(other.standardOutput) \(other.standardError)")
        let bad = try FerryProcess.run(["origins", "remove", "--store", store, "--model", orgChart, "not-a-uuid"])
        #expect(bad.status != 0 && bad.standardError.contains("not a store UUID"))
    }

    @Test("put applies JSON-lines saves and prints refs; dump reads them back canonically")
    func putAndDump() throws {
        let directory = TemporaryDirectory()
        let store = directory.file("s.sqlite")
        let uuid = try FerryProcess.run(["init", "--store", store, "--model", orgChart]).standardOutput.trimmingCharacters(in: .whitespacesAndNewlines)
        let operations = """
            [{"op":"insert","entity":"Person","ref":"john","values":{"id":1,"name":"John"}},\
            {"op":"insert","entity":"Person","ref":"jane","values":{"id":2,"name":"Jane","manager":"john"}}]
            [{"op":"insert","entity":"Organization","ref":"acme","values":{"name":"Acme","leader":"john"}},\
            {"op":"update","object":"jane","values":{"name":"Jane Doe"}}]
            """
        try Data(operations.utf8).write(to: URL(fileURLWithPath: directory.file("ops.jsonl")))
        let put = try FerryProcess.run(["put", "--store", store, "--model", orgChart, directory.file("ops.jsonl")])
        #expect(put.status == 0, "\(put.standardError)")
        let refs = try JSONValue.parse(put.standardOutput)
        #expect(refs["john"] == .string("x-coredata://\(uuid)/Person/p1"))
        #expect(refs["jane"] == .string("x-coredata://\(uuid)/Person/p2"))
        #expect(refs["acme"] == .string("x-coredata://\(uuid)/Organization/p1"))
        let refsLine = #"{"john":"x-coredata://\#(uuid)/Person/p1","jane":"x-coredata://\#(uuid)/Person/p2","# +
            #""acme":"x-coredata://\#(uuid)/Organization/p1"}"#
        #expect(put.standardOutput == refsLine + "\n",
                "the refs in the input's order")
        let dump = try FerryProcess.run(["dump", "--store", store, "--model", orgChart])
        #expect(dump.status == 0)
        let dumpLines: [String] = [
            #"{"entity":"Organization","uri":"x-coredata://\#(uuid)/Organization/p1","# +
                #""values":{"id":0,"leader":"x-coredata://\#(uuid)/Person/p1","name":"Acme"}}"#,
            #"{"entity":"Person","uri":"x-coredata://\#(uuid)/Person/p1","# +
                #""values":{"employees":["x-coredata://\#(uuid)/Person/p2"],"id":1,"manager":null,"name":"John"}}"#,
            #"{"entity":"Person","uri":"x-coredata://\#(uuid)/Person/p2","# +
                #""values":{"employees":[],"id":2,"manager":"x-coredata://\#(uuid)/Person/p1","name":"Jane Doe"}}"#,
        ]
        #expect(lines(dump.standardOutput) == dumpLines)
        // A later put can name earlier objects by URI, from standard input.
        let delete = try FerryProcess.run(["put", "--store", store, "--model", orgChart, "-"],
                                          input: #"[{"op":"delete","object":"x-coredata://\#(uuid)/Person/p2"}]"#)
        #expect(delete.status == 0, "\(delete.standardError)")
        #expect(delete.standardOutput == "{}\n")
        #expect(lines(try FerryProcess.run(["dump", "--store", store, "--model", orgChart]).standardOutput).count == 2)
        // A copy of the file (same UUID) dumps byte-identically.
        try FileManager.default.copyItem(atPath: store, toPath: directory.file("copy.sqlite"))
        let original = try FerryProcess.run(["dump", "--store", store, "--model", orgChart]).standardOutput
        let copy = try FerryProcess.run(["dump", "--store", directory.file("copy.sqlite"), "--model", orgChart]).standardOutput
        #expect(original == copy)
    }

    @Test("A save that fails validation writes nothing, prints JSON errors on stderr and exits 1")
    func putValidationFailure() throws {
        let directory = TemporaryDirectory()
        let store = directory.file("s.sqlite")
        _ = try FerryProcess.run(["init", "--store", store, "--model", orders])
        let input = """
            [{"op":"insert","entity":"Customer","ref":"ann","values":{"name":"Ann"}}]
            [{"op":"insert","entity":"Customer","ref":"nameless","values":{"info":"?"}},{"op":"insert","entity":"Order","ref":"o","values":{"customer":"ann"}}]
            """
        let result = try FerryProcess.run(["put", "--store", store, "--model", orders, "-"], input: input)
        #expect(result.status == 1)
        let refs = try JSONValue.parse(result.standardOutput)
        #expect(refs.objectMembers?.map(\.0) == ["ann"], "the first save committed")
        let report = try JSONValue.parse(result.standardError)
        #expect(report["error"] == .string("validation failed"))
        #expect(report["save"] == .integer(2))
        #expect(report["committedSaves"] == .integer(1))
        guard case .array(let errors)? = report["errors"] else { Issue.record("no errors array"); return }
        let described = errors.map { "\($0["ref"]?.stringValue ?? "-").\($0["key"]?.stringValue ?? "-"):\($0["code"]?.text ?? "")" }
        #expect(Set(described) == ["nameless.name:1570", "o.date:1570"])
        let dump = try FerryProcess.run(["dump", "--store", store, "--model", orders])
        #expect(lines(dump.standardOutput).count == 1)
    }

    @Test("A Deny rule refusal is reported the same way")
    func putDeny() throws {
        let directory = TemporaryDirectory()
        let model = directory.file("Deny.xcdatamodel")
        try FileManager.default.createDirectory(atPath: model, withIntermediateDirectories: true)
        try Data("""
            <model><entity name="Team">\
            <relationship name="members" optional="YES" toMany="YES" deletionRule="Deny" destinationEntity="Member" inverseName="team" inverseEntity="Member"/>\
            </entity>
            <entity name="Member">\
            <relationship name="team" optional="YES" maxCount="1" deletionRule="Nullify" destinationEntity="Team" inverseName="members" inverseEntity="Team"/>\
            </entity></model>
            """.utf8).write(to: URL(fileURLWithPath: model + "/contents"))
        let store = directory.file("s.sqlite")
        _ = try FerryProcess.run(["init", "--store", store, "--model", model])
        let setup = try FerryProcess.run(["put", "--store", store, "--model", model, "-"],
                                         input: #"[{"op":"insert","entity":"Team","ref":"t"},"# +
                                             #"{"op":"insert","entity":"Member","ref":"m","values":{"team":"t"}}]"#)
        let team = try #require(try JSONValue.parse(setup.standardOutput)["t"]?.stringValue)
        let result = try FerryProcess.run(["put", "--store", store, "--model", model, "-"], input: #"[{"op":"delete","object":"\#(team)"}]"#)
        #expect(result.status == 1)
        let report = try JSONValue.parse(result.standardError)
        #expect(report["code"] == .integer(1600))
        #expect(result.standardError.contains("members"))
        #expect(result.standardError.contains(team))
        #expect(lines(try FerryProcess.run(["dump", "--store", store, "--model", model]).standardOutput).count == 2)
    }

    @Test("A duplicate unique key fails under the default policy, naming both objects; --merge-policy object-trump upserts")
    func putMergePolicy() throws {
        let directory = TemporaryDirectory()
        let model = directory.file("Unique.xcdatamodel")
        try FileManager.default.createDirectory(atPath: model, withIntermediateDirectories: true)
        try Data("""
            <model><entity name="User"><attribute name="email" optional="YES" attributeType="String"/>\
            <attribute name="name" optional="YES" attributeType="String"/>
            <uniquenessConstraints><uniquenessConstraint><constraint value="email"/></uniquenessConstraint></uniquenessConstraints></entity></model>
            """.utf8).write(to: URL(fileURLWithPath: model + "/contents"))
        let store = directory.file("s.sqlite")
        _ = try FerryProcess.run(["init", "--store", store, "--model", model])
        let setup = try FerryProcess.run(["put", "--store", store, "--model", model, "-"],
                                         input: #"[{"op":"insert","entity":"User","ref":"ann","values":{"email":"ann@x","name":"Ann"}}]"#)
        let ann = try #require(try JSONValue.parse(setup.standardOutput)["ann"]?.stringValue)
        let duplicate = #"[{"op":"insert","entity":"User","ref":"again","values":{"email":"ann@x","name":"Annie"}}]"#
        let refused = try FerryProcess.run(["put", "--store", store, "--model", model, "-"], input: duplicate)
        #expect(refused.status == 1)
        let report = try JSONValue.parse(refused.standardError)
        #expect(report["error"] == .string("uniqueness constraint"))
        #expect(report["code"] == .integer(133021))
        guard case .array(let conflicts)? = report["conflicts"], let conflict = conflicts.first else {
            Issue.record("no conflicts: \(refused.standardError)")
            return
        }
        #expect(conflict["constraint"] == .string("User(email)"))
        #expect(conflict["ref"] == .string("again"))
        #expect(conflict["conflictingObject"] == .string(ann))
        #expect(lines(try FerryProcess.run(["dump", "--store", store, "--model", model]).standardOutput).count == 1)

        let upsert = try FerryProcess.run(["put", "--store", store, "--model", model, "--merge-policy", "object-trump", "-"], input: duplicate)
        #expect(upsert.status == 0, "\(upsert.standardError)")
        let dump = lines(try FerryProcess.run(["dump", "--store", store, "--model", model]).standardOutput)
        #expect(dump.count == 1)
        #expect(dump.first?.contains("\"name\":\"Annie\"") == true)
        #expect(dump.first?.contains(ann) == true)
        let bad = try FerryProcess.run(["put", "--store", store, "--model", model, "--merge-policy", "newest", "-"], input: duplicate)
        #expect(bad.status != 0 && bad.standardError.contains("merge-policy"))
    }

    @Test("A malformed file is rejected whole, nothing written")
    func putMalformed() throws {
        let directory = TemporaryDirectory()
        let store = directory.file("s.sqlite")
        _ = try FerryProcess.run(["init", "--store", store, "--model", orgChart])
        let input = "[{\"op\":\"insert\",\"entity\":\"Person\",\"ref\":\"a\"}]\n[{\"op\":\"insert\",\"entity\":\"Person\",\"values\":{\"id\":\"seven\"}}]\n"
        let result = try FerryProcess.run(["put", "--store", store, "--model", orgChart, "-"], input: input)
        #expect(result.status == 1)
        #expect(result.standardError.contains("Integer 64 takes a whole number"))
        #expect(result.standardError.contains("save 2, operation 1"))
        #expect(try FerryProcess.run(["dump", "--store", store, "--model", orgChart]).standardOutput.isEmpty)
        let broken = try FerryProcess.run(["put", "--store", store, "--model", orgChart, "-"], input: "[{\"op\":")
        #expect(broken.status == 1)
        #expect(broken.standardError.contains("not valid JSON"))
    }

    @Test("A store made with an earlier version of the bundle migrates when a command opens it with the new current version")
    func migratesThroughBundle() throws {
        let directory = TemporaryDirectory()
        let bundle = directory.file("Notes.xcdatamodeld")
        let version1 = try ManagedObjectModel {
            Entity("Note") { Attribute("text", .string); Attribute("stars", .integer16); Attribute("scratch", .string) }
        }
        let version2 = try ManagedObjectModel {
            Entity("Note") { Attribute("body", .string, renamedFrom: "text"); Attribute("stars", .integer64) }
        }
        try ModelBundle.write([("Notes", version1)], current: "Notes", to: bundle)
        let store = directory.file("s.sqlite")
        let uuid = try FerryProcess.run(["init", "--store", store, "--model", bundle]).standardOutput.trimmingCharacters(in: .whitespacesAndNewlines)
        let put = try FerryProcess.run(["put", "--store", store, "--model", bundle, "-"],
                                       input: #"[{"op":"insert","entity":"Note","values":{"text":"hi","stars":4,"scratch":"x"}}]"#)
        #expect(put.status == 0, "\(put.standardError)")
        // Version 2 alone does not know the store's version: the removal of `scratch` is refused.
        try ModelBundle.write([("Notes 2", version2)], current: "Notes 2", to: directory.file("Only2.xcdatamodeld"))
        let refused = try FerryProcess.run(["dump", "--store", store, "--model", directory.file("Only2.xcdatamodeld")])
        #expect(refused.status == 1 && refused.standardError.contains("'scratch' was removed"), "\(refused.standardError)")
        try ModelBundle.write([("Notes", version1), ("Notes 2", version2)], current: "Notes 2", to: bundle)
        let dump = try FerryProcess.run(["dump", "--store", store, "--model", bundle])
        #expect(dump.status == 0, "\(dump.standardError)")
        #expect(dump.standardOutput == #"{"entity":"Note","uri":"x-coredata://\#(uuid)/Note/p1","values":{"body":"hi","stars":4}}"# + "\n")
    }

    @Test("Store commands explain a missing store, a missing file and a wrong model")
    func operatorErrors() throws {
        let directory = TemporaryDirectory()
        let missing = try FerryProcess.run(["dump", "--store", directory.file("none.sqlite"), "--model", orgChart])
        #expect(missing.status == 1)
        #expect(missing.standardError.contains("ferry init"))
        let store = directory.file("s.sqlite")
        _ = try FerryProcess.run(["init", "--store", store, "--model", orgChart])
        let noFile = try FerryProcess.run(["put", "--store", store, "--model", orgChart, directory.file("nope.json")])
        #expect(noFile.status == 1)
        #expect(noFile.standardError.contains("cannot read"))
        let wrongModel = try FerryProcess.run(["dump", "--store", store, "--model", orders])
        #expect(wrongModel.status == 1)
        #expect(wrongModel.standardError.contains("incompatible"))
        #expect(wrongModel.standardError.contains("entity 'Person' was removed"))
        let usage = try FerryProcess.run(["frobnicate"])
        #expect(usage.status == 64)
    }

    @Test("query prints matching objects as dump lines, sorted and windowed, or their count")
    func query() throws {
        let directory = TemporaryDirectory()
        let store = directory.file("s.sqlite")
        _ = try FerryProcess.run(["init", "--store", store, "--model", orgChart])
        let input = #"[{"op":"insert","entity":"Person","ref":"j","values":{"id":1,"name":"John"}},{"op":"insert","entity":"Person","ref":"a","# +
            #""values":{"id":2,"name":"Jane","manager":"j"}},{"op":"insert","entity":"Person","ref":"e","values":{"id":3,"name":"Émile","manager":"j"}},"# +
            #"{"op":"insert","entity":"Person","ref":"l","values":{"id":4,"name":"alice"}}]"#
        _ = try FerryProcess.run(["put", "--store", store, "--model", orgChart, "-"], input: input)
        let matches = try FerryProcess.run(["query", "--store", store, "--model", orgChart, "Person",
                                            "--where", "name BEGINSWITH[cd] 'e' OR manager.name == 'John'", "--sort", "-id"])
        #expect(matches.status == 0, "\(matches.standardError)")
        let ids = try lines(matches.standardOutput).map { try JSONValue.parse($0)["values"]?["id"] }
        #expect(ids == [.integer(3), .integer(2)])
        let dump = lines(try FerryProcess.run(["dump", "--store", store, "--model", orgChart]).standardOutput)
        #expect(lines(matches.standardOutput).allSatisfy(dump.contains), "query lines have the dump's canonical form")
        let window = try FerryProcess.run(["query", "--store", store, "--model", orgChart, "Person", "--sort", "name", "--limit", "1", "--offset", "1"])
        #expect(try lines(window.standardOutput).map { try JSONValue.parse($0)["values"]?["name"] } == [.string("John")])
        let count = try FerryProcess.run(["query", "--store", store, "--model", orgChart, "Person", "--where", "id >= 2", "--count"])
        #expect(count.standardOutput == "3\n")
        func names(_ sort: String) throws -> [JSONValue?] {
            let result = try FerryProcess.run(["query", "--store", store, "--model", orgChart, "Person", "--sort", sort])
            #expect(result.status == 0, "\(result.standardError)")
            return try lines(result.standardOutput).map { try JSONValue.parse($0)["values"]?["name"] }
        }
        #expect(try names("name") == ["Jane", "John", "alice", "Émile"].map { .string($0) }, "bytes: upper case first")
        #expect(try names("name[c]") == ["alice", "Jane", "John", "Émile"].map { .string($0) }, "ignoring case")
        #expect(try names("-name[c]") == ["Émile", "John", "Jane", "alice"].map { .string($0) })
        let badSort = try FerryProcess.run(["query", "--store", store, "--model", orgChart, "Person", "--sort", "id[c]"])
        #expect(badSort.status == 1)
        #expect(badSort.standardError.contains("a case-insensitive sort, which needs a String attribute"))
    }

    @Test("query reports a bad predicate with a caret and exits 1")
    func queryBadPredicate() throws {
        let directory = TemporaryDirectory()
        let store = directory.file("s.sqlite")
        _ = try FerryProcess.run(["init", "--store", store, "--model", orgChart])
        let unknown = try FerryProcess.run(["query", "--store", store, "--model", orgChart, "Person", "--where", "id == 1 AND nick == 'x'"])
        #expect(unknown.status == 1)
        #expect(unknown.standardError.contains("'Person' has no property 'nick'"))
        #expect(unknown.standardError.contains("  id == 1 AND nick == 'x'\n              ^"))
        let syntax = try FerryProcess.run(["query", "--store", store, "--model", orgChart, "Person", "--where", "name =="])
        #expect(syntax.status == 1)
        #expect(syntax.standardError.contains("ends where a value or key was expected"))
        let entity = try FerryProcess.run(["query", "--store", store, "--model", orgChart, "Robot"])
        #expect(entity.status == 1)
        #expect(entity.standardError.contains("no entity named 'Robot'"))
    }
}
