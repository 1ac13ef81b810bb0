import Foundation
import Testing
import FerryModel
import FerryStore
import FerryTestSupport

/// Saves over another writer's changes, resolved by the merge policy (issue 25, point 3).
@Suite("Merge policies: saving over another writer's changes")
struct MergePolicyConflictTests {
    /// A person saved with name, id and manager; this context changed `name` and `id`
    /// while another context changed `name` and the manager and saved.
    struct Scene {
        let test: TestContainer
        let mine: ManagedObjectContext
        let person: ManagedObject
        let theirBoss: ObjectID

        init(kind: TestStoreKind, policy: MergePolicy) throws {
            test = try TestContainer(model: try SampleModels.load("OrgChart"), kind: kind)
            let setup = test.context()
            let saved = try setup.make("Person", ["name": "Ann", "id": Int64(1)])
            let boss = try setup.make("Person", ["name": "Boss"])
            try setup.save()
            mine = test.context()
            mine.mergePolicy = policy
            person = try mine.existingObject(with: saved.objectID)
            let theirs = test.context()
            let copy = try theirs.existingObject(with: saved.objectID)
            try copy.setValue("Anna", forKey: "name")
            try copy.setValue(try theirs.existingObject(with: boss.objectID), forKey: "manager")
            try theirs.save()
            theirBoss = boss.objectID
            try person.setValue("Annie", forKey: "name")
            try person.setValue(Int64(2), forKey: "id")
        }

        /// The person as stored: name, id, manager's name.
        func stored() throws -> (String?, Int64?, String?) {
            let reader = test.context()
            let object = try reader.existingObject(with: person.objectID)
            let manager = try object.value(forKey: "manager") as? ManagedObject
            return (try object.string("name"), try object.value(forKey: "id") as? Int64, try manager?.string("name"))
        }
    }

    @Test("error: the save fails with the conflict, its three snapshots and versions", arguments: TestStoreKind.allCases)
    func errorPolicy(kind: TestStoreKind) throws {
        let scene = try Scene(kind: kind, policy: .error)
        let error = try #require(throws: SaveError.self) { try scene.mine.save() }
        guard case .mergeConflict(let conflicts) = error, let conflict = conflicts.first else { Issue.record("\(error)"); return }
        #expect(error.code == 133020)
        #expect(conflict.objectID == scene.person.objectID && conflict.oldVersion == 1 && conflict.newVersion == 2)
        #expect(conflict.objectSnapshot["name"] == .attribute(.string("Annie")) && conflict.objectSnapshot["id"] == .attribute(.integer(2)))
        #expect(conflict.cachedSnapshot["name"] == .attribute(.string("Ann")) && conflict.cachedSnapshot["manager"] == .null)
        #expect(conflict.persistedSnapshot?["name"] == .attribute(.string("Anna")))
        #expect(conflict.persistedSnapshot?["manager"] == .object(scene.theirBoss.uriString))
        #expect(conflict.changedInStore == ["name", "manager"])
        #expect(try scene.stored() == ("Anna", 1, "Boss"), "nothing written")
        #expect(scene.mine.hasChanges, "the changes stay for the caller to resolve")
    }

    @Test("object trump: this context's changed properties win, the other writer's others stay", arguments: TestStoreKind.allCases)
    func objectTrump(kind: TestStoreKind) throws {
        let scene = try Scene(kind: kind, policy: .mergeByPropertyObjectTrump)
        try scene.mine.save()
        #expect(try scene.stored() == ("Annie", 2, "Boss"))
        #expect(scene.mine.lastResolvedConflicts.map(\.objectID) == [scene.person.objectID])
        #expect(!scene.mine.hasChanges)
    }

    @Test("store trump: a property both changed keeps the store's value", arguments: TestStoreKind.allCases)
    func storeTrump(kind: TestStoreKind) throws {
        let scene = try Scene(kind: kind, policy: .mergeByPropertyStoreTrump)
        try scene.mine.save()
        #expect(try scene.stored() == ("Anna", 2, "Boss"))
        #expect(try scene.person.string("name") == "Anna", "the object holds what was saved")
    }

    @Test("overwrite: the object's whole state is written, the other writer's manager undone", arguments: TestStoreKind.allCases)
    func overwrite(kind: TestStoreKind) throws {
        let scene = try Scene(kind: kind, policy: .overwrite)
        try scene.mine.save()
        #expect(try scene.stored() == ("Annie", 2, nil))
    }

    @Test("rollback: this context's changes are dropped for the store's", arguments: TestStoreKind.allCases)
    func rollback(kind: TestStoreKind) throws {
        let scene = try Scene(kind: kind, policy: .rollback)
        try scene.mine.save()
        #expect(try scene.stored() == ("Anna", 1, "Boss"))
        #expect(try scene.person.string("name") == "Anna")
        #expect(!scene.person.isUpdated)
    }

    @Test("An object another writer deleted stays deleted under every policy but error", arguments: TestStoreKind.allCases)
    func deletedElsewhere(kind: TestStoreKind) throws {
        for policy in MergePolicy.allCases where policy != .error {
            let test = try TestContainer(model: try SampleModels.load("OrgChart"), kind: kind)
            let setup = test.context()
            let saved = try setup.make("Person", ["name": "Cy"])
            let other = try setup.make("Person", ["name": "Di"])
            try setup.save()
            let mine = test.context()
            mine.mergePolicy = policy
            let person = try mine.existingObject(with: saved.objectID)
            let theirs = test.context()
            theirs.delete(try theirs.existingObject(with: saved.objectID))
            try theirs.save()
            try person.setValue("Cyrus", forKey: "name")
            try mine.existingObject(with: other.objectID).setValue("Diana", forKey: "name")
            try mine.save()
            let reader = test.context()
            #expect(try reader.count(for: FetchRequest(entityName: "Person")) == 1, "\(policy)")
            #expect(try reader.existingObject(with: other.objectID).string("name") == "Diana", "\(policy): the rest of the save is written")
            #expect(person.managedObjectContext == nil, "\(policy)")
        }
    }

    @Test("A delete over another writer's change goes ahead under object trump and overwrite, and is undone under store trump and rollback",
          arguments: TestStoreKind.allCases)
    func deleteOverChange(kind: TestStoreKind) throws {
        for policy in MergePolicy.allCases where policy != .error {
            let test = try TestContainer(model: try SampleModels.load("OrgChart"), kind: kind)
            let setup = test.context()
            let saved = try setup.make("Person", ["name": "Ed"])
            try setup.save()
            let mine = test.context()
            mine.mergePolicy = policy
            mine.delete(try mine.existingObject(with: saved.objectID))
            let theirs = test.context()
            try theirs.existingObject(with: saved.objectID).setValue("Edward", forKey: "name")
            try theirs.save()
            try mine.save()
            let reader = test.context()
            let remaining = try reader.fetch(FetchRequest(entityName: "Person")).map { try $0.string("name") }
            switch policy {
            case .mergeByPropertyObjectTrump, .overwrite: #expect(remaining.isEmpty, "\(policy)")
            default: #expect(remaining == ["Edward"], "\(policy)")
            }
        }
    }
}
