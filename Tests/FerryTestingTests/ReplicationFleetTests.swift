import Foundation
import Testing
import FerryModel
import FerryStore
import FerryTesting

/// `FerryTesting` as an application's tests use it: its own model, replicas in one process,
/// partitions, and the convergence check.
@Suite("Replication fleet")
struct ReplicationFleetTests {
    static let model: ManagedObjectModel = {
        do {
            return try ManagedObjectModel {
                Entity("Note") {
                    Attribute("text", .string)
                    Relationship("tags", to: "Tag", inverse: "notes", toMany: true)
                }
                Entity("Tag") {
                    Attribute("name", .string)
                    Relationship("notes", to: "Note", inverse: "tags", toMany: true)
                }
            }
        } catch {
            preconditionFailure("the test model: \(error)")
        }
    }()

    static func write(_ text: String, on fleet: ReplicationFleet, _ replica: String) throws {
        let context = fleet.container(replica).newContext()
        let note = try context.insert(entityName: "Note")
        try note.setValue(text, forKey: "text")
        try context.save()
    }

    @Test("Writes on every replica reach every other, and the replicas converge", arguments: [ReplicationFleet.Storage.memory, .sqlite])
    func writesConverge(storage: ReplicationFleet.Storage) async throws {
        let fleet = try ReplicationFleet(model: Self.model, replicas: ["a", "b", "c"], storage: storage)
        try Self.write("from a", on: fleet, "a")
        try Self.write("from c", on: fleet, "c")
        let passes = try await fleet.syncUntilQuiet()
        #expect(passes >= 1)
        try fleet.checkConverged()
        #expect(try fleet.dump("b").count == 2)
    }

    @Test("Across a partition nothing flows, the check names the first object that differs, and healed the fleet converges")
    func partitionAndHeal() async throws {
        let fleet = try ReplicationFleet(model: Self.model, replicas: ["a", "b", "c"])
        fleet.partition(["a"], from: ["b", "c"])
        #expect(fleet.isCut(from: "a", to: "b") && fleet.isCut(from: "c", to: "a") && !fleet.isCut(from: "b", to: "c"))
        try Self.write("only on a", on: fleet, "a")
        try Self.write("on b", on: fleet, "b")
        try await fleet.syncUntilQuiet()
        // b and c reached each other; a reached neither.
        try fleet.checkConverged(["b", "c"])
        #expect(try fleet.dump("a").count == 1)
        do {
            try fleet.checkConverged()
            Issue.record("a partitioned fleet was found converged")
        } catch let failure as ConvergenceFailure {
            #expect(failure.replicas.reference == "a" && failure.replicas.other == "b")
            #expect(failure.differing == 2, "\(failure)")
            let aLine = try #require(try fleet.dump("a").first)
            let bLine = try #require(try fleet.dump("b").first)
            let firstURI = min(Self.uri(aLine), Self.uri(bLine))
            #expect(failure.uri == firstURI, "\(failure)")
            #expect(failure.description.contains(firstURI))
            #expect((failure.lines.reference == nil) != (failure.lines.other == nil), "one side lacks the object: \(failure)")
        }
        fleet.heal()
        #expect(!fleet.isCut(from: "a", to: "b"))
        try await fleet.syncUntilQuiet()
        try fleet.checkConverged()
        #expect(try fleet.dump("c").count == 2)
    }

    @Test("A round between replicas that are not cut off fails loudly; sync reports a cut link's failure")
    func failuresAreReported() async throws {
        let fleet = try ReplicationFleet(model: Self.model, replicas: ["a", "b"])
        fleet.partition(["a"], from: ["b"])
        let results = await fleet.sync("a")
        #expect(results.count == 1 && results.first?.peer == "b" && results.first?.error != nil)
        // Cut links' failures are expected; quiet at once.
        #expect(try await fleet.syncUntilQuiet() == 0)
    }

    @Test("A fleet needs two distinct names, each one a host name can be")
    func names() {
        #expect(throws: FleetError.self) { try ReplicationFleet(model: Self.model, replicas: ["a"]) }
        #expect(throws: FleetError.self) { try ReplicationFleet(model: Self.model, replicas: ["a", "a"]) }
        #expect(throws: FleetError.self) { try ReplicationFleet(model: Self.model, replicas: ["a", "../b"]) }
        #expect(throws: FleetError.self) { try ReplicationFleet(model: Self.model, replicas: ["a", ""]) }
    }

    static func uri(_ line: String) -> String {
        ((try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any])?["uri"] as? String ?? ""
    }
}
