import Foundation
import Testing
import FerryModel
import FerryStore
import FerryTestSupport

@Suite("Contexts: insert, lookup, uniquing, rollback, reset, key-value access")
struct ContextTests {
    @Test("Defaults are visible right after insert; transient values stay in memory", arguments: TestStoreKind.allCases)
    func defaults(kind: TestStoreKind) throws {
        let test = try TestContainer(model: TestModels.allTypes, kind: kind)
        let context = test.context()
        let sample = try context.insert(entityName: "Sample")
        #expect(try sample.value(forKey: "counter") as? Int32 == 7)
        #expect(try sample.value(forKey: "scratch") as? String == "tmp")
        try sample.setValue("changed", forKey: "scratch")
        try context.save()
        let reader = test.context()
        let fresh = try reader.existingObject(with: sample.objectID)
        #expect(try fresh.value(forKey: "scratch") as? String == "tmp", "transient values are not stored")
        #expect(try fresh.value(forKey: "counter") as? Int32 == 7)
    }

    @Test("Every attribute type survives a save and a fresh read", arguments: TestStoreKind.allCases)
    func allTypesRoundTrip(kind: TestStoreKind) throws {
        let test = try TestContainer(model: TestModels.allTypes, kind: kind)
        let context = test.context()
        let uuid = UUID()
        let date = Date(timeIntervalSinceReferenceDate: 12345.678)
        let values: [String: Any] = [
            "i16": Int16(-3), "i32": Int32(70000), "i64": Int64.max, "decimal": Decimal(string: "12345678901234567890.123")!,
            "double": 0.1, "float": Float(1.1), "string": "héllo\n\"world\"", "bool": true, "date": date,
            "data": Data([0, 1, 2, 255]), "uuid": uuid, "uri": URL(string: "https://example.com/a?b=c")!, "blob": Data([9, 9]),
        ]
        let sample = try context.make("Sample", values)
        try context.save()
        let reader = test.context()
        let fresh = try reader.existingObject(with: sample.objectID)
        #expect(try fresh.value(forKey: "i16") as? Int16 == -3)
        #expect(try fresh.value(forKey: "i32") as? Int32 == 70000)
        #expect(try fresh.value(forKey: "i64") as? Int64 == Int64.max)
        #expect(try fresh.value(forKey: "decimal") as? Decimal == Decimal(string: "12345678901234567890.123"))
        #expect(try fresh.value(forKey: "double") as? Double == 0.1)
        #expect(try fresh.value(forKey: "float") as? Float == Float(1.1))
        #expect(try fresh.value(forKey: "string") as? String == "héllo\n\"world\"")
        #expect(try fresh.value(forKey: "bool") as? Bool == true)
        #expect(try fresh.value(forKey: "date") as? Date == date)
        #expect(try fresh.value(forKey: "data") as? Data == Data([0, 1, 2, 255]))
        #expect(try fresh.value(forKey: "uuid") as? UUID == uuid)
        #expect(try fresh.value(forKey: "uri") as? URL == URL(string: "https://example.com/a?b=c"))
        #expect(try fresh.value(forKey: "blob") as? Data == Data([9, 9]))
    }

    @Test("inserted/updated/deleted sets and hasChanges follow the object's life", arguments: TestStoreKind.allCases)
    func changeSets(kind: TestStoreKind) throws {
        let test = try TestContainer(model: try SampleModels.load("OrgChart"), kind: kind)
        let context = test.context()
        #expect(!context.hasChanges)
        let john = try context.make("Person", ["name": "John"])
        #expect(context.hasChanges)
        #expect(context.insertedObjects == [john])
        #expect(john.isInserted && !john.isUpdated)
        try context.save()
        #expect(!context.hasChanges)
        #expect(context.insertedObjects.isEmpty)
        #expect(!john.isInserted && !john.hasChanges)
        #expect(john.changedValues().isEmpty)
        try john.setValue("Johnny", forKey: "name")
        #expect(context.updatedObjects == [john])
        #expect(john.isUpdated)
        #expect(john.changedValues()["name"] as? String == "Johnny")
        #expect(john.changedKeys == ["name"])
        try context.save()
        context.delete(john)
        #expect(john.isDeleted)
        #expect(context.deletedObjects == [john])
        try context.save()
        #expect(!context.hasChanges)
        #expect(john.managedObjectContext == nil)
        #expect(try context.count(for: FetchRequest(entityName: "Person")) == 0)
    }

    @Test("Deleting an unsaved object just drops it", arguments: TestStoreKind.allCases)
    func deleteUnsaved(kind: TestStoreKind) throws {
        let test = try TestContainer(model: try SampleModels.load("OrgChart"), kind: kind)
        let context = test.context()
        let ghost = try context.make("Person", ["name": "Ghost"])
        context.delete(ghost)
        #expect(context.deletedObjects.isEmpty)
        #expect(context.insertedObjects.isEmpty)
        try context.save()
        #expect(try test.context().count(for: FetchRequest(entityName: "Person")) == 0)
    }

    @Test("Uniquing: one object per ID per context; distinct objects across contexts", arguments: TestStoreKind.allCases)
    func uniquing(kind: TestStoreKind) throws {
        let test = try TestContainer(model: try SampleModels.load("OrgChart"), kind: kind)
        let writer = test.context()
        let saved = try writer.make("Person", ["name": "Ann"])
        try writer.save()
        let context = test.context()
        let first = try context.all("Person")
        let second = try context.all("Person")
        #expect(first[0] === second[0])
        #expect(context.object(with: saved.objectID) === first[0])
        #expect(try context.existingObject(with: saved.objectID) === first[0])
        #expect(first[0] !== saved)
        #expect(first[0].objectID == saved.objectID)
    }

    @Test("object(with:) returns a fault; existingObject(with:) loads or throws", arguments: TestStoreKind.allCases)
    func faults(kind: TestStoreKind) throws {
        let test = try TestContainer(model: try SampleModels.load("OrgChart"), kind: kind)
        let writer = test.context()
        let saved = try writer.make("Person", ["name": "Ann"])
        try writer.save()
        let context = test.context()
        let fault = context.object(with: saved.objectID)
        #expect(fault.isFault)
        #expect(try fault.string("name") == "Ann")
        #expect(!fault.isFault)
        let missingID = try test.container.managedObjectID(forURIString: saved.objectID.uriString.replacingOccurrences(of: "/p1", with: "/p42"))
        let missing = context.object(with: missingID)
        #expect(missing.isFault)
        #expect(throws: ContextError.objectInaccessible(missingID.uriString)) { try missing.value(forKey: "name") }
        #expect(throws: ContextError.objectNotFound(missingID.uriString)) { try test.context().existingObject(with: missingID) }
    }

    @Test("Rollback discards inserts, restores updates and deletes", arguments: TestStoreKind.allCases)
    func rollback(kind: TestStoreKind) throws {
        let test = try TestContainer(model: try SampleModels.load("OrgChart"), kind: kind)
        let context = test.context()
        let john = try context.make("Person", ["name": "John"])
        let jane = try context.make("Person", ["name": "Jane", "manager": john])
        try context.save()
        try john.setValue("Changed", forKey: "name")
        try jane.setValue(nil, forKey: "manager")
        let temp = try context.make("Person", ["name": "Temp", "manager": john])
        context.delete(jane)
        context.rollback()
        #expect(!context.hasChanges)
        #expect(try john.string("name") == "John")
        #expect(temp.managedObjectContext == nil)
        #expect(!jane.isDeleted)
        #expect(try jane.value(forKey: "manager") as? ManagedObject === john)
        #expect(try john.objects("employees") == [jane])
        #expect(try context.all("Person", sortedBy: "name").map { try $0.string("name") } == ["Jane", "John"])
    }

    @Test("Reset forgets every object", arguments: TestStoreKind.allCases)
    func reset(kind: TestStoreKind) throws {
        let test = try TestContainer(model: try SampleModels.load("OrgChart"), kind: kind)
        let context = test.context()
        let john = try context.make("Person", ["name": "John"])
        try context.save()
        let unsaved = try context.make("Person", ["name": "Unsaved"])
        context.reset()
        #expect(!context.hasChanges)
        #expect(context.registeredObjects.isEmpty)
        #expect(john.managedObjectContext == nil)
        #expect(throws: ContextError.detachedObject(john.objectID.uriString)) { try john.value(forKey: "name") }
        #expect(unsaved.managedObjectContext == nil)
        let again = try context.all("Person")
        #expect(again.count == 1 && again[0] !== john)
    }

    @Test("Key-value access checks keys and types")
    func keyValueErrors() throws {
        let test = try TestContainer(model: TestModels.allTypes, kind: .memory)
        let context = test.context()
        let sample = try context.insert(entityName: "Sample")
        #expect(throws: ContextError.unknownKey(entity: "Sample", key: "nope")) { try sample.value(forKey: "nope") }
        #expect(throws: ContextError.self) { try sample.setValue("text", forKey: "i16") }
        #expect(throws: ContextError.self) { try sample.setValue(40000, forKey: "i16") }
        #expect(throws: ContextError.self) { try sample.setValue(1.5, forKey: "i32") }
        try sample.setValue(12, forKey: "i16")
        #expect(try sample.value(forKey: "i16") as? Int16 == 12)
        try sample.setValue(3, forKey: "double")
        #expect(try sample.value(forKey: "double") as? Double == 3)
        #expect(throws: ContextError.unknownEntity("Robot")) { try context.insert(entityName: "Robot") }
        let inheritance = try TestContainer(model: TestModels.inheritance, kind: .memory)
        #expect(throws: ContextError.abstractEntity("Party")) { try inheritance.context().insert(entityName: "Party") }
        let error = ContextError.invalidValue(entity: "Sample", key: "i16", value: "String text", expectedType: "Integer 16")
        #expect(error.description == "'Sample.i16' takes Integer 16; String text cannot be stored there")
    }

    @Test("Relationships take objects of the right entity from the same context")
    func relationshipArgumentErrors() throws {
        let test = try TestContainer(model: try SampleModels.load("OrgChart"), kind: .memory)
        let context = test.context()
        let person = try context.make("Person")
        let organization = try context.make("Organization")
        #expect(throws: ContextError.wrongDestination(entity: "Person", key: "manager", expected: "Person", actual: "Organization")) {
            try person.setValue(organization, forKey: "manager")
        }
        #expect(throws: ContextError.self) { try person.setValue("John", forKey: "manager") }
        let otherContext = test.context()
        let stranger = try otherContext.make("Person")
        #expect(throws: ContextError.objectFromAnotherContext(stranger.objectID.uriString)) { try person.setValue(stranger, forKey: "manager") }
    }

    @Test("Typed subclasses: registered per entity, with typed accessors", arguments: TestStoreKind.allCases)
    func typedSubclass(kind: TestStoreKind) throws {
        let test = try TestContainer(model: try SampleModels.load("OrgChart"), kind: kind, classes: ["Person": Person.self])
        let context = test.context()
        let john = try context.insert(Person.self)
        john.name = "John"
        john.id = 1
        let jane = try context.insert(Person.self)
        jane.name = "Jane"
        jane.manager = john
        #expect(john.employees.contains(jane))
        try context.save()
        let reader = test.context()
        let people = try reader.fetch(FetchRequest(entityName: "Person", sortDescriptors: [FetchSortDescriptor("name")]), as: Person.self)
        #expect(people.map(\.name) == ["Jane", "John"])
        #expect(people[0].manager === people[1])
        #expect(people[1].employees.objects == [people[0]])
        let organization = try context.insert(entityName: "Organization")
        #expect(!(organization is Person), "entities without a registered class use ManagedObject")
        #expect(throws: ContextError.self) { try context.insert(Person.self, entityName: "Organization") }
    }

    @Test("A container refuses classes and validators for unknown entities")
    func containerChecks() throws {
        let store = InMemoryStore(model: try SampleModels.load("OrgChart"))
        #expect(throws: ContextError.unknownEntity("Robot")) { try PersistentContainer(store: store, classes: ["Robot": Person.self]) }
        #expect(throws: ContextError.unknownEntity("Robot")) {
            try PersistentContainer(store: store, validators: [EntityValidator(entityName: "Robot") { _, _ in }])
        }
    }

    @Test("Contexts on separate tasks share one container", arguments: TestStoreKind.allCases)
    func concurrentContexts(kind: TestStoreKind) async throws {
        let test = try TestContainer(model: try SampleModels.load("OrgChart"), kind: kind)
        let container = test.container
        try await withThrowingTaskGroup(of: Void.self) { group in
            for worker in 0..<4 {
                group.addTask {
                    let context = container.newContext()
                    for index in 0..<25 {
                        try context.make("Person", ["name": "w\(worker)-\(index)", "id": Int64(worker * 100 + index)])
                        try context.save()
                    }
                }
            }
            try await group.waitForAll()
        }
        let context = container.newContext()
        #expect(try context.count(for: FetchRequest(entityName: "Person")) == 100)
        let keys = try context.all("Person").compactMap(\.objectID.primaryKey)
        #expect(Set(keys).count == 100, "every object got its own primary key")
    }
}
