import Foundation
import Testing
import FerryModel
import FerryStore
import FerrySQLite
import FerryTestSupport

/// The look-up replay uses before inserting objects directly: does any stored object hold
/// one of these unique keys? SQLite answers with one statement; the fetch-request answer
/// (in-memory stores, and keys JSON cannot carry) must agree with it.
@Suite("Unique key look-up")
struct UniqueKeyLookupTests {
    static let model = try! ManagedObjectModel {
        Entity("Person", uniquenessConstraints: [["email"], ["first", "last"]]) {
            Attribute("email", .string, indexed: true)
            Attribute("first", .string)
            Attribute("last", .string)
            Attribute("photo", .binaryData)
            Attribute("weight", .double)
        }
        Entity("Employee", parent: "Person", uniquenessConstraints: [["badge"], ["photo"], ["weight"]]) { Attribute("badge", .integer64) }
        Entity("Robot") { Attribute("email", .string) }
    }

    @Test("Single and compound keys, subentities, doubles and binary keys", arguments: TestStoreKind.allCases)
    func lookUp(kind: TestStoreKind) throws {
        let test = try TestContainer(model: Self.model, kind: kind)
        let context = test.context()
        try context.make("Employee", ["email": "ann@x", "first": "Ann", "last": "Lee", "badge": Int64(7), "photo": Data([1, 2]), "weight": 61.5])
        try context.make("Robot", ["email": "bot@x"])
        try context.save()
        let store = try #require(test.container.store as? any ReplicaStore)
        let email = UniquenessConstraint(entityName: "Person", properties: ["email"])
        let name = UniquenessConstraint(entityName: "Person", properties: ["first", "last"])
        #expect(try store.holdsAny(of: [[.string("zed@x")], [.string("ann@x")]], for: email), "an Employee is a Person")
        #expect(try !store.holdsAny(of: [[.string("bot@x")]], for: email), "a Robot is not")
        #expect(try !store.holdsAny(of: [], for: email))
        #expect(try store.holdsAny(of: [[.string("Ann"), .string("Lee")]], for: name))
        #expect(try !store.holdsAny(of: [[.string("Ann"), .string("Kim")], [.string("Bo"), .string("Lee")]], for: name))
        #expect(try store.holdsAny(of: [[.integer(7)]], for: UniquenessConstraint(entityName: "Employee", properties: ["badge"])))
        #expect(try !store.holdsAny(of: [[.integer(8)]], for: UniquenessConstraint(entityName: "Employee", properties: ["badge"])))
        #expect(try store.holdsAny(of: [[.double(61.5)]], for: UniquenessConstraint(entityName: "Employee", properties: ["weight"])))
        #expect(try store.holdsAny(of: [[.binaryData(Data([1, 2]))]], for: UniquenessConstraint(entityName: "Employee", properties: ["photo"])))
        #expect(try !store.holdsAny(of: [[.binaryData(Data([2]))]], for: UniquenessConstraint(entityName: "Employee", properties: ["photo"])))
        let many = (0..<1_500).map { [AttributeValue.string("p\($0)@x")] } + [[.string("ann@x")]]
        #expect(try store.holdsAny(of: many, for: email), "a key past the first query's batch")
    }
}
