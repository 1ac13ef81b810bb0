import Foundation
import Testing
import FerryModel
import FerryStore
@testable import FerrySync

/// The merge rules of docs/SYNC.md as ``MergePlanner`` decides them: no store, no
/// context, only a change set, a model and facts written by hand. (`MergeRuleTests`
/// checks the same rules end to end, between two replicas.)
@Suite("Merge planner")
struct MergePlannerTests {
    static let model = try! ManagedObjectModel {
        Entity("Person") {
            Attribute("name", .string)
            Attribute("level", .integer64, default: .integer(1))
            Relationship("manager", to: "Person", inverse: "employees")
            Relationship("employees", to: "Person", inverse: "manager", toMany: true, deleteRule: .nullify)
            Relationship("friends", to: "Person", inverse: "friends", toMany: true)
        }
        Entity("Company") {
            Attribute("name", .string)
            Relationship("workers", to: "Worker", inverse: "company", toMany: true, deleteRule: .cascade)
        }
        Entity("Worker") {
            Attribute("name", .string)
            Relationship("company", to: "Company", inverse: "workers")
        }
        Entity("Department") {
            Attribute("name", .string)
            Relationship("staff", to: "Clerk", inverse: "department", toMany: true, deleteRule: .deny)
        }
        Entity("Clerk") {
            Attribute("name", .string)
            Relationship("department", to: "Department", inverse: "staff")
        }
    }

    static let origin = UUID(uuidString: "AAAAAAAA-0000-0000-0000-000000000001")!
    static let earlierOrigin = UUID(uuidString: "00000000-0000-0000-0000-000000000009")!
    static let laterOrigin = UUID(uuidString: "FFFFFFFF-0000-0000-0000-000000000009")!
    static let now = HybridTimestamp(rawValue: 1_000 << 16)

    static func uri(_ entity: String, _ key: Int, store: UUID = earlierOrigin) -> String {
        "x-coredata://\(store.uuidString)/\(entity)/p\(key)"
    }

    static func changeSet(_ changes: [ObjectChange], at timestamp: HybridTimestamp = now) -> ChangeSet {
        ChangeSet(origin: origin, sequence: 1, timestamp: timestamp, modelHash: "test", changes: changes)
    }

    static func stamp(_ milliseconds: Int64, _ origin: UUID = earlierOrigin) -> WriteStamp {
        WriteStamp(timestamp: HybridTimestamp(rawValue: milliseconds << 16), origin: origin)
    }

    func plan(_ changes: [ObjectChange], facts: [String: MergeFacts.Known], refused: Set<String> = []) throws -> MergePlan {
        try MergePlanner.plan(Self.changeSet(changes), model: Self.model, facts: MergeFacts(objects: facts), refusedDeletes: refused)
    }

    let ann = uri("Person", 1)
    let bob = uri("Person", 2)

    @Test("Last writer wins per property: a later write is planned and clocked, an earlier one and a tie lost by origin are not")
    func lastWriterWins() throws {
        let update = ObjectChange(kind: .update, uri: ann, entity: "Person",
                                  values: ["name": .attribute(.string("Anna")), "level": .attribute(.integer(3))])
        let plan = try plan([update], facts: [ann: .live(stamps: ["name": Self.stamp(999), "level": Self.stamp(1_000, Self.laterOrigin)])])
        #expect(plan.steps == [.set(uri: ann, property: "name", value: .attribute(.string("Anna")))])
        #expect(plan.clocks == [ann: ["name"]])
        // The same clock from an origin that sorts first wins the tie.
        let tie = try self.plan([update], facts: [ann: .live(stamps: ["level": Self.stamp(1_000, Self.earlierOrigin)])])
        #expect(tie.steps.count == 2 && tie.clocks == [ann: ["name", "level"]])
    }

    @Test("Membership facts compete by clock per member")
    func membersByClock() throws {
        let change = ObjectChange(kind: .update, uri: ann, entity: "Person", added: ["friends": [bob]], removed: ["friends": [Self.uri("Person", 3)]])
        let carol = Self.uri("Person", 3)
        let plan = try plan([change], facts: [ann: .live(stamps: ["friends " + carol: Self.stamp(2_000)]), bob: .live(stamps: [:]), carol: .live(stamps: [:])])
        #expect(plan.steps == [.add(uri: ann, relationship: "friends", member: bob)])
        #expect(plan.clocks == [ann: ["friends " + bob]])
    }

    @Test("An insert creates its object with the defaults it leaves out cleared, and needs no clocks; an insert of a deleted object is ignored")
    func inserts() throws {
        let insert = ObjectChange(kind: .insert, uri: bob, entity: "Person", values: ["name": .attribute(.string("Bob")), "manager": .object(ann)])
        let plan = try plan([insert], facts: [ann: .live(stamps: [:])])
        #expect(plan.steps == [.create(uri: bob, entity: "Person", keeping: ["name", "manager"]),
                               .set(uri: bob, property: "manager", value: .object(ann)),
                               .set(uri: bob, property: "name", value: .attribute(.string("Bob")))])
        #expect(plan.clocks.isEmpty)
        let buried = try self.plan([insert], facts: [ann: .live(stamps: [:]), bob: .buried(nil)])
        #expect(buried.steps.isEmpty)
    }

    @Test("Deletes win over updates; a delete of an object never seen leaves a tombstone only")
    func deletesWin() throws {
        let plan = try plan([ObjectChange(kind: .update, uri: ann, entity: "Person", values: ["name": .attribute(.string("late"))])],
                            facts: [ann: .buried(nil)])
        #expect(plan.steps.isEmpty && plan.clocks.isEmpty)
        let deleteThenUpdate = try self.plan([ObjectChange(kind: .delete, uri: ann, entity: "Person"),
                                              ObjectChange(kind: .update, uri: ann, entity: "Person", values: ["name": .attribute(.string("x"))]),
                                              ObjectChange(kind: .delete, uri: bob, entity: "Person")],
                                             facts: [ann: .live(stamps: [:])])
        #expect(deleteThenUpdate.steps == [.delete(uri: ann)])
        #expect(deleteThenUpdate.deletes == [ann])
        #expect(deleteThenUpdate.tombstonesOnly == [DeletedObject(uri: bob, entity: "Person")])
    }

    @Test("A delete older than a restore of its object is ignored; a newer one deletes")
    func deleteAgainstRestore() throws {
        let delete = ObjectChange(kind: .delete, uri: ann, entity: "Person")
        let older = try plan([delete], facts: [ann: .live(stamps: [ReplayAnnotation.existenceKey: Self.stamp(2_000)])])
        #expect(older.steps.isEmpty && older.deletes.isEmpty)
        let newer = try plan([delete], facts: [ann: .live(stamps: [ReplayAnnotation.existenceKey: Self.stamp(500)])])
        #expect(newer.steps == [.delete(uri: ann)])
    }

    @Test("A restore newer than the delete brings the object back with its values and clocks; an older one changes nothing")
    func restores() throws {
        let restore = ObjectChange(kind: .restore, uri: ann, entity: "Person", values: ["name": .attribute(.string("Ann"))])
        let tombstone = { (at: Int64) in Tombstone(entity: "Person", values: [:], timestamp: HybridTimestamp(rawValue: at << 16), origin: Self.earlierOrigin) }
        let back = try plan([restore], facts: [ann: .buried(tombstone(500))])
        #expect(back.steps == [.resurrect(uri: ann, entity: "Person", keeping: ["name"]),
                               .set(uri: ann, property: "name", value: .attribute(.string("Ann")))])
        #expect(back.clocks == [ann: ["name", ReplayAnnotation.existenceKey]])
        #expect(try plan([restore], facts: [ann: .buried(tombstone(2_000))]).steps.isEmpty)
    }

    @Test("A change knowing no restore of a restored object was concurrent with the delete the restore undid: its values, memberships of that object ignored")
    func changesConcurrentWithAnUndoneDelete() throws {
        let restorer = UUID(uuidString: "BBBBBBBB-0000-0000-0000-000000000002")!
        let restoredBy: Set<ChangeSetMark> = [ChangeSetMark(origin: restorer, sequence: 4)]
        let carol = Self.uri("Person", 3)
        let changes = [
            ObjectChange(kind: .update, uri: ann, entity: "Person", values: ["name": .attribute(.string("Anna"))], added: ["friends": [carol]]),
            ObjectChange(kind: .update, uri: carol, entity: "Person", added: ["friends": [ann]], removed: ["employees": [ann]]),
        ]
        let facts = MergeFacts(objects: [ann: .live(stamps: [:]), carol: .live(stamps: [:])], restores: [ann: restoredBy])
        func plan(knowing dependencies: [UUID: Int64]) throws -> MergePlan {
            let changeSet = ChangeSet(origin: Self.origin, sequence: 1, timestamp: Self.now, modelHash: "test", dependencies: dependencies, changes: changes)
            return try MergePlanner.plan(changeSet, model: Self.model, facts: facts)
        }
        // Unaware of the restore (seq 4 of the restorer): nothing touches Ann; the membership facts Carol
        // keeps are clocked (where the change arrived before the delete, they were written on her row).
        let unaware = try plan(knowing: [restorer: 3])
        #expect(unaware.steps.isEmpty)
        #expect(unaware.clocks[ann] == nil)
        // Made after the restore: everything applies.
        let aware = try plan(knowing: [restorer: 4])
        #expect(aware.steps.contains(.set(uri: ann, property: "name", value: .attribute(.string("Anna")))))
        #expect(aware.steps.contains(.add(uri: ann, relationship: "friends", member: carol)))
        #expect(aware.steps.contains(.remove(uri: carol, relationship: "employees", member: ann)))
        // The restorer's own later change sets know its restore.
        let own = ChangeSet(origin: restorer, sequence: 5, timestamp: Self.now, modelHash: "test", changes: changes)
        #expect(try MergePlanner.plan(own, model: Self.model, facts: facts).steps
                    .contains(.set(uri: ann, property: "name", value: .attribute(.string("Anna")))))
    }

    @Test("A reference to an object deleted here: Nullify leaves it nil, Cascade deletes the referrer, Deny brings the object back")
    func referencesToDeletedObjects() throws {
        // Nullify (Person.employees): the new manager reference is written as nil.
        let nullify = try plan([ObjectChange(kind: .update, uri: bob, entity: "Person", values: ["manager": .object(ann)])],
                               facts: [ann: .buried(nil), bob: .live(stamps: [:])])
        #expect(nullify.steps == [.set(uri: bob, property: "manager", value: .null)])
        // Cascade (Company.workers): a worker inserted into a deleted company is deleted at once.
        let company = Self.uri("Company", 1), worker = Self.uri("Worker", 1)
        let cascade = try plan([ObjectChange(kind: .insert, uri: worker, entity: "Worker",
                                             values: ["company": .object(company), "name": .attribute(.string("Milton"))])],
                               facts: [company: .buried(nil)])
        #expect(cascade.steps == [.create(uri: worker, entity: "Worker", keeping: ["company", "name"]), .delete(uri: worker)])
        #expect(cascade.deletes.isEmpty, "a cascade is the local graph's doing, not the change set's delete")
        // Deny (Department.staff): the department comes back from its tombstone, recorded as restored.
        let department = Self.uri("Department", 1), clerk = Self.uri("Clerk", 1)
        let tombstone = Tombstone(entity: "Department", values: ["name": .attribute(.string("Sales"))], timestamp: HybridTimestamp(rawValue: 500 << 16),
                                  origin: Self.earlierOrigin)
        let deny = try plan([ObjectChange(kind: .insert, uri: clerk, entity: "Clerk", values: ["department": .object(department)])],
                            facts: [department: .buried(tombstone)])
        #expect(deny.steps == [.create(uri: clerk, entity: "Clerk", keeping: ["department"]),
                               .resurrect(uri: department, entity: "Department", keeping: ["name"]),
                               .set(uri: department, property: "name", value: .attribute(.string("Sales"))),
                               .set(uri: clerk, property: "department", value: .object(department))])
        #expect(deny.restored == [department])
        #expect(deny.clocks == [department: ["name"]])
    }

    @Test("A delete a Deny rule refused here keeps the object and records a restore")
    func refusedDelete() throws {
        let department = Self.uri("Department", 1)
        let plan = try plan([ObjectChange(kind: .delete, uri: department, entity: "Department")], facts: [department: .live(stamps: [:])],
                            refused: [department])
        #expect(plan.steps.isEmpty && plan.deletes.isEmpty)
        #expect(plan.restored == [department])
    }

    @Test("A change naming an object this store never received is a problem, with where it was named")
    func unknownObjects() throws {
        #expect(throws: MergeProblem.unknownObject(ann, place: "an update")) {
            try plan([ObjectChange(kind: .update, uri: ann, entity: "Person", values: ["name": .null])], facts: [:])
        }
        #expect(throws: MergeProblem.unknownObject(ann, place: "Person.manager")) {
            try plan([ObjectChange(kind: .update, uri: bob, entity: "Person", values: ["manager": .object(ann)])], facts: [bob: .live(stamps: [:])])
        }
    }
}
