import Foundation
import Testing
import FerryModel
import FerryStore
import FerryTestSupport

/// Uniqueness constraints at save, with Core Data's five merge policies
/// (docs/STORE.md, "Uniqueness constraints"), on both stores.
@Suite("Uniqueness constraints")
struct UniquenessConstraintTests {
    static let model = try! ManagedObjectModel {
        Entity("Person", uniquenessConstraints: [["email"]]) {
            Attribute("email", .string)
            Attribute("name", .string)
            Attribute("age", .integer64)
            Relationship("team", to: "Team", inverse: "members")
            Relationship("pets", to: "Pet", inverse: "owner", toMany: true)
        }
        Entity("Employee", parent: "Person") { Attribute("badge", .integer64) }
        Entity("Team", uniquenessConstraints: [["org", "code"]]) {
            Attribute("org", .string)
            Attribute("code", .integer64)
            Relationship("members", to: "Person", inverse: "team", toMany: true)
        }
        Entity("Pet") {
            Attribute("name", .string)
            Relationship("owner", to: "Person", inverse: "pets")
        }
        // A one-way reference: nothing on Person points back.
        Entity("Card") { Relationship("holder", to: "Person") }
    }

    /// A store with Ann (ann@x, 30, team T1, pet Rex) saved.
    static func seeded(_ kind: TestStoreKind) throws -> (TestContainer, annURI: String) {
        let test = try TestContainer(model: model, kind: kind)
        let context = test.context()
        let team = try context.make("Team", ["org": "acme", "code": Int64(1)])
        let ann = try context.make("Person", ["email": "ann@x", "name": "Ann", "age": Int64(30), "team": team])
        try context.make("Pet", ["name": "Rex", "owner": ann])
        try context.save()
        return (test, ann.objectID.uriString)
    }

    /// The conflicts a save reports (an issue is recorded when it reports something else).
    static func conflicts(_ save: () throws -> Void) -> [ConstraintConflict] {
        do {
            try save()
            Issue.record("the save succeeded")
        } catch let error as SaveError {
            if case .constraintConflict(let conflicts) = error { return conflicts }
            Issue.record("expected a constraint conflict, got \(error)")
        } catch {
            Issue.record("expected a SaveError, got \(error)")
        }
        return []
    }

    /// The emails of the people the store holds, sorted (nil as "").
    static func emails(_ test: TestContainer) throws -> [String] {
        let reader = test.context()
        return try reader.fetch(FetchRequest(entityName: "Person")).map { try $0.value(forKey: "email") as? String ?? "" }.sorted()
    }

    @Test("Under the error policy a duplicate fails the save, naming the constraint and both objects; nothing is written", arguments: TestStoreKind.allCases)
    func errorPolicy(kind: TestStoreKind) throws {
        let (test, annURI) = try Self.seeded(kind)
        let context = test.context()
        let duplicate = try context.make("Person", ["email": "ann@x", "name": "Annie"])
        let conflicts = Self.conflicts { try context.save() }
        #expect(conflicts.count == 1)
        do {
            #expect(conflicts.first?.constraint == UniquenessConstraint(entityName: "Person", properties: ["email"]))
            #expect(conflicts.first?.objectURI == duplicate.objectID.uriString)
            #expect(conflicts.first?.conflictingObjectURI == annURI)
            #expect(conflicts.first?.values == ["email = \"ann@x\""])
            #expect(SaveError.constraintConflict(conflicts).code == 133021)
            #expect(SaveError.constraintConflict(conflicts).description.contains("uniqueness constraint Person(email) broken"))
        }
        #expect(try Self.emails(test) == ["ann@x"])
        #expect(context.hasChanges, "the context keeps its pending changes")
    }

    @Test("Two new objects of one save, a subentity and a parent, and an update into a taken key all collide", arguments: TestStoreKind.allCases)
    func collisions(kind: TestStoreKind) throws {
        let (test, _) = try Self.seeded(kind)
        // Two inserts in one save.
        var context = test.context()
        try context.make("Person", ["email": "bob@x"])
        try context.make("Person", ["email": "bob@x"])
        #expect(throws: SaveError.self) { try context.save() }
        // An Employee shares its parent's key space.
        context = test.context()
        try context.make("Employee", ["email": "ann@x", "badge": Int64(7)])
        #expect(throws: SaveError.self) { try context.save() }
        // A saved object updated into a taken key.
        context = test.context()
        let cid = try context.make("Person", ["email": "cid@x"])
        try context.save()
        try cid.setValue("ann@x", forKey: "email")
        #expect(throws: SaveError.self) { try context.save() }
        // Deleting the holder in the same save frees the key.
        let ann = try #require(try context.fetch(FetchRequest(entityName: "Person", predicate: .equal("email", .attribute(.string("ann@x"))))).first)
        context.delete(ann)
        try context.save()
        #expect(try Self.emails(test) == ["ann@x"], "Cid holds the key now")
    }

    @Test("Compound constraints collide only on every value; a nil value is not constrained", arguments: TestStoreKind.allCases)
    func compound(kind: TestStoreKind) throws {
        let (test, _) = try Self.seeded(kind)
        let context = test.context()
        try context.make("Team", ["org": "acme", "code": Int64(2)])
        try context.make("Team", ["org": "other", "code": Int64(1)])
        try context.make("Team", ["org": "acme"])
        try context.make("Team", ["org": "acme"])
        try context.make("Person", ["name": "no email"])
        try context.make("Person", ["name": "no email either"])
        try context.save()
        try context.make("Team", ["org": "acme", "code": Int64(1)])
        let conflicts = Self.conflicts { try context.save() }
        #expect(conflicts.map(\.constraint.description) == ["Team(org, code)"])
        #expect(conflicts.first?.values == ["org = \"acme\"", "code = 1"])
    }

    /// Saves a newcomer duplicating Ann under `policy`: name Annie, no age, in team T2, with pet Tom,
    /// held by a card; returns what the store holds then.
    static func merge(_ policy: MergePolicy, kind: TestStoreKind) throws -> (person: ManagedObject, annURI: String, people: Int, reader: ManagedObjectContext) {
        let (test, annURI) = try seeded(kind)
        let context = test.context()
        context.mergePolicy = policy
        let team = try context.make("Team", ["org": "acme", "code": Int64(2)])
        let newcomer = try context.make("Person", ["email": "ann@x", "name": "Annie", "team": team])
        try context.make("Pet", ["name": "Tom", "owner": newcomer])
        try context.make("Card", ["holder": newcomer])
        try context.save()
        let reader = test.context()
        let people = try reader.fetch(FetchRequest(entityName: "Person"))
        let person = try #require(people.first)
        let card = try #require(try reader.fetch(FetchRequest(entityName: "Card")).first)
        #expect(try (card.value(forKey: "holder") as? ManagedObject) === person, "\(policy): the one-way reference follows the survivor")
        return (person, annURI, people.count, reader)
    }

    @Test("Object trump: an upsert — the newcomer's values win where it set them, members are united", arguments: TestStoreKind.allCases)
    func objectTrump(kind: TestStoreKind) throws {
        let (person, annURI, count, reader) = try Self.merge(.mergeByPropertyObjectTrump, kind: kind)
        #expect(count == 1 && reader.hasChanges == false)
        #expect(person.objectID.uriString == annURI, "the stored object keeps its identity")
        #expect(try person.value(forKey: "name") as? String == "Annie")
        #expect(try person.value(forKey: "age") as? Int64 == 30, "a value the newcomer left nil does not erase the stored one")
        #expect(try (person.value(forKey: "team") as? ManagedObject)?.value(forKey: "code") as? Int64 == 2)
        #expect(try Set(person.objects("pets").map { try $0.value(forKey: "name") as? String }) == ["Rex", "Tom"])
    }

    @Test("Store trump: the stored values stay; the newcomer only fills what is missing", arguments: TestStoreKind.allCases)
    func storeTrump(kind: TestStoreKind) throws {
        let (person, annURI, count, reader) = try Self.merge(.mergeByPropertyStoreTrump, kind: kind)
        #expect(count == 1 && person.objectID.uriString == annURI && !reader.hasChanges)
        #expect(try person.value(forKey: "name") as? String == "Ann")
        #expect(try (person.value(forKey: "team") as? ManagedObject)?.value(forKey: "code") as? Int64 == 1)
        #expect(try Set(person.objects("pets").map { try $0.value(forKey: "name") as? String }) == ["Rex", "Tom"])
    }

    @Test("Overwrite: the newcomer's whole state replaces the stored one, nils and members included", arguments: TestStoreKind.allCases)
    func overwrite(kind: TestStoreKind) throws {
        let (person, annURI, count, reader) = try Self.merge(.overwrite, kind: kind)
        #expect(count == 1 && person.objectID.uriString == annURI && !reader.hasChanges)
        #expect(try person.value(forKey: "name") as? String == "Annie")
        #expect(try person.value(forKey: "age") == nil)
        #expect(try person.objects("pets").map { try $0.value(forKey: "name") as? String } == ["Tom"])
    }

    @Test("Rollback: the newcomer is dropped (references to it go to the stored object); an update into a taken key is undone",
          arguments: TestStoreKind.allCases)
    func rollback(kind: TestStoreKind) throws {
        let (person, annURI, count, reader) = try Self.merge(.rollback, kind: kind)
        #expect(count == 1 && person.objectID.uriString == annURI && !reader.hasChanges)
        #expect(try person.value(forKey: "name") as? String == "Ann")
        #expect(try (person.value(forKey: "team") as? ManagedObject)?.value(forKey: "code") as? Int64 == 1)
        #expect(try Set(person.objects("pets").map { try $0.value(forKey: "name") as? String }) == ["Rex", "Tom"])

        let (test, _) = try Self.seeded(kind)
        let context = test.context()
        context.mergePolicy = .rollback
        let bob = try context.make("Person", ["email": "bob@x", "name": "Bob"])
        try context.save()
        try bob.setValue("ann@x", forKey: "email")
        try bob.setValue("Robert", forKey: "name")
        try context.save()
        #expect(try Self.emails(test) == ["ann@x", "bob@x"])
        #expect(try bob.value(forKey: "name") as? String == "Bob")
    }

    @Test("Two duplicates in one save under object trump end as one object, the first inserted", arguments: TestStoreKind.allCases)
    func duplicatesInOneSave(kind: TestStoreKind) throws {
        let test = try TestContainer(model: Self.model, kind: kind)
        let context = test.context()
        context.mergePolicy = .mergeByPropertyObjectTrump
        let first = try context.make("Person", ["email": "dee@x", "name": "Dee", "age": Int64(5)])
        try context.make("Person", ["email": "dee@x", "name": "Deirdre"])
        try context.save()
        let reader = test.context()
        let people = try reader.fetch(FetchRequest(entityName: "Person"))
        #expect(people.count == 1)
        #expect(people.first?.objectID == first.objectID)
        #expect(try people.first?.value(forKey: "name") as? String == "Deirdre")
        #expect(try people.first?.value(forKey: "age") as? Int64 == 5)
    }

    @Test("A model refuses constraints on to-many relationships and unknown properties")
    func modelChecks() {
        #expect(throws: ModelError.self) {
            try ManagedObjectModel {
                Entity("A", uniquenessConstraints: [["bs"]]) { Relationship("bs", to: "B", inverse: "a", toMany: true) }
                Entity("B") { Relationship("a", to: "A", inverse: "bs") }
            }
        }
        #expect(throws: ModelError.self) { try ManagedObjectModel { Entity("A", uniquenessConstraints: [["nope"]]) { Attribute("x", .string) } } }
    }
}
