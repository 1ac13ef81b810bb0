import Foundation
import Testing
import FerryModel
import FerryStore
import FerryTestSupport

@Suite("Delete rules at save")
struct DeleteRuleTests {
    @Test("Nullify removes the deleted object from its destinations' inverses", arguments: TestStoreKind.allCases)
    func nullify(kind: TestStoreKind) throws {
        let test = try TestContainer(model: try SampleModels.load("Orders"), kind: kind)
        let context = test.context()
        let customer = try context.make("Customer", ["name": "Ann"])
        let first = try context.make("Order", ["date": Date(), "customer": customer])
        let second = try context.make("Order", ["date": Date(), "customer": customer])
        try context.save()
        context.delete(customer)
        try context.save()
        #expect(try first.value(forKey: "customer") == nil)
        #expect(try second.value(forKey: "customer") == nil)
        let reader = test.context()
        let orders = try reader.all("Order")
        #expect(orders.count == 2)
        for order in orders { #expect(try order.value(forKey: "customer") == nil) }
        #expect(try reader.count(for: FetchRequest(entityName: "Customer")) == 0)
    }

    @Test("Cascade follows chains: A → B → C", arguments: TestStoreKind.allCases)
    func cascadeChain(kind: TestStoreKind) throws {
        let test = try TestContainer(model: TestModels.deleteRules, kind: kind)
        let context = test.context()
        let a = try context.make("A")
        for _ in 0..<2 {
            let b = try context.make("B", ["a": a])
            for _ in 0..<3 { try context.make("C", ["b": b]) }
        }
        let survivor = try context.make("C")
        try context.save()
        context.delete(a)
        #expect(context.deletedObjects.count == 1, "delete rules run at save, not at delete()")
        try context.save()
        let reader = test.context()
        #expect(try reader.count(for: FetchRequest(entityName: "A")) == 0)
        #expect(try reader.count(for: FetchRequest(entityName: "B")) == 0)
        #expect(try reader.fetchObjectIDs(FetchRequest(entityName: "C")) == [survivor.objectID])
    }

    @Test("Cascade through a cycle terminates and deletes the whole component", arguments: TestStoreKind.allCases)
    func cascadeCycle(kind: TestStoreKind) throws {
        let test = try TestContainer(model: TestModels.deleteRules, kind: kind)
        let context = test.context()
        let x1 = try context.make("X")
        let x2 = try context.make("X")
        let y1 = try context.make("Y", ["xs": [x1, x2]])
        let y2 = try context.make("Y", ["xs": [x2]])
        let loneX = try context.make("X")
        try context.save()
        #expect(try x2.objects("ys") == [y1, y2])
        context.delete(x1)
        try context.save()
        let reader = test.context()
        #expect(try reader.fetchObjectIDs(FetchRequest(entityName: "X")) == [loneX.objectID])
        #expect(try reader.count(for: FetchRequest(entityName: "Y")) == 0)
    }

    @Test("Deny: delete() succeeds, save fails naming object and relationship, nothing is written", arguments: TestStoreKind.allCases)
    func deny(kind: TestStoreKind) throws {
        let test = try TestContainer(model: TestModels.deleteRules, kind: kind)
        let context = test.context()
        let department = try context.make("Department", ["name": "R&D"])
        let employee = try context.make("Employee", ["name": "Eve", "department": department])
        try context.save()
        context.delete(department)
        #expect(department.isDeleted)
        let error = try #require(throws: SaveError.self) { try context.save() }
        #expect(error.code == 1600)
        let failure = try #require(error.validationErrors.first)
        #expect(failure.code == .relationshipDeniedDelete)
        #expect(failure.objectURI == department.objectID.uriString)
        #expect(failure.key == "employees")
        #expect(failure.description.contains("Department.employees"))
        #expect(failure.message.contains(employee.objectID.uriString))
        let reader = test.context()
        #expect(try reader.count(for: FetchRequest(entityName: "Department")) == 1, "nothing was written")
        #expect(context.hasChanges, "the failed save keeps its pending changes")
        context.rollback()
        #expect(!department.isDeleted)
        // Emptying the relationship first lets the delete through.
        try employee.setValue(nil, forKey: "department")
        context.delete(department)
        try context.save()
        #expect(try reader.count(for: FetchRequest(entityName: "Department")) == 0)
    }

    @Test("Deny does not block when the destinations are deleted in the same save", arguments: TestStoreKind.allCases)
    func denyWithDestinationsDeleted(kind: TestStoreKind) throws {
        let test = try TestContainer(model: TestModels.deleteRules, kind: kind)
        let context = test.context()
        let department = try context.make("Department")
        let employee = try context.make("Employee", ["department": department])
        try context.save()
        context.delete(employee)
        context.delete(department)
        try context.save()
        #expect(try test.context().count(for: FetchRequest(entityName: "Employee")) == 0)
    }

    @Test("No Action clears references to the deleted object, as Nullify does (Core Data would leave them dangling)", arguments: TestStoreKind.allCases)
    func noAction(kind: TestStoreKind) throws {
        let test = try TestContainer(model: TestModels.deleteRules, kind: kind)
        let context = test.context()
        let folder = try context.make("Folder")
        let note = try context.make("Note", ["folder": folder])
        try context.save()
        let folderID = folder.objectID
        context.delete(folder)
        try context.save()
        #expect(try note.value(forKey: "folder") == nil)
        let reader = test.context()
        let reloaded = try reader.existingObject(with: note.objectID)
        #expect(try reloaded.value(forKey: "folder") == nil, "the stored reference was cleared")
        #expect(throws: ContextError.self) { try reader.existingObject(with: folderID) }
    }

    @Test("Nullify onto a required inverse makes the next save fail validation", arguments: TestStoreKind.allCases)
    func nullifyOntoRequiredInverse(kind: TestStoreKind) throws {
        let test = try TestContainer(model: TestModels.validation, kind: kind)
        let context = test.context()
        let owner = try context.make("Owner")
        let pet = try context.make("Pet", ["owner": owner])
        try context.save()
        context.delete(owner)
        let error = try #require(throws: SaveError.self) { try context.save() }
        let failure = try #require(error.validationErrors.first)
        #expect(failure.code == .missingMandatoryProperty)
        #expect(failure.objectURI == pet.objectID.uriString)
        #expect(failure.key == "owner")
        #expect(try test.context().count(for: FetchRequest(entityName: "Owner")) == 1)
    }

    @Test("Deleting an object removes it from many-to-many relationships", arguments: TestStoreKind.allCases)
    func manyToManyDelete(kind: TestStoreKind) throws {
        let test = try TestContainer(model: TestModels.relationships, kind: kind)
        let context = test.context()
        let swift = try context.make("Tag", ["label": "swift"])
        let linux = try context.make("Tag", ["label": "linux"])
        let post = try context.make("Post", ["title": "Hello", "tags": [swift, linux]])
        try context.save()
        context.delete(swift)
        try context.save()
        #expect(try post.objects("tags") == [linux])
        let reader = test.context()
        let reloaded = try reader.existingObject(with: post.objectID)
        #expect(try reloaded.objects("tags").map { try $0.string("label") } == ["linux"])
    }
}
