import Foundation
import Testing
import FerryModel
import FerryStore
import FerryTestSupport

/// The scenarios the sample models come from (Core Data teaching material).
@Suite("Teaching scenarios on the sample models")
struct TeachingScenarioTests {
    @Test("OrgChart: an organization led by John; Jane and Bill report to John; the hierarchy reads back", arguments: TestStoreKind.allCases)
    func orgChart(kind: TestStoreKind) throws {
        let test = try TestContainer(model: try SampleModels.load("OrgChart"), kind: kind, classes: ["Person": Person.self])
        let context = test.context()
        let john = try context.insert(Person.self)
        john.name = "John"
        john.id = 1
        for (id, name) in [(2, "Jane"), (3, "Bill")] {
            let report = try context.insert(Person.self)
            report.id = Int64(id)
            report.name = name
            report.manager = john
        }
        let organization = try context.make("Organization", ["id": Int16(1), "name": "Acme", "leader": john])
        try context.save()

        let reader = test.context()
        let org = try #require(reader.fetch(FetchRequest(entityName: "Organization")).first)
        #expect(try org.string("name") == "Acme")
        #expect(org.objectID == organization.objectID)
        let leader = try #require(try org.value(forKey: "leader") as? Person)
        #expect(leader.name == "John")
        #expect(leader.manager == nil)
        let reports = leader.employees.objects.compactMap { ($0 as? Person)?.name }.sorted()
        #expect(reports == ["Bill", "Jane"])
        for report in leader.employees.objects {
            #expect((report as? Person)?.manager === leader)
            #expect((report as? Person)?.employees.isEmpty == true)
        }
    }

    @Test("Orders: deleting an Order deletes its rows; deleting a Customer clears its orders' customer; a nameless Customer fails",
          arguments: TestStoreKind.allCases)
    func orders(kind: TestStoreKind) throws {
        let test = try TestContainer(model: try SampleModels.load("Orders"), kind: kind)
        let context = test.context()
        let customer = try context.make("Customer", ["name": "Ann"])
        let wash = try context.make("Service", ["name": "Wash"])
        let order = try context.make("Order", ["date": Date(), "customer": customer])
        #expect(try order.value(forKey: "paid") as? Bool == false, "paid defaults to NO")
        #expect(try order.value(forKey: "made") as? Bool == false, "made defaults to NO")
        for sum in [10.5, 20] { try context.make("RowOfOrder", ["sum": sum, "order": order, "service": wash]) }
        let keep = try context.make("Order", ["date": Date(), "customer": customer])
        try context.save()

        context.delete(order)
        try context.save()
        let reader = test.context()
        #expect(try reader.count(for: FetchRequest(entityName: "RowOfOrder")) == 0, "Cascade: the rows went with the order")
        #expect(try reader.existingObject(with: wash.objectID).objects("rowsOfOrders").isEmpty, "Nullify on the service side")

        context.delete(customer)
        try context.save()
        let after = test.context()
        let survivor = try after.existingObject(with: keep.objectID)
        #expect(try survivor.value(forKey: "customer") == nil, "Nullify: the order stays, without a customer")

        let nameless = try context.make("Customer", ["info": "no name"])
        let error = try #require(throws: SaveError.self) { try context.save() }
        #expect(error.code == 1570)
        #expect(error.validationErrors.first?.key == "name")
        #expect(error.validationErrors.first?.objectURI == nameless.objectID.uriString)
    }

    @Test("Company: deleting a company deletes its employees", arguments: TestStoreKind.allCases)
    func company(kind: TestStoreKind) throws {
        let test = try TestContainer(model: try SampleModels.load("Company"), kind: kind)
        let context = test.context()
        let company = try context.make("Company", ["name": "Initech", "inn": "7707083893", "uid": UUID()])
        for name in ["Peter", "Milton"] { try context.make("Employee", ["firstName": name, "company": company]) }
        let freelancer = try context.make("Employee", ["firstName": "Bob"])
        try context.save()
        context.delete(company)
        try context.save()
        let reader = test.context()
        #expect(try reader.fetchObjectIDs(FetchRequest(entityName: "Employee")) == [freelancer.objectID])
        #expect(try reader.count(for: FetchRequest(entityName: "Company")) == 0)
    }
}
