import Foundation
import Testing
import FerryModel
@testable import FerryStore
import FerryTestSupport

/// What a context hands its store to save (``SaveRequest``), built from its changed objects.
@Suite("Save requests")
struct SaveRequestTests {
    static let model = try! ManagedObjectModel {
        Entity("Person") {
            Attribute("name", .string)
            Relationship("manager", to: "Person", inverse: "reports")
            Relationship("reports", to: "Person", inverse: "manager", toMany: true)
            Relationship("desk", to: "Desk")
        }
        Entity("Desk") { Attribute("number", .integer64) }
    }

    @Test("New objects with no to-one destination share one all-nil array of destinations; one with a destination has its own, with it",
          arguments: TestStoreKind.allCases)
    func sharedEmptyDestinations(_ kind: TestStoreKind) throws {
        let test = try TestContainer(model: Self.model, kind: kind)
        let context = test.context()
        let boss = try context.make("Person", ["name": "Boss"])
        try context.make("Person", ["name": "Ann"])
        let bob = try context.make("Person", ["name": "Bob", "manager": boss])
        try context.make("Person", ["name": "Cy"])
        let (request, _) = context.makeSaveRequest([])
        #expect(request.inserts.count == 4)
        func storage(_ index: Int) -> UnsafeRawPointer? {
            request.inserts[index].toOne.withUnsafeBufferPointer { UnsafeRawPointer($0.baseAddress) }
        }
        let bobIndex = try #require(request.inserts.firstIndex { $0.objectID == bob.objectID })
        let others = request.inserts.indices.filter { $0 != bobIndex }
        #expect(Set(others.map(storage)).count == 1, "the three without a manager")
        #expect(storage(bobIndex) != storage(others[0]))
        #expect(request.inserts[bobIndex].toOne.contains(boss.objectID))
        #expect(others.allSatisfy { request.inserts[$0].toOne.allSatisfy { $0 == nil } })
        // And the save writes each as it was set.
        try context.save()
        let check = test.context()
        var managers: [String: String] = [:]
        for person in try check.fetch(FetchRequest(entityName: "Person")) {
            let name = try person.value(forKey: "name") as? String ?? "?"
            managers[name] = try (person.value(forKey: "manager") as? ManagedObject)?.value(forKey: "name") as? String ?? "none"
        }
        #expect(managers == ["Boss": "none", "Ann": "none", "Bob": "Boss", "Cy": "none"])
    }
}
