import Foundation
import Testing
import FerryModel
import FerryStore
import FerrySQLite
import FerrySync
import FerryTestSupport

/// Uniqueness constraints across replicas (docs/SYNC.md): objects of different origins with
/// one unique key merge into the one whose origin URI sorts first, on every replica and in
/// any order; the loser's URI becomes an alias, so later change sets naming it land on the survivor.
@Suite("Duplicates merged across replicas")
struct DuplicateMergeTests {
    static let model = ConvergenceTests.members
    static let a = UUID(uuidString: "AAAAAAAA-0000-4000-8000-000000000001") ?? UUID()
    static let b = UUID(uuidString: "BBBBBBBB-0000-4000-8000-000000000002") ?? UUID()
    static let c = UUID(uuidString: "CCCCCCCC-0000-4000-8000-000000000003") ?? UUID()

    /// A's and B's saves: each inserts a member with email ann@x (and a club and tag of its own);
    /// B then renames its member, and tags it.
    static func twoDuplicates(_ kind: Replica.Kind) throws -> (a: Replica, b: Replica, annA: String, annB: String) {
        let a = try Replica(model: model, identifier: Self.a, kind: kind)
        let b = try Replica(model: model, identifier: Self.b, kind: kind == .sqlite ? .memory : .sqlite)
        let fromA = try a.context.make("Member", ["email": "ann@x", "name": "Ann", "score": Int64(1)])
        try a.context.make("Card", ["holder": fromA])
        try a.context.save()
        let fromB = try b.context.make("Member", ["email": "ann@x", "name": "Annie"])
        let tag = try b.context.make("Tag", ["name": "new"])
        try fromB.mutableSetValue(forKey: "tags").insert(tag)
        try b.context.save()
        try fromB.setValue(Int64(5), forKey: "score")
        try b.context.save()
        return (a, b, fromA.objectID.uriString, fromB.objectID.uriString)
    }

    @Test("Both replicas keep one object, the one whose URI sorts first, with the later values and every reference", arguments: Replica.Kind.allCases)
    func merged(kind: Replica.Kind) throws {
        let (a, b, annA, annB) = try Self.twoDuplicates(kind)
        try a.pull(from: b)
        try b.pull(from: a)
        try a.pull(from: b)
        let dump = try a.dump()
        #expect(dump == (try b.dump()))
        let members = dump.filter { $0.contains("\"entity\":\"Member\"") }
        #expect(members.count == 1, "\(members)")
        let survivor = try #require(members.first)
        #expect(survivor.contains(annA), "A's URI sorts first")
        #expect(!dump.joined().contains(annB), "the loser is gone, and nothing points at it")
        #expect(survivor.contains("\"score\":5"), "B's later write wins")
        #expect(survivor.contains("\"name\":\"Ann\""), "values never written since the insert: the survivor keeps its own")
        #expect(survivor.contains("Tag/p"), "the loser's tags move to the survivor")
        #expect(try b.store.quarantinedChangeSets().isEmpty && (try a.store.quarantinedChangeSets().isEmpty))
        // The loser's URI now names the survivor.
        #expect(try b.store.localObjectID(forOriginURI: annB) == (try b.store.localObjectID(forOriginURI: annA)))
    }

    @Test("A later change set naming the loser lands on the survivor", arguments: Replica.Kind.allCases)
    func alias(kind: Replica.Kind) throws {
        let (a, b, annA, annB) = try Self.twoDuplicates(kind)
        // C knows only B's member, and renames it by B's URI.
        let c = try Replica(model: Self.model, identifier: Self.c, kind: kind)
        try c.pull(from: b)
        let fromB = try #require(try c.object(annB))
        try fromB.setValue("Anne", forKey: "name")
        try c.context.save()
        // A takes C's change sets: B's insert merges into A's member, and C's rename follows it.
        try a.pull(from: c)
        #expect(try a.store.localObjectID(forOriginURI: annB) == (try a.store.localObjectID(forOriginURI: annA)))
        for _ in 0..<2 {
            for to in [a, b, c] { for from in [a, b, c] where from !== to { try to.pull(from: from) } }
        }
        let dump = try a.dump(), dumpB = try b.dump(), dumpC = try c.dump()
        #expect(dump == dumpB && dump == dumpC)
        let members = dump.filter { $0.contains("\"entity\":\"Member\"") }
        #expect(members.count == 1 && members.first?.contains(annA) == true)
        #expect(members.first?.contains("\"name\":\"Anne\"") == true, "\(members)")
        #expect(try a.store.changeSetLines().contains { $0.contains("\"op\":\"merge\"") }, "the merge is recorded")
    }

    @Test("Any order of the change sets ends in the same dump, on both stores")
    func anyOrder() throws {
        let (a, b, _, _) = try Self.twoDuplicates(.sqlite)
        try b.pull(from: a)
        let lines = try a.store.changeSetLines() + (try b.store.changeSetLines().filter { !$0.contains(Self.a.uuidString + "\",\"seq") })
        var dumps = Set<[String]>()
        for (number, order) in CornerCaseFixtureTests.permutations(lines).enumerated() {
            let replica = try Replica(model: Self.model, kind: number % 2 == 0 ? .sqlite : .memory)
            for line in order { _ = try replica.engine.apply(lines: [line]) }
            #expect(try replica.engine.heldChangeSets().isEmpty)
            #expect(try replica.store.quarantinedChangeSets().isEmpty)
            dumps.insert(try replica.dump())
        }
        #expect(dumps.count == 1)
        #expect(dumps.first?.filter { $0.contains("\"entity\":\"Member\"") }.count == 1)
    }

    @Test("Merged memberships follow the later fact: a member the survivor dropped stays dropped, whether the merge comes before or after the drop",
          arguments: Replica.Kind.allCases)
    func membershipFactsMerge(kind: Replica.Kind) throws {
        let a = try Replica(model: Self.model, identifier: Self.a, kind: kind)
        let b = try Replica(model: Self.model, identifier: Self.b, kind: kind == .sqlite ? .memory : .sqlite)
        let tag = try a.context.make("Tag", ["name": "chess"])
        try a.context.save()
        try b.pull(from: a)
        // Both insert ann@x tagged chess; A (the survivor's origin) then drops the tag, before it hears of B's.
        let annA = try a.context.make("Member", ["email": "ann@x"])
        try annA.mutableSetValue(forKey: "tags").insert(tag)
        try a.context.save()
        let annB = try b.context.make("Member", ["email": "ann@x"])
        try annB.mutableSetValue(forKey: "tags").insert(try #require(try b.object(tag.objectID.uriString)))
        try b.context.save()
        try annA.mutableSetValue(forKey: "tags").remove(tag)
        try a.context.save()
        // A merges after its drop; B merges on A's insert, and then takes the drop.
        _ = try Replica.exchangeUntilSettled([a, b])
        let dump = try a.dump()
        #expect(dump == (try b.dump()))
        let members = dump.filter { $0.contains("\"entity\":\"Member\"") }
        #expect(members.count == 1 && members.first?.contains(annA.objectID.uriString) == true, "\(members)")
        #expect(members.first?.contains("\"tags\":[]") == true, "the drop is later than B's membership, kept since its insert: \(members)")
    }

    /// Codes are unique; boards and codes are many-to-many, the boards keeping the facts (`Board.codes`
    /// is the join table's canonical side), so merging two codes weighs facts held by their members.
    static let boards = try! ManagedObjectModel {
        Entity("Board") {
            Attribute("name", .string)
            Relationship("codes", to: "Code", inverse: "boards", toMany: true)
        }
        Entity("Code", uniquenessConstraints: [["value"]]) {
            Attribute("value", .integer64)
            Relationship("boards", to: "Board", inverse: "codes", toMany: true)
        }
    }

    @Test("Merged memberships kept by the members: a member that dropped the loser drops the survivor too, whether the merge comes before or after",
          arguments: Replica.Kind.allCases)
    func membershipFactsKeptByMembers(kind: Replica.Kind) throws {
        let a = try Replica(model: Self.boards, identifier: Self.a, kind: kind)
        let b = try Replica(model: Self.boards, identifier: Self.b, kind: kind == .sqlite ? .memory : .sqlite)
        let list = try a.context.make("Board", ["name": "todo"])
        try a.context.save()
        try b.pull(from: a)
        // Both add code 1 to the list; B then drops its own (the loser: A's URI sorts first), before it hears of A's.
        let codeA = try a.context.make("Code", ["value": Int64(1)])
        try list.mutableSetValue(forKey: "codes").insert(codeA)
        try a.context.save()
        let listB = try b.context.existingObject(withURI: list.objectID.uriString)
        let codeB = try b.context.make("Code", ["value": Int64(1)])
        try listB.mutableSetValue(forKey: "codes").insert(codeB)
        try b.context.save()
        try listB.mutableSetValue(forKey: "codes").remove(codeB)
        try b.context.save()
        // A merges first and then takes the drop (by the loser's URI); B merges after its drop.
        _ = try Replica.exchangeUntilSettled([a, b])
        let dump = try a.dump()
        #expect(dump == (try b.dump()))
        #expect(dump.filter { $0.contains("\"entity\":\"Code\"") }.count == 1)
        #expect(try b.store.changeSetLines().contains { $0.contains("\"entity\":\"Board\",\"op\":\"update\",\"removed\"") },
                "the boards keep the facts: B's drop is recorded on its board")
        #expect(dump.contains { $0.contains("\"entity\":\"Board\"") && $0.contains("\"codes\":[]") },
                "the drop is the latest fact about the merged code: \(dump)")
    }

    /// Sibling entities under one constraint of their parent: a `Sport` has no `limited`.
    static let vehicles = try! ManagedObjectModel {
        Entity("Vehicle", uniquenessConstraints: [["plate"]]) { Attribute("plate", .string) }
        Entity("Luxury", parent: "Vehicle") { Attribute("limited", .boolean) }
        Entity("Sport", parent: "Vehicle") { Attribute("turbo", .boolean) }
    }

    @Test("A duplicate merged first into a sibling entity lacking an attribute keeps its value for the object it ends in",
          arguments: Replica.Kind.allCases)
    func valuesCarriedThroughASibling(kind: Replica.Kind) throws {
        let a = try Replica(model: Self.vehicles, identifier: Self.a, kind: kind)
        let b = try Replica(model: Self.vehicles, identifier: Self.b, kind: kind == .sqlite ? .memory : .sqlite)
        let c = try Replica(model: Self.vehicles, identifier: Self.c, kind: kind)
        // One plate on three origins; the survivor is A's (its URI sorts first), then B's, then C's.
        try a.context.make("Luxury", ["plate": "x"])
        try a.context.save()
        try b.context.make("Sport", ["plate": "x", "turbo": true])
        try b.context.save()
        let fromC = try c.context.make("Luxury", ["plate": "x"])
        try c.context.save()
        try fromC.setValue(true, forKey: "limited")  // written after the insert: it wins over A's unwritten nil
        try c.context.save()
        // B merges C's car into its Sport first (no `limited` there), then into A's; A merges C's car directly.
        try b.pull(from: c)
        try b.pull(from: a)
        try a.pull(from: c)
        try a.pull(from: b)
        _ = try Replica.exchangeUntilSettled([a, b, c])
        let dump = try a.dump()
        let dumpB = try b.dump(), dumpC = try c.dump()
        #expect(dump == dumpB && dump == dumpC)
        #expect(dump.count == 1 && dump.first?.contains("\"limited\":true") == true && dump.first?.contains("Luxury") == true, "\(dump)")
    }

    /// Desks have unique codes and one chair each; the chair keeps the fact (`Chair.desk`).
    static let desks = try! ManagedObjectModel {
        Entity("Chair") {
            Attribute("name", .string)
            Relationship("desk", to: "Desk", inverse: "chair")
        }
        Entity("Desk", uniquenessConstraints: [["code"]]) {
            Attribute("code", .integer64)
            Relationship("chair", to: "Chair", inverse: "desk")
        }
    }

    @Test("One-to-one partners of merged duplicates: the later partnership wins, whether it arrives before or after the merge",
          arguments: Replica.Kind.allCases)
    func oneToOnePartners(kind: Replica.Kind) throws {
        let a = try Replica(model: Self.desks, identifier: Self.a, kind: kind)
        let b = try Replica(model: Self.desks, identifier: Self.b, kind: kind == .sqlite ? .memory : .sqlite)
        // A (the survivor's origin) inserts desk 1 with a chair; B inserts desk 1 and, later, gives it a chair.
        let deskA = try a.context.make("Desk", ["code": Int64(1)])
        try a.context.make("Chair", ["name": "A", "desk": deskA])
        try a.context.save()
        let deskB = try b.context.make("Desk", ["code": Int64(1)])
        let chairB = try b.context.make("Chair", ["name": "B"])
        try b.context.save()
        try chairB.setValue(deskB, forKey: "desk")
        try b.context.save()
        // A merges on B's insert and then takes the chair (by the loser's URI); B merges after it.
        try a.pull(from: b)
        try b.pull(from: a)
        _ = try Replica.exchangeUntilSettled([a, b])
        let dump = try a.dump()
        #expect(dump == (try b.dump()))
        let desk = try #require(dump.first { $0.contains("\"entity\":\"Desk\"") })
        let chair = try #require(dump.first { $0.contains("\"name\":\"B\"") })
        #expect(chair.contains(deskA.objectID.uriString), "B's chair, set after both inserts, is the merged desk's: \(dump)")
        #expect(dump.filter { $0.contains("\"entity\":\"Desk\"") }.count == 1, "\(desk)")
    }

    @Test("A merge with an object deleted elsewhere deletes the merged object")
    func mergeWithDeleted() throws {
        let (a, b, annA, _) = try Self.twoDuplicates(.sqlite)
        try b.pull(from: a)  // B merges; A has not heard of it
        let member = try a.context.existingObject(withURI: annA)
        a.context.delete(member)
        try a.context.save()
        try a.pull(from: b)
        try b.pull(from: a)
        #expect(try a.dump() == (try b.dump()))
        #expect(try a.dump().filter { $0.contains("\"entity\":\"Member\"") }.isEmpty)
    }
}
