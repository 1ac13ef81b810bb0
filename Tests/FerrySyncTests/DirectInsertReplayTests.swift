import Foundation
import Testing
import FerryModel
import FerryStore
import FerrySQLite
@testable import FerrySync
import FerryTestSupport

/// The direct-insert fast path of replay: when it is taken, and that it leaves
/// exactly what a merge through a context leaves.
@Suite("Replay: direct inserts")
struct DirectInsertReplayTests {
    static let orgChart = ReplayTests.model
    static let departments = ConvergenceTests.departments
    /// A required attribute: a context would validate, so the fast path must not be taken.
    static let strict = try! ManagedObjectModel {
        Entity("Item") { Attribute("name", .string, optional: false) }
    }
    /// A one-to-one: setting one side changes the other object's row.
    static let couples = try! ManagedObjectModel {
        Entity("Person") {
            Attribute("name", .string)
            Relationship("partner", to: "Person", inverse: "partner")
        }
    }

    /// Whether the fast path takes `changeSet` into `replica` (applying it when it does).
    func direct(_ replica: Replica, _ line: String) throws -> Bool {
        guard case .changeSet(let changeSet) = try ChangeSetCodec.decode(line, model: replica.store.model) else {
            Issue.record("not decodable with this model")
            return false
        }
        let engine = DirectInsertReplay(store: replica.store, container: try PersistentContainer(store: replica.store))
        return try engine.applyIfEligible(changeSet, body: line, retry: false)
    }

    /// Replays everything `origin` recorded into a fast-path replica and a context-only one; both must match.
    func expectSameOnBothPaths(_ origin: Replica, extra: [String] = []) throws {
        let fast = try Replica(model: origin.store.model)
        let slow = try Replica(model: origin.store.model, directInserts: false)
        let lines = try origin.store.changeSetLines() + extra
        let fastReport = try fast.engine.apply(lines: lines)
        let slowReport = try slow.engine.apply(lines: lines)
        #expect(fastReport == slowReport)
        #expect(try fast.dump() == slow.dump())
        #expect(try fast.dump() == origin.dump())
        #expect(try fast.store.changeSetLines() == slow.store.changeSetLines())
    }

    @Test("New objects pointing at new and existing objects go straight to the store, as a context would write them")
    func eligibleInserts() throws {
        let origin = try Replica(model: Self.orgChart)
        let boss = try origin.context.make("Person", ["id": Int64(1), "name": "Boss"])
        try origin.context.save()
        let ann = try origin.context.make("Person", ["name": "Ann", "manager": boss])
        try ann.setValue(nil, forKey: "id")  // nil over the model's default of 0
        try origin.context.make("Person", ["id": Int64(3), "name": "Bob", "manager": ann])  // a reference within the set
        let org = try origin.context.make("Organization", ["name": "Org", "leader": boss])  // one-way to-one
        try org.setValue(nil, forKey: "id")
        try origin.context.save()

        let replica = try Replica(model: Self.orgChart)
        let lines = try origin.store.changeSetLines()
        #expect(try direct(replica, lines[0]))
        #expect(try direct(replica, lines[1]))
        #expect(try replica.dump() == origin.dump())
        #expect(try replica.store.changeSetLines() == lines)
        #expect(try replica.store.historyState().vector == [origin.store.identifier: 2])
        try expectSameOnBothPaths(origin)
    }

    @Test("New objects with no to-one destination share one all-nil destination array in a replay request (context's: SaveRequestTests); others have their own")
    func sharedEmptyDestinations() throws {
        let origin = try Replica(model: Self.orgChart)
        let boss = try origin.context.make("Person", ["id": Int64(1), "name": "Boss"])
        try origin.context.make("Person", ["id": Int64(2), "name": "Ann"])
        try origin.context.make("Person", ["id": Int64(3), "name": "Bob", "manager": boss])
        try origin.context.make("Person", ["id": Int64(4), "name": "Cy"])
        try origin.context.save()
        let line = try #require(try origin.store.changeSetLines().first)
        let replica = try Replica(model: Self.orgChart)
        guard case .changeSet(let changeSet) = try ChangeSetCodec.decode(line, model: replica.store.model) else {
            Issue.record("not decodable")
            return
        }
        let request = try #require(try PersistentContainer(store: replica.store)
            .directInsertRequest(for: changeSet, existing: [:], annotation: ReplayAnnotation(changeSet: changeSet, body: line)))
        func storage(_ insert: SaveRequest.Insert) -> UnsafeRawPointer? {
            insert.toOne.withUnsafeBufferPointer { UnsafeRawPointer($0.baseAddress) }
        }
        let names = request.inserts.map { insert in insert.attributes.compactMap { value -> String? in
            if case .string(let name) = value { return name }
            return nil
        }.first ?? "" }
        #expect(names == ["Boss", "Ann", "Bob", "Cy"])
        let bob = request.inserts[2]
        #expect(bob.toOne.contains(request.inserts[0].objectID))
        #expect(storage(request.inserts[0]) == storage(request.inserts[1]) && storage(request.inserts[1]) == storage(request.inserts[3]))
        #expect(storage(bob) != storage(request.inserts[0]))
        #expect(request.inserts[0].toOne.allSatisfy { $0 == nil } && request.inserts[0].toOne.count == bob.toOne.count)
    }

    @Test("A set that inserts one URI twice does not go straight to the store; a reference to an insert later in the set names that insert")
    func urisWithinTheSet() throws {
        let origin = try Replica(model: Self.orgChart)
        let ann = try origin.context.make("Person", ["id": Int64(1), "name": "Ann"])
        let bob = try origin.context.make("Person", ["id": Int64(2), "name": "Bob"])
        try ann.setValue(bob, forKey: "manager")  // Ann comes first and points at Bob
        try origin.context.save()
        let line = try #require(try origin.store.changeSetLines().first)
        let replica = try Replica(model: Self.orgChart)
        let container = try PersistentContainer(store: replica.store)
        guard case .changeSet(let changeSet) = try ChangeSetCodec.decode(line, model: replica.store.model) else {
            Issue.record("not decodable")
            return
        }
        let annotation = ReplayAnnotation(changeSet: changeSet, body: line)
        let request = try #require(container.directInsertRequest(for: changeSet, existing: [:], annotation: annotation))
        let annIndex = try #require(changeSet.changes.firstIndex { $0.uri == ann.objectID.uriString })
        let bobIndex = try #require(changeSet.changes.firstIndex { $0.uri == bob.objectID.uriString })
        #expect(request.inserts[annIndex].toOne.contains(request.inserts[bobIndex].objectID))

        var twice = changeSet
        twice.changes[bobIndex].uri = ann.objectID.uriString
        #expect(container.directInsertRequest(for: twice, existing: [:], annotation: ReplayAnnotation(changeSet: twice, body: line)) == nil)
    }

    @Test("A reference to an object of the receiving store itself is checked against its rows")
    func referenceToReceiverObject() throws {
        let origin = try Replica(model: Self.orgChart)
        let receiver = try Replica(model: Self.orgChart)
        let local = try receiver.context.make("Person", ["id": Int64(7), "name": "Local"])
        try receiver.context.save()
        try origin.pull(from: receiver)
        origin.context.reset()
        let localThere = try #require(try origin.object(local.objectID.uriString))
        try origin.context.make("Person", ["id": Int64(8), "name": "New", "manager": localThere])
        try origin.context.save()
        let line = try #require(try origin.store.changeSetLines(after: [receiver.store.identifier: 1], limit: nil).last)
        #expect(try direct(receiver, line))
        #expect(try receiver.dump() == origin.dump())
    }

    @Test("Anything a context could decide differently goes through the context")
    func ineligible() throws {
        // An update.
        let origin = try Replica(model: Self.orgChart)
        let ann = try origin.context.make("Person", ["id": Int64(1), "name": "Ann"])
        try origin.context.save()
        try ann.setValue("Anne", forKey: "name")
        try origin.context.save()
        let replica = try Replica(model: Self.orgChart)
        let lines = try origin.store.changeSetLines()
        #expect(try direct(replica, lines[0]))
        #expect(try !direct(replica, lines[1]))

        // The same insert again (a double insert), and a reference to an unknown object.
        let again = try Replica(model: Self.orgChart)
        #expect(try direct(again, lines[0]))
        #expect(try !direct(again, lines[0].replacingOccurrences(of: "\"seq\":1", with: "\"seq\":2")))
        let stranger = "x-coredata://\(UUID().uuidString)/Person/p1"
        let dangling = try Replica(model: Self.orgChart)
        let bob = try origin.context.make("Person", ["name": "Bob"])
        try bob.setValue(ann, forKey: "manager")
        try origin.context.save()
        let bobLine = try #require(try origin.store.changeSetLines().last)
        #expect(bobLine.contains(ann.objectID.uriString))
        #expect(try !direct(dangling, bobLine.replacingOccurrences(of: ann.objectID.uriString, with: stranger)
            .replacingOccurrences(of: "\"seq\":3", with: "\"seq\":1")))

        // A reference to an object deleted here.
        let buried = try Replica(model: Self.orgChart)
        _ = try buried.engine.apply(lines: Array(lines))
        buried.context.reset()
        buried.context.delete(try #require(try buried.object(ann.objectID.uriString)))
        try buried.context.save()
        #expect(try !direct(buried, bobLine))

        // Entities with rules, subclasses or validators, and one-to-ones.
        let strictOrigin = try Replica(model: Self.strict)
        try strictOrigin.context.make("Item", ["name": "x"])
        try strictOrigin.context.save()
        #expect(try !direct(try Replica(model: Self.strict), try strictOrigin.store.changeSetLines()[0]))

        let couplesOrigin = try Replica(model: Self.couples)
        let a = try couplesOrigin.context.make("Person", ["name": "A"])
        try couplesOrigin.context.make("Person", ["name": "B", "partner": a])
        try couplesOrigin.context.save()
        #expect(try !direct(try Replica(model: Self.couples), try couplesOrigin.store.changeSetLines()[0]))

        let validated = try Replica(model: Self.orgChart)
        let container = try PersistentContainer(store: validated.store, validators: [
            EntityValidator(entityName: "Person", phases: [.insert]) { _, _ in },
        ])
        let fast = DirectInsertReplay(store: validated.store, container: container)
        guard case .changeSet(let first) = try ChangeSetCodec.decode(lines[0], model: Self.orgChart) else { throw CancellationError() }
        #expect(try !fast.applyIfEligible(first, body: lines[0], retry: false))
        let subclassed = DirectInsertReplay(store: validated.store,
                                            container: try PersistentContainer(store: validated.store, classes: ["Person": OrgChartPerson.self]))
        #expect(try !subclassed.applyIfEligible(first, body: lines[0], retry: false))
        #expect(try validated.store.changeSetLines().isEmpty, "nothing written when the fast path declines")
    }

    @Test("Deny, Cascade and Nullify sets in any mix leave the same store on both paths")
    func mixedHistories() throws {
        let origin = try Replica(model: Self.departments)
        let sales = try origin.context.make("Department", ["name": "Sales"])
        for name in ["Ann", "Bob", "Cid"] { try origin.context.make("Employee", ["name": name, "department": sales]) }
        try origin.context.save()
        let empty = try origin.context.make("Department", ["name": "Empty"])
        try origin.context.save()
        origin.context.delete(empty)
        try origin.context.save()
        try origin.context.make("Employee", ["name": "Dee", "department": sales])
        try origin.context.save()
        try expectSameOnBothPaths(origin)
    }
}
