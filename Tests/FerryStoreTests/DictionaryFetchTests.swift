import Foundation
import Testing
import FerryModel
import FerryStore
import FerryTestSupport

/// Dictionary results (Core Data's `.dictionaryResultType` with `propertiesToFetch`),
/// on the data set of the predicate table.
@Suite("Dictionary fetches")
struct DictionaryFetchTests {
    static let model = try! SampleModels.load("OrgChart")

    /// The store (whose folder lives as long as this value), a context and the objects by label.
    struct Seeded {
        let test: TestContainer
        let context: ManagedObjectContext
        let objects: [String: ManagedObject]
    }

    func seeded(_ kind: TestStoreKind) throws -> Seeded {
        let test = try TestContainer(model: Self.model, kind: kind)
        let context = test.context()
        let objects = try PredicateTableData.insert("OrgChart", into: context)
        try context.save()
        return Seeded(test: test, context: context, objects: objects)
    }

    @Test("Chosen key paths through to-ones, to-one destinations as object IDs, nil values left out", arguments: TestStoreKind.allCases)
    func chosenProperties(kind: TestStoreKind) throws {
        let seeded = try seeded(kind)
        let (context, objects) = (seeded.context, seeded.objects)
        var request = try FetchRequest(entityName: "Person", format: "manager.name == 'Alice' OR id == 0", model: Self.model)
        request.sortDescriptors = [FetchSortDescriptor("id")]
        request.propertiesToFetch = ["name", "manager.name", "manager"]
        let alice = try #require(objects["p1"]).objectID
        let rows = try context.fetchDictionaries(request)
        #expect(rows == [
            [:],  // p7: no name, no manager
            ["name": .attribute(.string("Bob")), "manager.name": .attribute(.string("Alice")), "manager": .object(alice)],
            ["name": .attribute(.string("Carol")), "manager.name": .attribute(.string("Alice")), "manager": .object(alice)],
            ["name": .attribute(.string("O'Brien")), "manager.name": .attribute(.string("Alice")), "manager": .object(alice)],
        ])
        var organizations = FetchRequest(entityName: "Organization", sortDescriptors: [FetchSortDescriptor("id", ascending: false)])
        organizations.propertiesToFetch = ["leader", "leader.manager.name"]
        let leaders = try context.fetchDictionaries(organizations)
        #expect(leaders == [
            [:],  // o3 Initech, no leader
            ["leader": .object(try #require(objects["p2"]).objectID), "leader.manager.name": .attribute(.string("Alice"))],
            ["leader": .object(alice)],
            ["leader": .object(try #require(objects["p5"]).objectID), "leader.manager.name": .attribute(.string("Bob"))],
        ])
    }

    @Test("No properties named: every stored attribute and to-one", arguments: TestStoreKind.allCases)
    func everyProperty(kind: TestStoreKind) throws {
        let seeded = try seeded(kind)
        let (context, objects) = (seeded.context, seeded.objects)
        let request = try FetchRequest(entityName: "Person", format: "id == 4", model: Self.model)
        #expect(try context.fetchDictionaries(request) == [
            ["id": .attribute(.integer(4)), "name": .attribute(.string("dave")), "manager": .object(try #require(objects["p2"]).objectID)],
        ])
    }

    @Test("Distinct results, then the offset and limit", arguments: TestStoreKind.allCases)
    func distinct(kind: TestStoreKind) throws {
        let seeded = try seeded(kind)
        let context = seeded.context
        var request = try FetchRequest(entityName: "Person", format: "manager != nil", model: Self.model)
        request.sortDescriptors = [FetchSortDescriptor("manager.name", caseInsensitive: true), FetchSortDescriptor("id")]
        request.propertiesToFetch = ["manager.name"]
        func names(_ rows: [[String: FetchedValue]]) -> [String] {
            rows.map { row in
                guard case .attribute(.string(let name))? = row["manager.name"] else { return "-" }
                return name
            }
        }
        #expect(names(try context.fetchDictionaries(request)) == ["Alice", "Alice", "Alice", "Bob", "Bob", "Carol", "dave"])
        request.returnsDistinctResults = true
        #expect(names(try context.fetchDictionaries(request)) == ["Alice", "Bob", "Carol", "dave"])
        request.fetchOffset = 1
        request.fetchLimit = 2
        #expect(names(try context.fetchDictionaries(request)) == ["Bob", "Carol"])
    }

    @Test("Unsaved changes are not seen, as in Core Data", arguments: TestStoreKind.allCases)
    func storeOnly(kind: TestStoreKind) throws {
        let seeded = try seeded(kind)
        let (context, objects) = (seeded.context, seeded.objects)
        try context.make("Person", ["id": Int64(4), "name": "unsaved"])
        try #require(objects["p4"]).setValue("renamed", forKey: "name")
        var request = try FetchRequest(entityName: "Person", format: "id == 4", model: Self.model)
        request.propertiesToFetch = ["name"]
        #expect(try context.fetchDictionaries(request) == [["name": .attribute(.string("dave"))]])
        #expect(try context.count(for: request) == 2, "object fetches do see the unsaved insert")
    }

    @Test("To-many and unknown properties are refused with the key path named", arguments: TestStoreKind.allCases)
    func badProperties(kind: TestStoreKind) throws {
        let seeded = try seeded(kind)
        let context = seeded.context
        var request = FetchRequest(entityName: "Person")
        request.propertiesToFetch = ["name", "employees"]
        #expect(throws: QueryError.toManyKeyNotAllowed(entity: "Person", key: "employees", keyPath: "employees")) {
            try context.fetchDictionaries(request)
        }
        request.propertiesToFetch = ["manager.nickname"]
        #expect(throws: QueryError.unknownKey(entity: "Person", key: "nickname", keyPath: "manager.nickname")) {
            try context.fetchDictionaries(request)
        }
    }
}
