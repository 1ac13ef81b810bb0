import Foundation
import Testing
import FerryModel
import FerryStore
import FerryTestSupport

@Suite("Fetching: filters, key paths, order, windows, subentities, pending changes")
struct FetchTests {
    /// John manages Jane and Bill; Ann has no manager; Zoe's name is nil.
    func seed(_ context: ManagedObjectContext) throws {
        let john = try context.make("Person", ["id": Int64(1), "name": "John"])
        try context.make("Person", ["id": Int64(2), "name": "Jane", "manager": john])
        try context.make("Person", ["id": Int64(3), "name": "Bill", "manager": john])
        try context.make("Person", ["id": Int64(4), "name": "Ann"])
        try context.make("Person", ["id": Int64(5)])
        try context.save()
    }

    func names(_ objects: [ManagedObject]) throws -> [String?] { try objects.map { try $0.string("name") } }

    @Test("Equality on a key, and on a key path through a to-one", arguments: TestStoreKind.allCases)
    func equality(kind: TestStoreKind) throws {
        let test = try TestContainer(model: try SampleModels.load("OrgChart"), kind: kind)
        let context = test.context()
        try seed(context)
        let reader = test.context()
        #expect(try names(reader.fetch(FetchRequest(entityName: "Person", where: "name", equals: .string("Jane")))) == ["Jane"])
        let reports = FetchRequest(entityName: "Person", predicate: .equal("manager.name", .string("John")), sortDescriptors: [FetchSortDescriptor("name")])
        #expect(try names(reader.fetch(reports)) == ["Bill", "Jane"])
        #expect(try names(reader.fetch(FetchRequest(entityName: "Person", where: "name", equals: nil))) == [nil])
        let john = try #require(reader.fetch(FetchRequest(entityName: "Person", where: "id", equals: .integer(1))).first)
        let byObject = FetchRequest(entityName: "Person", predicate: .equal("manager", .object(john.objectID)), sortDescriptors: [FetchSortDescriptor("id")])
        #expect(try names(reader.fetch(byObject)) == ["Jane", "Bill"])
        let noManager = FetchRequest(entityName: "Person", predicate: .equal("manager", .null), sortDescriptors: [FetchSortDescriptor("id")])
        #expect(try names(reader.fetch(noManager)) == ["John", "Ann", nil])
    }

    @Test("Comparison semantics with nil match in SQL and in memory", arguments: TestStoreKind.allCases)
    func nilSemantics(kind: TestStoreKind) throws {
        let test = try TestContainer(model: try SampleModels.load("OrgChart"), kind: kind)
        let context = test.context()
        try seed(context)
        let notJane = FetchRequest(entityName: "Person", predicate: .comparison(keyPath: "name", .notEqual, .attribute(.string("Jane"))),
                                   sortDescriptors: [FetchSortDescriptor("id")])
        let reader = test.context()
        #expect(try names(reader.fetch(notJane)) == ["John", "Bill", "Ann", nil], "nil != 'Jane' holds")
        let before = FetchRequest(entityName: "Person", predicate: .comparison(keyPath: "name", .less, .attribute(.string("C"))),
                                  sortDescriptors: [FetchSortDescriptor("id")])
        #expect(try names(reader.fetch(before)) == ["Bill", "Ann"], "ordering with nil is false")
        let negated = FetchRequest(entityName: "Person", predicate: .not(.comparison(keyPath: "name", .less, .attribute(.string("C")))),
                                   sortDescriptors: [FetchSortDescriptor("id")])
        #expect(try names(reader.fetch(negated)) == ["John", "Jane", nil])
        // The same predicates evaluated in memory over unsaved objects agree.
        let pending = test.context()
        try pending.make("Person", ["id": Int64(6), "name": "Al"])
        try pending.make("Person", ["id": Int64(7)])
        #expect(try names(pending.fetch(before)) == ["Bill", "Ann", "Al"])
        #expect(try names(pending.fetch(negated)) == ["John", "Jane", nil, nil])
        #expect(try names(pending.fetch(notJane)) == ["John", "Bill", "Ann", nil, "Al", nil])
    }

    @Test("Sort by several keys, ascending and descending, through a to-one; nil sorts first", arguments: TestStoreKind.allCases)
    func sorting(kind: TestStoreKind) throws {
        let test = try TestContainer(model: try SampleModels.load("OrgChart"), kind: kind)
        let context = test.context()
        try seed(context)
        let reader = test.context()
        #expect(try names(reader.fetch(FetchRequest(entityName: "Person", sortDescriptors: [FetchSortDescriptor("name")])))
                == [nil, "Ann", "Bill", "Jane", "John"])
        #expect(try names(reader.fetch(FetchRequest(entityName: "Person", sortDescriptors: [FetchSortDescriptor("name", ascending: false)])))
                == ["John", "Jane", "Bill", "Ann", nil])
        let byManager = FetchRequest(entityName: "Person",
                                     sortDescriptors: [FetchSortDescriptor("manager.name", ascending: false), FetchSortDescriptor("id", ascending: false)])
        #expect(try names(reader.fetch(byManager)) == ["Bill", "Jane", nil, "Ann", "John"])
    }

    @Test("Limit and offset (Core Data: offset 1 of a,b,c,d is b,c,d; offset 4 is empty)", arguments: TestStoreKind.allCases)
    func window(kind: TestStoreKind) throws {
        let test = try TestContainer(model: try SampleModels.load("OrgChart"), kind: kind)
        let context = test.context()
        for name in ["a", "b", "c", "d"] { try context.make("Person", ["name": name]) }
        try context.save()
        let reader = test.context()
        func fetch(limit: Int = 0, offset: Int = 0) throws -> [String?] {
            try names(reader.fetch(FetchRequest(entityName: "Person", sortDescriptors: [FetchSortDescriptor("name")], fetchLimit: limit, fetchOffset: offset)))
        }
        #expect(try fetch(offset: 1) == ["b", "c", "d"])
        #expect(try fetch(offset: 4) == [])
        #expect(try fetch(limit: 2) == ["a", "b"])
        #expect(try fetch(limit: 2, offset: 3) == ["d"])
        #expect(try reader.count(for: FetchRequest(entityName: "Person")) == 4)
        #expect(try reader.count(for: FetchRequest(entityName: "Person", fetchLimit: 3)) == 3)
        #expect(try reader.count(for: FetchRequest(entityName: "Person", fetchOffset: 3)) == 1)
    }

    @Test("Fetching a parent returns subentities; includesSubentities false does not", arguments: TestStoreKind.allCases)
    func inheritance(kind: TestStoreKind) throws {
        let test = try TestContainer(model: TestModels.inheritance, kind: kind)
        let context = test.context()
        let acme = try context.make("Company", ["name": "Acme"])
        try context.make("Startup", ["name": "Rocket", "funding": Decimal(string: "1000000.50")!])
        try context.make("Person", ["name": "Ann", "employer": acme])
        let contract = try context.make("Contract", ["party": acme])
        try context.save()
        let reader = test.context()
        let parties = try reader.fetch(FetchRequest(entityName: "Party", sortDescriptors: [FetchSortDescriptor("name")]))
        #expect(try names(parties) == ["Acme", "Ann", "Rocket"])
        #expect(parties.map(\.entity.name) == ["Company", "Person", "Startup"])
        #expect(try names(reader.fetch(FetchRequest(entityName: "Company", sortDescriptors: [FetchSortDescriptor("name")]))) == ["Acme", "Rocket"])
        #expect(try names(reader.fetch(FetchRequest(entityName: "Company", includesSubentities: false))) == ["Acme"])
        #expect(try reader.fetch(FetchRequest(entityName: "Startup")).first?.value(forKey: "funding") as? Decimal == Decimal(string: "1000000.50"))
        // A to-one to an abstract parent resolves to the concrete subentity.
        let party = try reader.existingObject(with: contract.objectID).value(forKey: "party") as? ManagedObject
        #expect(party?.entity.name == "Company")
        #expect(party?.objectID == acme.objectID)
        let acmeStaff = try reader.existingObject(with: acme.objectID).objects("staff")
        #expect(try acmeStaff.map { try $0.string("name") } == ["Ann"])
    }

    @Test("Pending changes: unsaved inserts are included, deletes excluded, updates re-checked", arguments: TestStoreKind.allCases)
    func pendingChanges(kind: TestStoreKind) throws {
        let test = try TestContainer(model: try SampleModels.load("OrgChart"), kind: kind)
        let context = test.context()
        try seed(context)
        let jane = try #require(context.fetch(FetchRequest(entityName: "Person", where: "name", equals: .string("Jane"))).first)
        let bill = try #require(context.fetch(FetchRequest(entityName: "Person", where: "name", equals: .string("Bill"))).first)
        try context.make("Person", ["name": "Jane"])
        context.delete(jane)
        try bill.setValue("Jane", forKey: "name")
        let janes = try context.fetch(FetchRequest(entityName: "Person", where: "name", equals: .string("Jane")))
        #expect(janes.count == 2)
        #expect(!janes.contains(jane))
        #expect(janes.contains(bill))
        #expect(try context.count(for: FetchRequest(entityName: "Person", where: "name", equals: .string("Jane"))) == 2)
        let sorted = try context.fetch(FetchRequest(entityName: "Person", sortDescriptors: [FetchSortDescriptor("id")], fetchLimit: 2))
        #expect(try sorted.map { try $0.value(forKey: "id") as? Int64 } == [0, 1], "the unsaved Jane has the default id 0")
        var storeOnly = FetchRequest(entityName: "Person", where: "name", equals: .string("Jane"))
        storeOnly.includesPendingChanges = false
        #expect(try context.fetch(storeOnly) == [jane])
    }

    static let badRequests: [(FetchRequest, QueryError)] = [
        (FetchRequest(entityName: "Robot"), .unknownEntity("Robot")),
        (FetchRequest(entityName: "Person", where: "nickname", equals: .string("x")), .unknownKey(entity: "Person", key: "nickname", keyPath: "nickname")),
        (FetchRequest(entityName: "Person", predicate: .equal("manager.nickname", .string("x"))),
         .unknownKey(entity: "Person", key: "nickname", keyPath: "manager.nickname")),
        (FetchRequest(entityName: "Person", predicate: .equal("employees.name", .string("x"))),
         .toManyKeyNotAllowed(entity: "Person", key: "employees", keyPath: "employees.name")),
        (FetchRequest(entityName: "Person", predicate: .equal("name.first", .string("x"))),
         .notARelationship(entity: "Person", key: "name", keyPath: "name.first")),
        (FetchRequest(entityName: "Person", where: "id", equals: .string("one")),
         .typeMismatch(entity: "Person", keyPath: "id", expected: "Integer 64", value: "string(\"one\")")),
        (FetchRequest(entityName: "Person", predicate: .stringMatch(keyPath: "name", .matches, "(", [])),
         .invalidRegularExpression(entity: "Person", keyPath: "name", pattern: "(")),
        (FetchRequest(entityName: "Person", predicate: .stringMatch(keyPath: "id", .beginsWith, "1", [])),
         .typeMismatch(entity: "Person", keyPath: "id", expected: "Integer 64", value: "BEGINSWITH, which needs a String attribute")),
    ]

    @Test("Bad requests fail with an error naming the entity and key", arguments: badRequests.indices)
    func badRequest(index: Int) throws {
        let (request, expected) = Self.badRequests[index]
        for kind in TestStoreKind.allCases {
            let test = try TestContainer(model: try SampleModels.load("OrgChart"), kind: kind)
            let context = test.context()
            #expect(throws: expected) { try context.fetch(request) }
            #expect(throws: expected) { try context.count(for: request) }
        }
        #expect(expected.description.contains(request.entityName == "Robot" ? "Robot" : "key path"))
    }
}
