import Foundation
import Testing
import FerryModel
import FerryStore
import FerryTestSupport

/// Records the lifecycle hooks a context calls on it (issue 25, point 6).
final class HookedPerson: ManagedObject, KeyValidating {
    var calls: [String] = []
    var willSaveRounds = 0

    override func awakeFromInsert() { calls.append("awakeFromInsert") }
    override func awakeFromFetch() { calls.append("awakeFromFetch") }
    override func willSave() {
        calls.append("willSave")
        willSaveRounds += 1
        // A value set in willSave is saved; setting it once more changes the object again (a second round), then nothing.
        if !isDeleted, let name = try? value(forKey: "name") as? String, !name.hasSuffix("!") {
            try? setValue(name + "!", forKey: "name")
        }
    }
    override func didSave() { calls.append("didSave") }
    override func prepareForDeletion() { calls.append("prepareForDeletion") }
    override func didTurnIntoFault() { calls.append("didTurnIntoFault") }
    func validate(_ value: Any?, forKey key: String) throws {
        if key == "id", let id = value as? Int64, id < 0 {
            throw ValidationError(code: .numberTooSmall, entityName: "Person", objectURI: objectID.uriString, key: key, message: "ids are not negative")
        }
    }
}

/// Adds one more employee in its first `willSave`: a round that changes only a to-many relationship.
final class HiringPerson: ManagedObject {
    var hireInWillSave: ManagedObject?
    var willSaveRounds = 0

    override func willSave() {
        willSaveRounds += 1
        guard let hire = hireInWillSave else { return }
        hireInWillSave = nil
        try? mutableSetValue(forKey: "employees").insert(hire)
    }
}

@Suite("Lifecycle hooks, primitive accessors and per-key validation")
struct LifecycleHookTests {
    static func container(_ kind: TestStoreKind) throws -> TestContainer {
        try TestContainer(model: try SampleModels.load("OrgChart"), kind: kind, classes: ["Person": HookedPerson.self])
    }

    @Test("awakeFromInsert, willSave until nothing changes, didSave; awakeFromFetch on load; didTurnIntoFault on refresh", arguments: TestStoreKind.allCases)
    func hooksInOrder(kind: TestStoreKind) throws {
        let test = try Self.container(kind)
        let context = test.context()
        let person = try context.insert(HookedPerson.self)
        try person.setValue("Ann", forKey: "name")
        try context.save()
        #expect(person.calls == ["awakeFromInsert", "willSave", "willSave", "didSave"], "\(person.calls)")
        #expect(try person.value(forKey: "name") as? String == "Ann!")
        let reader = test.context()
        let loaded = try #require(try reader.existingObject(with: person.objectID) as? HookedPerson)
        #expect(loaded.calls == ["awakeFromFetch"])
        #expect(try loaded.value(forKey: "name") as? String == "Ann!", "the value set in willSave was saved")
        reader.refresh(loaded, mergeChanges: false)
        _ = try loaded.value(forKey: "name")
        #expect(loaded.calls == ["awakeFromFetch", "didTurnIntoFault", "awakeFromFetch"])
    }

    @Test("willSave runs again for an object whose round changed only a to-many relationship it had already changed", arguments: TestStoreKind.allCases)
    func willSaveAfterToManyEdit(kind: TestStoreKind) throws {
        let test = try TestContainer(model: try SampleModels.load("OrgChart"), kind: kind, classes: ["Person": HiringPerson.self])
        let context = test.context()
        let boss = try context.insert(HiringPerson.self)
        let first = try context.insert(HiringPerson.self)
        let second = try context.insert(HiringPerson.self)
        try context.save()
        try boss.mutableSetValue(forKey: "employees").insert(first)
        boss.hireInWillSave = second
        for person in [boss, first, second] { person.willSaveRounds = 0 }
        try context.save()
        // Round 1 added `second`, which changed boss (again in "employees") and made `second` pending:
        // both get a second round; nothing changes in it, so there is no third.
        #expect(boss.willSaveRounds == 2, "boss: \(boss.willSaveRounds) rounds")
        #expect(second.willSaveRounds == 1 && first.willSaveRounds == 1)
        let reader = test.context()
        let stored = try reader.existingObject(with: boss.objectID)
        #expect(try (stored.value(forKey: "employees") as? Set<ManagedObject>)?.map(\.objectID).sorted { $0.uriString < $1.uriString }
                == [first.objectID, second.objectID].sorted { $0.uriString < $1.uriString })
    }

    @Test("prepareForDeletion runs once, before the delete rules, with the relationships still set", arguments: TestStoreKind.allCases)
    func prepareForDeletion(kind: TestStoreKind) throws {
        let test = try Self.container(kind)
        let context = test.context()
        let boss = try context.insert(HookedPerson.self)
        let worker = try context.insert(HookedPerson.self)
        try worker.setValue(boss, forKey: "manager")
        try context.save()
        context.delete(boss)
        try context.processPendingChanges()
        #expect(boss.calls.filter { $0 == "prepareForDeletion" }.count == 1)
        #expect(try worker.value(forKey: "manager") == nil, "Nullify ran after it")
        try context.save()
        #expect(boss.calls.filter { $0 == "prepareForDeletion" }.count == 1, "not again at save")
    }

    @Test("setPrimitiveValue changes no bookkeeping and is saved with the object's next change", arguments: TestStoreKind.allCases)
    func primitives(kind: TestStoreKind) throws {
        let test = try TestContainer(model: try SampleModels.load("OrgChart"), kind: kind)
        let context = test.context()
        let person = try context.make("Person", ["name": "Bo"])
        try context.save()
        try person.setPrimitiveValue("Bob", forKey: "name")
        #expect(try person.primitiveValue(forKey: "name") as? String == "Bob")
        #expect(person.changedValues().isEmpty && !context.hasChanges, "Core Data: not in changedValues()")
        try person.setValue(Int64(7), forKey: "id")
        try context.save()
        let reader = test.context()
        let stored = try reader.existingObject(with: person.objectID)
        #expect(try stored.value(forKey: "name") as? String == "Bob")
        #expect(try stored.value(forKey: "id") as? Int64 == 7)
        #expect(throws: ContextError.self) { try person.setPrimitiveValue(Set<ManagedObject>(), forKey: "employees") }
        #expect(throws: ContextError.self) { try person.setPrimitiveValue(Date(), forKey: "name") }
    }

    @Test("validateValue checks the model's rules and the subclass's, without setting; saves run the subclass's per key", arguments: TestStoreKind.allCases)
    func validateValue(kind: TestStoreKind) throws {
        let test = try Self.container(kind)
        let context = test.context()
        let person = try context.insert(HookedPerson.self)
        try person.validateValue(Int64(3), forKey: "id")
        let error = try #require(throws: ValidationError.self) { try person.validateValue(Int64(-1), forKey: "id") }
        #expect(error.key == "id" && error.message == "ids are not negative")
        #expect(throws: ContextError.self) { try person.validateValue("text", forKey: "id") }
        #expect(try person.value(forKey: "id") as? Int64 == 0, "validating does not set")
        try person.setValue(Int64(-5), forKey: "id")
        let saveError = try #require(throws: SaveError.self) { try context.save() }
        #expect(saveError.validationErrors.map(\.key) == ["id"])
        // The model's rules, for a value not set.
        let rules = try TestContainer(model: TestModels.validation, kind: kind)
        let context2 = rules.context()
        let item = try context2.insert(entityName: "Item")
        let missing = try #require(throws: ValidationError.self) { try item.validateValue(nil, forKey: "name") }
        #expect(missing.code == .missingMandatoryProperty)
        let long = try #require(throws: ValidationError.self) { try item.validateValue("abcdefgh", forKey: "name") }
        #expect(long.code == .stringTooLong)
        let pattern = try #require(throws: ValidationError.self) { try item.validateValue("AB1", forKey: "name") }
        #expect(pattern.code == .stringPatternMatching)
        try item.validateValue("abc", forKey: "name")
        let tags = try (0..<3).map { _ in try context2.insert(entityName: "Tag") }
        let tooMany = try #require(throws: ValidationError.self) { try item.validateValue(tags, forKey: "tags") }
        #expect(tooMany.code == .relationshipExceedsMaximumCount)
        try item.validateValue(Array(tags.prefix(2)), forKey: "tags")
    }
}
