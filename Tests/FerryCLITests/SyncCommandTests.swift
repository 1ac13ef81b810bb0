import Foundation
import Testing
import FerryTestTraits
import FerryStore
import FerryTestSupport

/// Syncing two stores through files: `ferry history` on one, `ferry apply` on the other.
@Suite("Syncing by files with ferry state, history, apply and conflicts", .blocking)
struct SyncCommandTests {
    let orgChart = SampleModels.path("OrgChart")

    func lines(_ text: String) -> [String] { text.split(separator: "\n").map(String.init) }

    func ferry(_ arguments: [String], input: String? = nil) throws -> FerryProcess.Result {
        try FerryProcess.run(arguments, input: input)
    }

    @Test("Two stores converge through history and apply; state shows the vectors")
    func byFiles() throws {
        let directory = TemporaryDirectory()
        let a = directory.file("a.sqlite")
        let b = directory.file("b.sqlite")
        for store in [a, b] { #expect(try ferry(["init", "--store", store, "--model", orgChart]).status == 0) }
        let put = #"[{"op":"insert","entity":"Person","ref":"j","values":{"id":1,"name":"John"}},{"op":"insert","entity":"Person","ref":"a","# +
            #""values":{"id":2,"name":"Jane","manager":"j"}}]"#
        #expect(try ferry(["put", "--store", a, "--model", orgChart, "-"], input: put).status == 0)
        #expect(try ferry(["put", "--store", b, "--model", orgChart, "-"],
                          input: #"[{"op":"insert","entity":"Person","values":{"id":3,"name":"Bea"}}]"#).status == 0)

        let stateA = try JSONValue.parse(try ferry(["state", "--store", a]).standardOutput)
        let storeA = try #require(stateA["store"]?.stringValue)
        #expect(stateA["vector"] == .sortedObject([storeA: .integer(1)]))
        #expect(stateA["model"]?.stringValue?.count == 64)

        let historyA = try ferry(["history", "--store", a, "--model", orgChart])
        #expect(lines(historyA.standardOutput).count == 1)
        let applied = try ferry(["apply", "--store", b, "--model", orgChart, "-"], input: historyA.standardOutput)
        #expect(applied.status == 0, "\(applied.standardError)")
        let report = try JSONValue.parse(applied.standardOutput)
        #expect(report["applied"] == .integer(1) && report["duplicate"] == .integer(0)
                && report["waiting"] == .integer(0) && report["quarantined"] == .integer(0))

        let vectorB = try #require(try JSONValue.parse(try ferry(["state", "--store", b]).standardOutput)["vector"])
        let vectorA = try ferry(["state", "--store", a, "--vector"]).standardOutput.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(vectorA == #"{"\#(storeA)":1}"#)
        let historyB = try ferry(["history", "--store", b, "--model", orgChart, "--after", vectorA])
        #expect(lines(historyB.standardOutput).count == 1, "only b's own change set; a's is not echoed back")
        #expect(try ferry(["apply", "--store", a, "--model", orgChart, "-"], input: historyB.standardOutput).status == 0)
        let dumpA = try ferry(["dump", "--store", a, "--model", orgChart]).standardOutput
        let dumpB = try ferry(["dump", "--store", b, "--model", orgChart]).standardOutput
        #expect(dumpA == dumpB)
        #expect(lines(dumpA).count == 3)
        #expect(vectorB.objectMembers?.count == 2)

        // Applying the same file again: duplicates only.
        let again = try JSONValue.parse(try ferry(["apply", "--store", b, "--model", orgChart, "-"], input: historyA.standardOutput).standardOutput)
        #expect(again["duplicate"] == .integer(1) && again["applied"] == .integer(0))
        #expect(try ferry(["conflicts", "list", "--store", b, "--model", orgChart]).standardOutput == "")
    }

    @Test("put prints every ref's URI as one JSON object (refs escaped), dump streams every object in URI order")
    func putAndDump() throws {
        let directory = TemporaryDirectory()
        let store = directory.file("s.sqlite")
        #expect(try ferry(["init", "--store", store, "--model", orgChart]).status == 0)
        var lines: [String] = []
        for save in 0..<3 {
            let operations = (0..<40).map { index in
                let number = save * 40 + index
                return #"{"op":"insert","entity":"Person","ref":"p\#(number)\"q","values":{"id":\#(number),"name":"P\#(number) ✓"}}"#
            }
            lines.append("[" + operations.joined(separator: ",") + "]")
        }
        let put = try ferry(["put", "--store", store, "--model", orgChart, "-"], input: lines.joined(separator: "\n"))
        #expect(put.status == 0, "\(put.standardError)")
        #expect(put.standardError.isEmpty, "no progress into a pipe: \(put.standardError)")
        let refs = try #require(try JSONValue.parse(put.standardOutput).objectMembers)
        #expect(refs.count == 120 && refs.map(\.0) == refs.map(\.0).sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) })
        #expect(refs.first { $0.0 == "p7\"q" }?.1.stringValue?.hasSuffix("/Person/p8") == true)
        let dump = try ferry(["dump", "--store", store, "--model", orgChart])
        let uris = try self.lines(dump.standardOutput).map { try #require(try JSONValue.parse($0)["uri"]?.stringValue) }
        #expect(uris.count == 120 && uris == uris.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) })
        #expect(dump.standardOutput.contains(#""name":"P7 ✓""#))
    }

    @Test("history purge deletes what every peer's state file covers, says what went, and explains bad input")
    func purgeByHand() throws {
        let directory = TemporaryDirectory()
        let a = directory.file("a.sqlite"), b = directory.file("b.sqlite")
        for store in [a, b] { #expect(try ferry(["init", "--store", store, "--model", orgChart]).status == 0) }
        for id in 1...3 {
            #expect(try ferry(["put", "--store", a, "--model", orgChart, "-"],
                              input: #"[{"op":"insert","entity":"Person","values":{"id":\#(id)}}]"#).status == 0)
        }
        let before = try ferry(["state", "--store", b]).standardOutput
        let stale = directory.file("b-before.json")
        try before.write(toFile: stale, atomically: true, encoding: .utf8)
        #expect(try ferry(["apply", "--store", b, "--model", orgChart, "-"],
                          input: try ferry(["history", "--store", a, "--model", orgChart]).standardOutput).status == 0)
        let state = directory.file("b.json"), vector = directory.file("b-vector.json")
        try ferry(["state", "--store", b]).standardOutput.write(toFile: state, atomically: true, encoding: .utf8)
        try ferry(["state", "--store", b, "--vector"]).standardOutput.write(toFile: vector, atomically: true, encoding: .utf8)

        // No peer files: nothing goes. A peer that has nothing yet: nothing goes.
        #expect(try ferry(["history", "purge", "--store", a, "--model", orgChart]).standardOutput
                == #"{"forgotten_aliases":0,"forgotten_tombstones":0,"purged_change_sets":0}"# + "\n")
        #expect(try ferry(["history", "purge", "--store", a, "--model", orgChart, "--acknowledged", state, "--acknowledged", stale]).standardOutput
                == #"{"forgotten_aliases":0,"forgotten_tombstones":0,"purged_change_sets":0}"# + "\n")
        // B has all three (its state and its bare vector say so).
        let purged = try ferry(["history", "purge", "--store", a, "--model", orgChart, "--acknowledged", state, "--acknowledged", vector])
        #expect(purged.status == 0, "\(purged.standardError)")
        #expect(purged.standardOutput == #"{"forgotten_aliases":0,"forgotten_tombstones":0,"purged_change_sets":3}"# + "\n")
        let history = try ferry(["history", "--store", a, "--model", orgChart])
        #expect(history.status == 1 && history.standardError.contains("were purged"), "\(history.standardError)")
        #expect(try ferry(["history", "--store", a, "--model", orgChart, "--after", try String(contentsOfFile: vector, encoding: .utf8)]).standardOutput == "")

        let junk = directory.file("junk.json")
        try "not json".write(toFile: junk, atomically: true, encoding: .utf8)
        let bad = try ferry(["history", "purge", "--store", a, "--model", orgChart, "--acknowledged", junk])
        #expect(bad.status != 0 && bad.standardError.contains("not the output of `ferry state`"), "\(bad.standardError)")
        let missing = try ferry(["history", "purge", "--store", a, "--model", orgChart, "--acknowledged", directory.file("none.json")])
        #expect(missing.status != 0 && missing.standardError.contains("cannot read it"), "\(missing.standardError)")
        let order = try ferry(["history", "purge", "--store", a, "--model", orgChart, "--retention", "60", "--tombstone-horizon", "10"])
        #expect(order.status != 0 && order.standardError.contains("--tombstone-horizon must be at least --retention"), "\(order.standardError)")

        // B holds a change set A has not taken in: forgetting deletes now could refuse it later.
        #expect(try ferry(["put", "--store", b, "--model", orgChart, "-"], input: #"[{"op":"insert","entity":"Person","values":{"id":9}}]"#).status == 0)
        let ahead = directory.file("b-ahead.json")
        try ferry(["state", "--store", b]).standardOutput.write(toFile: ahead, atomically: true, encoding: .utf8)
        let unsafe = try ferry(["history", "purge", "--store", a, "--model", orgChart, "--acknowledged", ahead, "--tombstone-horizon", "0"])
        #expect(unsafe.status != 0 && unsafe.standardError.contains("holds change sets this store has not taken in")
                && unsafe.standardError.contains("Sync with that peer first"), "\(unsafe.standardError)")
        #expect(try ferry(["history", "purge", "--store", a, "--model", orgChart, "--acknowledged", ahead]).status == 0,
                "without a horizon, change sets go as before")
    }

    /// Two stores of `model` (XML `contents`), each deleting a different one of two objects inserted
    /// by `setup` (refs `first` and `second`), then exchanging their histories both ways.
    func deleteConcurrently(model contents: String, setup: String, in directory: TemporaryDirectory) throws -> (a: String, b: String, model: String) {
        let model = directory.file("Model.xcdatamodel")
        try FileManager.default.createDirectory(atPath: model, withIntermediateDirectories: true)
        try Data(contents.utf8).write(to: URL(fileURLWithPath: model + "/contents"))
        let a = directory.file("a.sqlite"), b = directory.file("b.sqlite")
        for store in [a, b] { #expect(try ferry(["init", "--store", store, "--model", model]).status == 0) }
        let refs = try JSONValue.parse(try ferry(["put", "--store", a, "--model", model, "-"], input: setup).standardOutput)
        let first = try #require(refs["first"]?.stringValue), second = try #require(refs["second"]?.stringValue)
        #expect(try ferry(["apply", "--store", b, "--model", model, "-"],
                          input: try ferry(["history", "--store", a, "--model", model]).standardOutput).status == 0)
        // Each store deletes a different one: each save is valid on its own.
        #expect(try ferry(["put", "--store", a, "--model", model, "-"], input: #"[{"op":"delete","object":"\#(first)"}]"#).status == 0)
        #expect(try ferry(["put", "--store", b, "--model", model, "-"], input: #"[{"op":"delete","object":"\#(second)"}]"#).status == 0)
        let fromA = try ferry(["history", "--store", a, "--model", model]).standardOutput
        let fromB = try ferry(["history", "--store", b, "--model", model]).standardOutput
        let toB = try JSONValue.parse(try ferry(["apply", "--store", b, "--model", model, "-"], input: fromA).standardOutput)
        let toA = try JSONValue.parse(try ferry(["apply", "--store", a, "--model", model, "-"], input: fromB).standardOutput)
        #expect(toA["quarantined"] == .integer(0) && toB["quarantined"] == .integer(0))
        #expect(try ferry(["dump", "--store", a, "--model", model]).standardOutput == (try ferry(["dump", "--store", b, "--model", model]).standardOutput))
        return (a, b, model)
    }

    @Test("Deletes that leave a to-many below its minimum only together: both stores bring back the later-deleted member; nothing is listed")
    func minimumRepaired() throws {
        let directory = TemporaryDirectory()
        let (a, b, model) = try deleteConcurrently(model: """
            <model><entity name="Continent"><attribute name="name" optional="YES" attributeType="String"/>
            <relationship name="countries" optional="NO" minCount="1" toMany="YES" deletionRule="Nullify" destinationEntity="Country" \
            inverseName="continent" inverseEntity="Country"/></entity>
            <entity name="Country"><attribute name="name" optional="YES" attributeType="String"/>
            <relationship name="continent" optional="YES" maxCount="1" deletionRule="Nullify" destinationEntity="Continent" \
            inverseName="countries" inverseEntity="Continent"/></entity></model>
            """, setup: #"[{"op":"insert","entity":"Continent","ref":"eu","values":{"name":"Europe"}},"# +
                #"{"op":"insert","entity":"Country","ref":"first","values":{"name":"France","continent":"eu"}},"# +
                #"{"op":"insert","entity":"Country","ref":"second","values":{"name":"Spain","continent":"eu"}}]"#,
            in: directory)
        let dump = try ferry(["dump", "--store", a, "--model", model]).standardOutput
        #expect(dump.contains("Spain") && !dump.contains("France"), "B's delete of Spain was the later one: \(dump)")
        for store in [a, b] {
            #expect(try ferry(["conflicts", "list", "--store", store, "--model", model]).standardOutput == "")
        }
    }

    @Test("Delete and new reference valid alone, not together, unrepairable (No Action, required to-one): applied on both; conflicts list shows left-invalid")
    func leftInvalid() throws {
        let directory = TemporaryDirectory()
        let model = directory.file("Model.xcdatamodel")
        try FileManager.default.createDirectory(atPath: model, withIntermediateDirectories: true)
        try Data("""
            <model><entity name="Continent"><attribute name="name" optional="YES" attributeType="String"/>
            <relationship name="countries" optional="YES" toMany="YES" deletionRule="No Action" destinationEntity="Country" \
            inverseName="continent" inverseEntity="Country"/></entity>
            <entity name="Country"><attribute name="name" optional="YES" attributeType="String"/>
            <relationship name="continent" optional="NO" maxCount="1" deletionRule="Nullify" destinationEntity="Continent" \
            inverseName="countries" inverseEntity="Continent"/></entity></model>
            """.utf8).write(to: URL(fileURLWithPath: model + "/contents"))
        let a = directory.file("a.sqlite"), b = directory.file("b.sqlite")
        for store in [a, b] { #expect(try ferry(["init", "--store", store, "--model", model]).status == 0) }
        let refs = try JSONValue.parse(try ferry(["put", "--store", a, "--model", model, "-"],
                                                  input: #"[{"op":"insert","entity":"Continent","ref":"eu","values":{"name":"Europe"}}]"#).standardOutput)
        let europe = try #require(refs["eu"]?.stringValue)
        #expect(try ferry(["apply", "--store", b, "--model", model, "-"],
                          input: try ferry(["history", "--store", a, "--model", model]).standardOutput).status == 0)
        // A deletes Europe (no countries there); B adds France to it: each save is valid on its own.
        #expect(try ferry(["put", "--store", a, "--model", model, "-"], input: #"[{"op":"delete","object":"\#(europe)"}]"#).status == 0)
        let put = try ferry(["put", "--store", b, "--model", model, "-"],
                            input: #"[{"op":"insert","entity":"Country","values":{"name":"France","continent":"\#(europe)"}}]"#)
        #expect(put.status == 0, "\(put.standardError)")
        let fromA = try ferry(["history", "--store", a, "--model", model]).standardOutput
        let fromB = try ferry(["history", "--store", b, "--model", model]).standardOutput
        #expect(try ferry(["apply", "--store", b, "--model", model, "-"], input: fromA).status == 0)
        #expect(try ferry(["apply", "--store", a, "--model", model, "-"], input: fromB).status == 0)
        let dump = try ferry(["dump", "--store", a, "--model", model]).standardOutput
        #expect(dump == (try ferry(["dump", "--store", b, "--model", model]).standardOutput))
        #expect(dump.contains("France") && !dump.contains("Europe"), "\(dump)")
        var reasons: [String] = []
        for store in [a, b] {
            let listed = try lines(try ferry(["conflicts", "list", "--store", store, "--model", model]).standardOutput).map { try JSONValue.parse($0) }
            #expect(listed.count == 1)
            #expect(listed.first?["status"] == .string("left-invalid"))
            reasons += listed.compactMap { $0["reason"]?.stringValue }
        }
        #expect(reasons.count == 2 && reasons[0] == reasons[1] && reasons[0].contains("Country.continent"), "\(reasons)")
    }

    @Test("A malformed file is rejected whole, naming the line; nothing is applied")
    func malformed() throws {
        let directory = TemporaryDirectory()
        let a = directory.file("a.sqlite")
        let b = directory.file("b.sqlite")
        for store in [a, b] { _ = try ferry(["init", "--store", store, "--model", orgChart]) }
        _ = try ferry(["put", "--store", a, "--model", orgChart, "-"], input: #"[{"op":"insert","entity":"Person","values":{"id":1}}]"#)
        let good = try ferry(["history", "--store", a, "--model", orgChart]).standardOutput
        let bad = good + #"{"format":1,"origin":"not-a-uuid"}"# + "\n"
        let result = try ferry(["apply", "--store", b, "--model", orgChart, "-"], input: bad)
        #expect(result.status == 1)
        #expect(result.standardError.contains("line 2"))
        #expect(result.standardError.contains("'origin' must be a store UUID"))
        #expect(try ferry(["dump", "--store", b, "--model", orgChart]).standardOutput == "", "nothing applied")
        let wrongEntity = good.replacingOccurrences(of: "\"Person\"", with: "\"Robot\"")
        let entityResult = try ferry(["apply", "--store", b, "--model", orgChart, "-"], input: wrongEntity)
        #expect(entityResult.status == 1)
        #expect(entityResult.standardError.contains("the model has no entity 'Robot'"))
        let state = try ferry(["state", "--store", directory.file("missing.sqlite")])
        #expect(state.status == 1 && state.standardError.contains("no store file here"))
    }

    @Test("A change set whose predecessor is missing waits, then applies when it arrives")
    func waiting() throws {
        let directory = TemporaryDirectory()
        let a = directory.file("a.sqlite")
        let b = directory.file("b.sqlite")
        for store in [a, b] { _ = try ferry(["init", "--store", store, "--model", orgChart]) }
        for id in 1...2 {
            _ = try ferry(["put", "--store", a, "--model", orgChart, "-"], input: #"[{"op":"insert","entity":"Person","values":{"id":\#(id)}}]"#)
        }
        let sets = lines(try ferry(["history", "--store", a, "--model", orgChart]).standardOutput)
        try #require(sets.count == 2)
        let second = try JSONValue.parse(try ferry(["apply", "--store", b, "--model", orgChart, "-"], input: sets[1]).standardOutput)
        #expect(second["waiting"] == .integer(1) && second["applied"] == .integer(0))
        let listed = try ferry(["conflicts", "list", "--store", b, "--model", orgChart]).standardOutput
        #expect(listed.contains(#""status":"waiting""#) && listed.contains("waiting for change sets"))
        let first = try JSONValue.parse(try ferry(["apply", "--store", b, "--model", orgChart, "-"], input: sets[0]).standardOutput)
        #expect(first["applied"] == .integer(2), "the held one follows its predecessor")
        #expect(try ferry(["dump", "--store", b, "--model", orgChart]).standardOutput
                == (try ferry(["dump", "--store", a, "--model", orgChart]).standardOutput))
    }
}
