import Foundation
import Testing
import FerryModel
import FerryStore
import FerryTestSupport

@Suite("Validation at save")
struct ValidationTests {
    /// A valid Item with its required owner and one tag.
    func validItem(_ context: ManagedObjectContext) throws -> ManagedObject {
        let owner = try context.make("Owner")
        try context.make("Pet", ["owner": owner])
        let tag = try context.make("Tag")
        return try context.make("Item", ["name": "abc", "owner": owner, "tags": [tag]])
    }

    func failures(_ context: ManagedObjectContext) throws -> [ValidationError] {
        do {
            try context.save()
            return []
        } catch {
            return error.validationErrors
        }
    }

    @Test("A valid graph saves", arguments: TestStoreKind.allCases)
    func validSaves(kind: TestStoreKind) throws {
        let test = try TestContainer(model: TestModels.validation, kind: kind)
        let context = test.context()
        _ = try validItem(context)
        try context.save()
        #expect(try test.context().count(for: FetchRequest(entityName: "Item")) == 1)
    }

    static let attributeCases: [(key: String, value: (any Sendable)?, code: ValidationError.Code)] = [
        ("name", nil, .missingMandatoryProperty),
        ("name", "a", .stringTooShort),
        ("name", "abcdef", .stringTooLong),
        ("name", "ab1", .stringPatternMatching),
        ("quantity", Int32(-1), .numberTooSmall),
        ("quantity", Int32(11), .numberTooLarge),
        ("price", 0.25, .numberTooSmall),
        ("when", Date(timeIntervalSince1970: 0), .dateTooSoon),
        ("when", Date(timeIntervalSince1970: 2_000_000_000), .dateTooLate),
    ]

    @Test("Attribute rules: required, bounds, lengths, pattern", arguments: attributeCases.indices)
    func attributeRule(index: Int) throws {
        let (key, value, code) = Self.attributeCases[index]
        let test = try TestContainer(model: TestModels.validation, kind: .memory)
        let context = test.context()
        let item = try validItem(context)
        try item.setValue(value, forKey: key)
        let found = try failures(context)
        #expect(found.map(\.code) == [code], "\(key) = \(String(describing: value))")
        #expect(found.first?.key == key)
        #expect(found.first?.entityName == "Item")
        #expect(try test.context().count(for: FetchRequest(entityName: "Item")) == 0, "nothing was written")
    }

    @Test("Bounds are inclusive and a whole-string pattern match passes")
    func boundaries() throws {
        let test = try TestContainer(model: TestModels.validation, kind: .memory)
        let context = test.context()
        let item = try validItem(context)
        try item.setValue("abcde", forKey: "name")
        try item.setValue(Int32(10), forKey: "quantity")
        try item.setValue(0.5, forKey: "price")
        try item.setValue(Date(timeIntervalSince1970: 946_684_800), forKey: "when")
        #expect(try failures(context).isEmpty)
    }

    @Test("To-many counts: a required empty to-many, too many, and an optional empty one")
    func toManyCounts() throws {
        let test = try TestContainer(model: TestModels.validation, kind: .memory)
        let context = test.context()
        let item = try validItem(context)
        let tags = try (0..<3).map { _ in try context.make("Tag") }
        try item.setValue(tags, forKey: "tags")
        #expect(try failures(context).map(\.code) == [.relationshipExceedsMaximumCount])
        // An optional to-many with minCount 1 passes when empty (Core Data's rule).
        try item.setValue([ManagedObject](), forKey: "tags")
        #expect(try failures(context).isEmpty)
        // A required to-many must not be empty.
        let owner = try context.make("Owner")
        let found = try failures(context)
        #expect(found.map(\.code) == [.relationshipLacksMinimumCount])
        #expect(found.first?.objectURI == owner.objectID.uriString)
        #expect(found.first?.key == "pets")
    }

    @Test("Every failure of a save is reported together (Core Data's 1560)", arguments: TestStoreKind.allCases)
    func multipleFailures(kind: TestStoreKind) throws {
        let test = try TestContainer(model: TestModels.validation, kind: kind)
        let context = test.context()
        let item = try context.insert(entityName: "Item")
        try item.setValue(Int32(99), forKey: "quantity")
        let error = try #require(throws: SaveError.self) { try context.save() }
        #expect(error.code == 1560)
        #expect(Set(error.validationErrors.map(\.code)) == [.missingMandatoryProperty, .numberTooLarge])
        #expect(Set(error.validationErrors.compactMap(\.key)) == ["name", "owner", "quantity"])
        #expect(error.description.contains("validation failed with 3 errors"))
        #expect(try test.context().count(for: FetchRequest(entityName: "Item")) == 0)
        // Objects may be invalid in memory between saves; fixing them lets the save through.
        try item.setValue("fixed", forKey: "name")
        try item.setValue(Int32(1), forKey: "quantity")
        let owner = try context.make("Owner")
        try context.make("Pet", ["owner": owner])
        try item.setValue(owner, forKey: "owner")
        try context.save()
    }

    @Test("Updates are validated too", arguments: TestStoreKind.allCases)
    func updateValidation(kind: TestStoreKind) throws {
        let test = try TestContainer(model: TestModels.validation, kind: kind)
        let context = test.context()
        let item = try validItem(context)
        try context.save()
        try item.setValue("x", forKey: "name")
        #expect(try failures(context).map(\.code) == [.stringTooShort])
        let reader = test.context()
        #expect(try reader.all("Item").first?.string("name") == "abc")
    }

    final class Order: ManagedObject {
        override func validateForInsert() throws {
            if try value(forKey: "paid") as? Bool == true, try value(forKey: "customer") == nil {
                throw ValidationError(code: .custom, entityName: "Order", objectURI: objectID.uriString, key: "customer",
                                      message: "a paid order needs a customer")
            }
        }
        override func validateForUpdate() throws {
            if try value(forKey: "made") as? Bool == true, try value(forKey: "paid") as? Bool != true {
                throw ValidationError(code: .custom, entityName: "Order", objectURI: objectID.uriString, key: "made",
                                      message: "an order is made only once paid")
            }
        }
        override func validateForDelete() throws {
            if try value(forKey: "paid") as? Bool == true {
                throw ValidationError(code: .custom, entityName: "Order", objectURI: objectID.uriString, key: nil,
                                      message: "paid orders are kept for the books")
            }
        }
    }

    @Test("Custom validators: subclass hooks for insert, update and delete", arguments: TestStoreKind.allCases)
    func subclassValidators(kind: TestStoreKind) throws {
        let test = try TestContainer(model: try SampleModels.load("Orders"), kind: kind, classes: ["Order": Order.self])
        let context = test.context()
        let order = try context.make("Order", ["date": Date(), "paid": true])
        #expect(try failures(context).map(\.message) == ["a paid order needs a customer"])
        try order.setValue(try context.make("Customer", ["name": "Ann"]), forKey: "customer")
        try context.save()
        try order.setValue(false, forKey: "paid")
        try order.setValue(true, forKey: "made")
        #expect(try failures(context).map(\.message) == ["an order is made only once paid"])
        try order.setValue(true, forKey: "paid")
        try context.save()
        context.delete(order)
        #expect(try failures(context).map(\.message) == ["paid orders are kept for the books"])
    }

    @Test("Custom validators: closures registered with the container, by phase, inherited by subentities")
    func closureValidators() throws {
        let validator = EntityValidator(entityName: "Party", phases: [.insert, .update]) { object, phase in
            guard let name = try object.value(forKey: "name") as? String, !name.isEmpty else {
                throw ValidationError(code: .custom, entityName: object.entity.name, objectURI: object.objectID.uriString,
                                      key: "name", message: "every party needs a name (\(phase.rawValue))")
            }
        }
        struct Refusal: Error, CustomStringConvertible { var description: String { "startups are forever" } }
        let deletion = EntityValidator(entityName: "Startup", phases: [.delete]) { _, _ in throw Refusal() }
        let test = try TestContainer(model: TestModels.inheritance, kind: .memory, validators: [validator, deletion])
        let context = test.context()
        let startup = try context.make("Startup")
        let found = try failures(context)
        #expect(found.map(\.message) == ["every party needs a name (insert)"])
        #expect(found.first?.entityName == "Startup")
        try startup.setValue("Acme", forKey: "name")
        try context.save()
        try startup.setValue("", forKey: "name")
        #expect(try failures(context).map(\.message) == ["every party needs a name (update)"])
        try startup.setValue("Acme 2", forKey: "name")
        try context.save()
        context.delete(startup)
        let refused = try failures(context)
        #expect(refused.map(\.code) == [.custom])
        #expect(refused.map(\.message) == ["startups are forever"])
    }
}
