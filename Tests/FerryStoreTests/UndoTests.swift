import Foundation
import Testing
import FerryModel
import FerryStore
import FerryTestSupport

/// Undo and redo per context (Core Data's `undoManager`): groups by event or explicit, a levels
/// limit, relationships with their inverses, inserts and deletes with their delete rules.
@Suite("Undo and redo")
struct UndoTests {
    static let model = ChildContextTests.model

    func context(_ kind: TestStoreKind, levels: Int = 0) throws -> (TestContainer, ManagedObjectContext) {
        let test = try TestContainer(model: Self.model, kind: kind)
        let context = test.context()
        context.undoManager = ContextUndoManager(levelsOfUndo: levels)
        return (test, context)
    }

    @Test("Each event is a group: undo reverts the last, redo applies it again", arguments: TestStoreKind.allCases)
    func groupsByEvent(kind: TestStoreKind) throws {
        let (test, context) = try context(kind)
        defer { withExtendedLifetime(test) {} }  // (it owns the store's folder)
        let ann = try context.make("Member", ["name": "Ann"])
        try context.save()  // a save ends what can be undone
        #expect(context.undoManager?.canUndo == false)
        try ann.setValue("Anna", forKey: "name")
        try ann.setValue(Int32(3), forKey: "age")
        try context.processPendingChanges()
        try ann.setValue("Annette", forKey: "name")
        try context.processPendingChanges()
        context.undo()
        #expect(try ann.string("name") == "Anna")
        context.undo()
        #expect(try ann.string("name") == "Ann")
        #expect(try ann.value(forKey: "age") == nil)
        #expect(!context.hasChanges, "back at the saved values, nothing is pending")
        #expect(context.undoManager?.canUndo == false)
        context.redo()
        #expect(try ann.string("name") == "Anna")
        #expect(try ann.value(forKey: "age") as? Int32 == 3)
        #expect(context.hasChanges)
        context.redo()
        #expect(try ann.string("name") == "Annette")
        #expect(context.undoManager?.canRedo == false)
        context.undo()
        try ann.setValue("Other", forKey: "name")
        #expect(context.undoManager?.canRedo == false, "a new change forgets what could be redone")
    }

    @Test("An explicit group spans events; nested groups close with the outermost", arguments: TestStoreKind.allCases)
    func explicitGroups(kind: TestStoreKind) throws {
        let (test, context) = try context(kind)
        defer { withExtendedLifetime(test) {} }  // (it owns the store's folder)
        let undo = try #require(context.undoManager)
        let team = try context.make("Team", ["name": "Core"])
        try context.processPendingChanges()
        undo.beginUndoGrouping()
        try team.setValue("A", forKey: "name")
        try context.processPendingChanges()
        undo.beginUndoGrouping()
        try team.setValue("B", forKey: "name")
        undo.endUndoGrouping()
        try context.processPendingChanges()
        try team.setValue("C", forKey: "name")
        undo.endUndoGrouping()
        context.undo()
        #expect(try team.string("name") == "Core", "the whole explicit group in one undo")
        context.undo()
        #expect(context.insertedObjects.isEmpty, "then the insert")
        context.redo()
        #expect(context.insertedObjects.count == 1)
        undo.groupsByEvent = false
        try team.setValue("D", forKey: "name")
        context.undo()
        #expect(context.insertedObjects.isEmpty, "outside an explicit group, without groups by event, nothing was recorded: the undo took the insert back")
        #expect(try team.string("name") == nil, "with the name it was given in its group")
    }

    @Test("Relationships come back on both sides; a delete comes back with what its delete rules changed", arguments: TestStoreKind.allCases)
    func relationshipsAndDeletes(kind: TestStoreKind) throws {
        let (test, context) = try context(kind)
        defer { withExtendedLifetime(test) {} }  // (it owns the store's folder)
        let core = try context.make("Team", ["name": "Core"])
        let web = try context.make("Team", ["name": "Web"])
        let ann = try context.make("Member", ["name": "Ann", "team": core])
        let tag = try context.make("Tag", ["label": "lead"])
        try context.save()
        try ann.setValue(web, forKey: "team")
        try ann.mutableSetValue(forKey: "tags").insert(tag)
        try context.processPendingChanges()
        context.undo()
        #expect(try (ann.value(forKey: "team") as? ManagedObject) === core)
        #expect(try core.mutableSetValue(forKey: "members").contains(ann))
        #expect(try !web.mutableSetValue(forKey: "members").contains(ann))
        #expect(try ann.mutableSetValue(forKey: "tags").isEmpty)
        #expect(try tag.mutableSetValue(forKey: "members").isEmpty)
        #expect(!context.hasChanges)

        context.delete(core)  // cascades to Ann at the event's end
        try context.processPendingChanges()
        #expect(ann.isDeleted && core.isDeleted)
        context.undo()
        #expect(!ann.isDeleted && !core.isDeleted)
        #expect(context.deletedObjects.isEmpty)
        #expect(try core.mutableSetValue(forKey: "members").contains(ann))
        context.redo()
        #expect(ann.isDeleted && core.isDeleted)
        try context.save()
        #expect(try context.count(for: FetchRequest(entityName: "Member")) == 0)
    }

    @Test("Links into an ordered to-many, at a position and at the end, are undone and redone in order", arguments: TestStoreKind.allCases)
    func orderedLinks(kind: TestStoreKind) throws {
        let test = try TestContainer(model: TestModels.relationships, kind: kind)
        let context = test.context()
        context.undoManager = ContextUndoManager()
        let list = try context.make("Playlist", ["name": "mix"])
        let (a, b, c, d) = try (context.make("Song", ["title": "a"]), context.make("Song", ["title": "b"]),
                                context.make("Song", ["title": "c"]), context.make("Song", ["title": "d"]))
        try list.mutableSetValue(forKey: "songs").insert(contentsOf: [a, b])
        try context.save()
        func titles() throws -> [String?] { try (list.value(forKey: "songs") as? [ManagedObject] ?? []).map { try $0.string("title") } }
        try list.mutableSetValue(forKey: "songs").insert(c, at: 0)
        try d.setValue(list, forKey: "playlist")  // the inverse side links d at the end
        try context.processPendingChanges()
        #expect(try titles() == ["c", "a", "b", "d"])
        context.undo()
        #expect(try titles() == ["a", "b"])
        #expect(try c.value(forKey: "playlist") == nil && d.value(forKey: "playlist") == nil)
        #expect(!context.hasChanges, "back at the saved members, nothing is pending")
        context.redo()
        #expect(try titles() == ["c", "a", "b", "d"])
        #expect(try (d.value(forKey: "playlist") as? ManagedObject) === list)
        context.undo()
        #expect(try titles() == ["a", "b"])
    }

    @Test("The levels limit drops the oldest groups", arguments: TestStoreKind.allCases)
    func levels(kind: TestStoreKind) throws {
        let (test, context) = try context(kind, levels: 2)
        defer { withExtendedLifetime(test) {} }  // (it owns the store's folder)
        let team = try context.make("Team", ["name": "0"])
        try context.processPendingChanges()
        for name in ["1", "2", "3"] {
            try team.setValue(name, forKey: "name")
            try context.processPendingChanges()
        }
        context.undo()
        context.undo()
        #expect(try team.string("name") == "1")
        #expect(context.undoManager?.canUndo == false, "two levels kept; the insert and the first rename were dropped")
        context.undo()
        #expect(try team.string("name") == "1")
    }

    @Test("Rollback and reset forget every action; a context without a manager records nothing", arguments: TestStoreKind.allCases)
    func ending(kind: TestStoreKind) throws {
        let (test, context) = try context(kind)
        try context.make("Team", ["name": "Core"])
        context.rollback()
        #expect(context.undoManager?.canUndo == false)
        try context.make("Team", ["name": "Core"])
        context.reset()
        #expect(context.undoManager?.canUndo == false)
        let plain = test.context()
        let team = try plain.make("Team", ["name": "Core"])
        plain.undo()
        #expect(try team.string("name") == "Core")
        #expect(plain.insertedObjects.count == 1)
    }
}
