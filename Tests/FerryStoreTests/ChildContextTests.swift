import Foundation
import Testing
import FerryModel
import FerryStore
import FerryTestSupport

/// Child contexts (Core Data's `parent` context): a child sees its parent's unsaved state, its
/// save hands its changes to the parent (not the store), dropping it discards them, and children nest.
@Suite("Child contexts")
struct ChildContextTests {
    static let model = try! ManagedObjectModel {
        Entity("Team") {
            Attribute("name", .string)
            Relationship("members", to: "Member", inverse: "team", toMany: true, deleteRule: .cascade)
        }
        Entity("Member") {
            Attribute("name", .string, optional: false)
            Attribute("age", .integer32, minimum: .integer(0))
            Relationship("team", to: "Team", inverse: "members")
            Relationship("tags", to: "Tag", inverse: "members", toMany: true)
        }
        Entity("Tag") {
            Attribute("label", .string)
            Relationship("members", to: "Member", inverse: "tags", toMany: true)
        }
    }

    /// A store holding team "Core" with member Ann (30), and tag "lead".
    func seeded(_ kind: TestStoreKind) throws -> (TestContainer, ObjectID, ObjectID, ObjectID) {
        let test = try TestContainer(model: Self.model, kind: kind)
        let context = test.context()
        let team = try context.make("Team", ["name": "Core"])
        let ann = try context.make("Member", ["name": "Ann", "age": Int32(30), "team": team])
        let tag = try context.make("Tag", ["label": "lead"])
        try context.save()
        return (test, team.objectID, ann.objectID, tag.objectID)
    }

    /// The names of the store's members, read by a fresh context.
    func storedNames(_ test: TestContainer) throws -> [String] {
        let reader = test.context()  // (held: objects of a context that went away are detached)
        return try reader.all("Member", sortedBy: "name").compactMap { try $0.string("name") }
    }

    @Test("A child sees its parent's unsaved changes, by fetch and by ID", arguments: TestStoreKind.allCases)
    func seesParentState(kind: TestStoreKind) throws {
        let (test, teamID, annID, _) = try seeded(kind)
        let parent = test.context()
        let team = try parent.existingObject(with: teamID)
        let bob = try parent.make("Member", ["name": "Bob", "team": team])
        try parent.existingObject(with: annID).setValue(Int32(31), forKey: "age")
        let child = parent.newChildContext()
        #expect(child.parent === parent)
        let members = try child.fetch(FetchRequest(entityName: "Member", sortDescriptors: [FetchSortDescriptor("name")]))
        #expect(try members.map { try $0.string("name") } == ["Ann", "Bob"])
        #expect(try members[0].value(forKey: "age") as? Int32 == 31, "the parent's unsaved value")
        let bobInChild = child.object(with: bob.objectID)
        #expect(bobInChild !== bob && bobInChild === members[1])
        #expect(try (bobInChild.value(forKey: "team") as? ManagedObject)?.objectID == teamID)
        let childTeam = try child.existingObject(with: teamID)
        #expect(try childTeam.mutableSetValue(forKey: "members").count == 2, "the to-many as the parent has it")
        #expect(try child.count(for: FetchRequest(entityName: "Member")) == 2)
    }

    @Test("A child's save changes the parent, not the store; the parent's save writes it", arguments: TestStoreKind.allCases)
    func saveReachesParentThenStore(kind: TestStoreKind) throws {
        let (test, teamID, annID, tagID) = try seeded(kind)
        let parent = test.context()
        let child = parent.newChildContext()
        let ann = try child.existingObject(with: annID)
        try ann.setValue(Int32(40), forKey: "age")
        let cara = try child.make("Member", ["name": "Cara", "age": Int32(22), "team": try child.existingObject(with: teamID)])
        try cara.mutableSetValue(forKey: "tags").insert(try child.existingObject(with: tagID))
        try child.save()
        #expect(!child.hasChanges)
        #expect(parent.hasChanges)
        #expect(try storedNames(test) == ["Ann"], "nothing reached the store yet")

        let parentAnn = try parent.existingObject(with: annID)
        #expect(try parentAnn.value(forKey: "age") as? Int32 == 40)
        #expect(parent.updatedObjects.contains(parentAnn))
        let inserted = try #require(parent.insertedObjects.first)
        #expect(parent.insertedObjects.count == 1)
        #expect(try inserted.string("name") == "Cara")
        #expect(cara.objectID == inserted.objectID, "the child's object now goes by the parent's ID for it")
        #expect(parent.object(with: cara.objectID) === inserted)
        let parentTeam = try parent.existingObject(with: teamID)
        #expect(try parentTeam.mutableSetValue(forKey: "members").contains(inserted), "the inverse kept in step in the parent")
        #expect(try inserted.mutableSetValue(forKey: "tags").objects.map { $0.objectID } == [tagID])

        try parent.save()
        #expect(try storedNames(test) == ["Ann", "Cara"])
        let fresh = test.context()
        let stored = try #require(try fresh.fetch(FetchRequest(entityName: "Member",
                                                               predicate: .comparison(keyPath: "name", .equal, .attribute(.string("Cara"))))).first)
        #expect(try (stored.value(forKey: "team") as? ManagedObject)?.objectID == teamID)
        #expect(try stored.mutableSetValue(forKey: "tags").objects.map(\.objectID) == [tagID])
        #expect(try fresh.existingObject(with: annID).value(forKey: "age") as? Int32 == 40)
    }

    @Test("A child's delete reaches the parent with its delete rules", arguments: TestStoreKind.allCases)
    func deletes(kind: TestStoreKind) throws {
        let (test, teamID, annID, _) = try seeded(kind)
        let parent = test.context()
        let child = parent.newChildContext()
        child.delete(try child.existingObject(with: teamID))
        try child.save()
        let deleted: Set<ObjectID> = Set(parent.deletedObjects.map(\.objectID))
        #expect(deleted == [teamID, annID], "the team and, by cascade, its member")
        #expect(try storedNames(test) == ["Ann"])
        try parent.save()
        #expect(try storedNames(test).isEmpty)
    }

    @Test("Dropping a child without saving discards its edits", arguments: TestStoreKind.allCases)
    func discard(kind: TestStoreKind) throws {
        let (test, _, annID, _) = try seeded(kind)
        let parent = test.context()
        do {
            let child = parent.newChildContext()
            try child.existingObject(with: annID).setValue("Anna", forKey: "name")
            try child.make("Member", ["name": "Dan"])
            #expect(child.hasChanges)
        }
        #expect(!parent.hasChanges)
        #expect(try parent.existingObject(with: annID).string("name") == "Ann")
        try parent.save()
        #expect(try storedNames(test) == ["Ann"])
    }

    @Test("Nested three levels: each save moves the changes one level up", arguments: TestStoreKind.allCases)
    func nested(kind: TestStoreKind) throws {
        let (test, teamID, _, _) = try seeded(kind)
        let root = test.context()
        let middle = root.newChildContext()
        let leaf = middle.newChildContext()
        let eve = try leaf.make("Member", ["name": "Eve", "team": try leaf.existingObject(with: teamID)])
        try leaf.save()
        #expect(middle.insertedObjects.count == 1 && root.insertedObjects.isEmpty)
        // The leaf's object is found in the middle by its ID, and edited there.
        try middle.object(with: eve.objectID).setValue(Int32(5), forKey: "age")
        try middle.save()
        #expect(root.insertedObjects.count == 1)
        #expect(try storedNames(test) == ["Ann"])
        try root.save()
        #expect(try storedNames(test) == ["Ann", "Eve"])
        let reader = test.context()
        let stored = try reader.fetch(FetchRequest(entityName: "Member", predicate: .comparison(keyPath: "name", .equal, .attribute(.string("Eve")))))
        #expect(try stored.first?.value(forKey: "age") as? Int32 == 5)
    }

    @Test("A child's save is validated, and one naming an object its parent deleted is a conflict that changes nothing", arguments: TestStoreKind.allCases)
    func refusals(kind: TestStoreKind) throws {
        let (test, teamID, annID, _) = try seeded(kind)
        let parent = test.context()
        let child = parent.newChildContext()
        try child.existingObject(with: annID).setValue(Int32(-1), forKey: "age")
        #expect(throws: SaveError.self) { try child.save() }
        #expect(!parent.hasChanges)

        try child.existingObject(with: annID).setValue(Int32(33), forKey: "age")
        try child.existingObject(with: teamID).setValue("Renamed", forKey: "name")
        parent.delete(try parent.existingObject(with: annID))
        // A conflict as with the store, under the child's merge policy (error, the default).
        let failure = #expect(throws: SaveError.self) { try child.save() }
        guard case .mergeConflict(let conflicts)? = failure else {
            Issue.record("not a merge conflict: \(String(describing: failure))")
            return
        }
        let conflicted = conflicts.map { $0.objectID }
        #expect(conflicted == [annID])
        #expect(try parent.existingObject(with: teamID).string("name") == "Core", "nothing of the failed save reached the parent")
        #expect(child.hasChanges, "the child keeps its changes")
    }

    @Test("Other contexts hear of a child's changes when they reach the store, not at the child's save", arguments: TestStoreKind.allCases)
    func events(kind: TestStoreKind) throws {
        let (test, _, annID, _) = try seeded(kind)
        let parent = test.context()
        let child = parent.newChildContext()
        let observer = test.context()
        observer.automaticallyMergesChangesFromStore = true
        let held = try observer.existingObject(with: annID)
        try child.existingObject(with: annID).setValue("Annie", forKey: "name")
        try child.save()
        #expect(try observer.fetch(FetchRequest(entityName: "Member")).count == 1)
        #expect(try held.string("name") == "Ann", "the child's save did not reach the store")
        try parent.save()
        // A save of the same container reaches the observer's inbox at once; its next fetch merges it.
        #expect(try observer.count(for: FetchRequest(entityName: "Member")) == 1)
        #expect(try held.string("name") == "Annie")
    }
}
