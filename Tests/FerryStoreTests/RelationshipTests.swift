import Foundation
import Testing
import FerryModel
import FerryStore
import FerryTestSupport

@Suite("Relationships: inverses kept in step, to-many sets, ordering")
struct RelationshipTests {
    @Test("One-to-many: setting the to-one updates both sides, reassigning moves the object", arguments: TestStoreKind.allCases)
    func oneToMany(kind: TestStoreKind) throws {
        let test = try TestContainer(model: try SampleModels.load("OrgChart"), kind: kind)
        let context = test.context()
        let john = try context.make("Person", ["name": "John"])
        let ann = try context.make("Person", ["name": "Ann"])
        let jane = try context.make("Person", ["name": "Jane", "manager": john])
        #expect(try john.objects("employees") == [jane])
        try jane.setValue(ann, forKey: "manager")
        #expect(try john.objects("employees").isEmpty)
        #expect(try ann.objects("employees") == [jane])
        try ann.mutableSetValue(forKey: "employees").remove(jane)
        #expect(try jane.value(forKey: "manager") == nil)
        try john.mutableSetValue(forKey: "employees").insert(jane)
        #expect(try jane.value(forKey: "manager") as? ManagedObject === john)
        try context.save()
        let reader = test.context()
        let reloaded = try reader.existingObject(with: john.objectID)
        #expect(try reloaded.objects("employees").map { try $0.string("name") } == ["Jane"])
    }

    @Test("Many-to-many: both sides stay in step and persist through the join table", arguments: TestStoreKind.allCases)
    func manyToMany(kind: TestStoreKind) throws {
        let test = try TestContainer(model: TestModels.relationships, kind: kind)
        let context = test.context()
        let post = try context.make("Post", ["title": "Hello"])
        let swift = try context.make("Tag", ["label": "swift"])
        let linux = try context.make("Tag", ["label": "linux"])
        let tags = try post.mutableSetValue(forKey: "tags")
        try tags.insert(contentsOf: [swift, linux])
        #expect(try swift.objects("posts") == [post])
        #expect(tags.count == 2)
        try context.save()
        try swift.mutableSetValue(forKey: "posts").remove(post)
        #expect(try post.objects("tags") == [linux])
        try context.save()
        let reader = test.context()
        let reloadedPost = try reader.existingObject(with: post.objectID)
        #expect(try reloadedPost.objects("tags").map { try $0.string("label") } == ["linux"])
        let reloadedLinux = try reader.existingObject(with: linux.objectID)
        #expect(try reloadedLinux.objects("posts").map(\.objectID) == [post.objectID])
        #expect(try reader.existingObject(with: swift.objectID).objects("posts").isEmpty)
    }

    @Test("One-to-one: linking a partner unlinks its previous one", arguments: TestStoreKind.allCases)
    func oneToOne(kind: TestStoreKind) throws {
        let test = try TestContainer(model: TestModels.relationships, kind: kind)
        let context = test.context()
        let bob = try context.make("Husband", ["name": "Bob"])
        let tom = try context.make("Husband", ["name": "Tom"])
        let alice = try context.make("Wife", ["name": "Alice", "husband": bob])
        #expect(try bob.value(forKey: "wife") as? ManagedObject === alice)
        try tom.setValue(alice, forKey: "wife")
        #expect(try alice.value(forKey: "husband") as? ManagedObject === tom)
        #expect(try bob.value(forKey: "wife") == nil)
        try context.save()
        let reader = test.context()
        #expect(try reader.existingObject(with: bob.objectID).value(forKey: "wife") == nil)
        #expect(try (reader.existingObject(with: alice.objectID).value(forKey: "husband") as? ManagedObject)?.string("name") == "Tom")
    }

    @Test("Ordered to-many keeps its order across saves, one-to-many and many-to-many", arguments: TestStoreKind.allCases)
    func ordered(kind: TestStoreKind) throws {
        let test = try TestContainer(model: TestModels.relationships, kind: kind)
        let context = test.context()
        let playlist = try context.make("Playlist", ["name": "Mix"])
        let songs = try ["c", "a", "b"].map { try context.make("Song", ["title": $0]) }
        let tracks = try ["z", "x", "y"].map { try context.make("Track", ["title": $0]) }
        try playlist.setValue(songs, forKey: "songs")
        try playlist.setValue(tracks, forKey: "tracks")
        try context.save()
        let reader = test.context()
        let reloaded = try reader.existingObject(with: playlist.objectID)
        #expect(try (reloaded.value(forKey: "songs") as? [ManagedObject])?.map { try $0.string("title") } == ["c", "a", "b"])
        #expect(try (reloaded.value(forKey: "tracks") as? [ManagedObject])?.map { try $0.string("title") } == ["z", "x", "y"])
        // Move the last song to the front.
        try playlist.mutableSetValue(forKey: "songs").insert(songs[2], at: 0)
        try context.save()
        let again = test.context()
        #expect(try (again.existingObject(with: playlist.objectID).value(forKey: "songs") as? [ManagedObject])?.map { try $0.string("title") }
                == ["b", "c", "a"])
    }

    @Test("A one-way to-many (no inverse) is stored and read back", arguments: TestStoreKind.allCases)
    func oneWayToMany(kind: TestStoreKind) throws {
        let test = try TestContainer(model: TestModels.relationships, kind: kind)
        let context = test.context()
        let home = try context.make("Bookmark", ["url": "home"])
        let a = try context.make("Bookmark", ["url": "a"])
        let b = try context.make("Bookmark", ["url": "b"])
        try home.setValue([a, b], forKey: "related")
        try context.save()
        let reader = test.context()
        #expect(try reader.existingObject(with: home.objectID).objects("related").compactMap { try $0.string("url") }.sorted() == ["a", "b"])
        #expect(try reader.existingObject(with: a.objectID).objects("related").isEmpty)
    }

    @Test("A to-many of a fetched object loads lazily from the store", arguments: TestStoreKind.allCases)
    func lazyToMany(kind: TestStoreKind) throws {
        let test = try TestContainer(model: try SampleModels.load("OrgChart"), kind: kind)
        let context = test.context()
        let boss = try context.make("Person", ["name": "Boss"])
        for index in 0..<50 { try context.make("Person", ["name": "E\(index)", "manager": boss]) }
        try context.save()
        let reader = test.context()
        let reloaded = try reader.existingObject(with: boss.objectID)
        let employees = try reloaded.mutableSetValue(forKey: "employees")
        #expect(employees.count == 50)
        let extra = try reader.make("Person", ["name": "New"])
        try employees.insert(extra)
        #expect(employees.count == 51)
        #expect(employees.contains(extra))
        try reader.save()
        #expect(try test.context().count(for: FetchRequest(entityName: "Person", predicate: .equal("manager", .object(boss.objectID)))) == 51)
    }
}
