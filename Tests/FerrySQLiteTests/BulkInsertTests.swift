import Foundation
import Testing
import FerryModel
import FerryStore
@testable import FerrySQLite
import FerryTestSupport

/// A save writes each run of inserts of one entity `bulkInsertRows` rows per INSERT
/// (`SaveWriter`), the rest of the run one row at a time. Whatever the lengths of the
/// runs, every row must come out as written.
@Suite("Bulk inserts")
struct BulkInsertTests {
    static func model() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Person") {
                Attribute("name", .string)
                Attribute("id", .integer64)
                Relationship("manager", to: "Person", inverse: "employees")
                Relationship("employees", to: "Person", inverse: "manager", toMany: true)
            }
            Entity("Boss", parent: "Person") {
                Attribute("title", .string)
            }
            Entity("Wide") {
                for index in 0..<120 { Attribute("a\(index)", .integer64) }
            }
        }
    }

    @Test("Runs of every length, subentities and a wide entity are written row for row, references within the save included")
    func runsOfInserts() throws {
        let model = try Self.model()
        let directory = TemporaryDirectory(prefix: "ferry-bulk")
        let path = directory.file("bulk.sqlite")
        let store = try SQLiteStore(path: path, model: model)
        // The wide entity has more columns than 32 rows of placeholders allow.
        let widePlan = try #require(store.layout.plans["Wide"])
        let personPlan = try #require(store.layout.plans["Person"])
        #expect(personPlan.bulkInsertRows == 32)
        #expect(widePlan.bulkInsertRows > 1 && widePlan.bulkInsertRows < 32)
        #expect((2 + widePlan.insertSlots.count) * widePlan.bulkInsertRows <= StoreLayout.EntityPlan.bulkInsertParameterLimit)

        let context = try PersistentContainer(store: store).newContext()
        var people: [(object: ManagedObject, id: Int64, managerID: Int64?)] = []
        var nextID: Int64 = 0
        func addPeople(_ count: Int, entity: String = "Person") throws {
            for _ in 0..<count {
                // The manager is an earlier person: in the same statement, an earlier one, or none.
                let manager = people.isEmpty || nextID % 7 == 0 ? nil : people[Int(nextID * 31) % people.count]
                let person = try context.make(entity, ["name": "P\(nextID)", "id": nextID])
                if let manager { try person.setValue(manager.object, forKey: "manager") }
                if entity == "Boss" { try person.setValue("boss \(nextID)", forKey: "title") }
                people.append((person, nextID, manager?.id))
                nextID += 1
            }
        }
        var wides: [Int64] = []
        func addWide(_ count: Int) throws {
            for _ in 0..<count {
                let seed = Int64(wides.count) * 1_000
                let wide = try context.insert(entityName: "Wide")
                for index in 0..<120 { try wide.setValue(seed + Int64(index), forKey: "a\(index)") }
                wides.append(seed)
            }
        }
        // Runs shorter than, equal to and longer than a statement's rows, with the rest of a run
        // one by one; an entity again after another; a first row that starts a transaction.
        try addPeople(70)
        try addWide(widePlan.bulkInsertRows * 2 + 3)
        try addPeople(3, entity: "Boss")
        try addPeople(32)
        try addWide(1)
        try addPeople(1)
        try addPeople(33, entity: "Boss")
        try context.save()
        // A second save: the statements are prepared already.
        try addPeople(65)
        try context.save()

        let reader = try PersistentContainer(store: SQLiteStore(path: path, model: model)).newContext()
        let stored = try reader.all("Person", sortedBy: "id")
        #expect(stored.count == people.count)
        for (written, read) in zip(people, stored) {
            #expect(try read.value(forKey: "id") as? Int64 == written.id)
            #expect(try read.string("name") == "P\(written.id)")
            #expect(read.entity.name == written.object.entity.name)
            let manager = try read.value(forKey: "manager") as? ManagedObject
            #expect(try manager?.value(forKey: "id") as? Int64 == written.managerID, "person \(written.id)")
            if read.entity.name == "Boss" { #expect(try read.string("title") == "boss \(written.id)") }
        }
        let storedWides = try reader.all("Wide", sortedBy: "a0")
        #expect(storedWides.map { try? $0.value(forKey: "a0") as? Int64 } == wides.map { $0 })
        for (seed, wide) in zip(wides, storedWides) {
            for index in [0, 1, 59, 119] { #expect(try wide.value(forKey: "a\(index)") as? Int64 == seed + Int64(index)) }
        }
        // And the change sets recorded the same objects.
        let inserts = try store.changeSets().flatMap(\.changes).filter { $0.kind == .insert }
        #expect(inserts.count == people.count + wides.count)
    }
}
