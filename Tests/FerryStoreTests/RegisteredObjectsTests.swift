import Foundation
import Testing
import FerryModel
import FerryStore
import FerryTestSupport

/// Which objects a context keeps (issue 25, point 2): those with pending changes strongly,
/// the others only while the application holds them, unless `retainsRegisteredObjects`.
@Suite("Registered objects: weakly held unless changed")
struct RegisteredObjectsTests {
    /// `count` saved songs in one playlist, and the playlist's ID.
    static func seed(_ test: TestContainer, count: Int) throws -> ObjectID {
        let context = test.context()
        let playlist = try context.make("Playlist", ["name": "mix"])
        for index in 0..<count {
            try context.make("Song", ["title": "song \(index)"])
        }
        try context.save()
        return playlist.objectID
    }

    @Test("Objects nobody holds leave the context; a long-lived context stays small", arguments: TestStoreKind.allCases)
    func unheldObjectsGo(kind: TestStoreKind) throws {
        let test = try TestContainer(model: TestModels.relationships, kind: kind)
        _ = try Self.seed(test, count: 500)
        let context = test.context()
        for _ in 0..<5 {
            let titles = try context.fetch(FetchRequest(entityName: "Song")).map { try $0.value(forKey: "title") as? String }
            #expect(titles.count == 500)
        }
        #expect(context.registeredObjects.isEmpty, "\(context.registeredObjects.count) objects kept after the fetches' results were dropped")
        // What the application holds stays registered, and is the one the context hands out again (uniquing).
        let held = try #require(try context.fetch(FetchRequest(entityName: "Song", fetchLimit: 1)).first)
        _ = try context.fetch(FetchRequest(entityName: "Song"))
        #expect(context.registeredObjects == [held])
        #expect(context.object(with: held.objectID) === held)
    }

    @Test("Changed objects stay until saved even when the application lets go of them", arguments: TestStoreKind.allCases)
    func changedObjectsStay(kind: TestStoreKind) throws {
        let test = try TestContainer(model: TestModels.relationships, kind: kind)
        _ = try Self.seed(test, count: 3)
        let context = test.context()
        do {
            let songs = try context.fetch(FetchRequest(entityName: "Song", sortDescriptors: [FetchSortDescriptor("title")]))
            try songs[0].setValue("renamed", forKey: "title")
            context.delete(songs[1])
            try context.make("Song", ["title": "new"])
        }
        #expect(context.registeredObjects.count == 3, "the updated, deleted and inserted objects are kept")
        #expect(context.hasChanges)
        try context.save()
        #expect(context.registeredObjects.isEmpty, "saved, nothing holds them any more")
        let reader = test.context()
        let titles = try reader.fetch(FetchRequest(entityName: "Song", sortDescriptors: [FetchSortDescriptor("title")]))
            .map { try $0.value(forKey: "title") as? String }
        #expect(titles == ["new", "renamed", "song 2"])
    }

    @Test("An object that went away comes back as a fault through the relationships that name it", arguments: TestStoreKind.allCases)
    func referencesSurvive(kind: TestStoreKind) throws {
        let test = try TestContainer(model: TestModels.relationships, kind: kind)
        let setup = test.context()
        let husband = try setup.make("Husband", ["name": "Ray"])
        let wife = try setup.make("Wife", ["name": "Sue"])
        try husband.setValue(wife, forKey: "wife")
        try setup.save()
        let context = test.context()
        let ray = try context.existingObject(with: husband.objectID)
        // Reading the to-one registers the wife as a fault; nothing holds her, so she goes.
        let wifeID = try #require(try ray.value(forKey: "wife") as? ManagedObject).objectID
        #expect(context.registeredObjects == [ray])
        let again = try #require(try ray.value(forKey: "wife") as? ManagedObject)
        #expect(again.objectID == wifeID)
        #expect(try again.value(forKey: "name") as? String == "Sue")
        // The same object for the same ID, whichever way it is reached.
        #expect(try context.existingObject(with: wifeID) === again)
        #expect(try again.value(forKey: "husband") as? ManagedObject === ray)
        // And the inverse edit through it still keeps both sides in step.
        try again.setValue(nil, forKey: "husband")
        #expect(try ray.value(forKey: "wife") == nil)
    }

    @Test("retainsRegisteredObjects keeps everything until reset", arguments: TestStoreKind.allCases)
    func retainsEverything(kind: TestStoreKind) throws {
        let test = try TestContainer(model: TestModels.relationships, kind: kind)
        _ = try Self.seed(test, count: 50)
        let context = test.context()
        context.retainsRegisteredObjects = true
        _ = try context.fetch(FetchRequest(entityName: "Song"))
        #expect(context.registeredObjects.count == 50)
        context.retainsRegisteredObjects = false
        #expect(context.registeredObjects.isEmpty)
        context.retainsRegisteredObjects = true
        _ = try context.fetch(FetchRequest(entityName: "Song"))
        context.reset()
        #expect(context.registeredObjects.isEmpty)
    }
}
