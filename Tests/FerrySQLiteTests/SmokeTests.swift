import Testing
import FerryModel
import FerryStore
import FerrySQLite
import FerryTestSupport

@Suite struct SmokeTests {
    @Test(arguments: TestStoreKind.allCases)
    func orgChartRoundTrip(kind: TestStoreKind) throws {
        let model = try SampleModels.load("OrgChart")
        let test = try TestContainer(model: model, kind: kind)
        let context = test.context()
        let john = try context.insert(entityName: "Person")
        try john.setValue("John", forKey: "name")
        let jane = try context.insert(entityName: "Person")
        try jane.setValue("Jane", forKey: "name")
        try jane.setValue(john, forKey: "manager")
        let org = try context.insert(entityName: "Organization")
        try org.setValue(john, forKey: "leader")
        try context.save()
        #expect(!john.objectID.isTemporaryID)
        let other = test.context()
        let people = try other.fetch(FetchRequest(entityName: "Person", where: "name", equals: .string("John")))
        #expect(people.count == 1)
        let employees = try people[0].value(forKey: "employees") as? Set<ManagedObject>
        #expect(employees?.count == 1)
        #expect(try employees?.first?.value(forKey: "name") as? String == "Jane")
    }
}
