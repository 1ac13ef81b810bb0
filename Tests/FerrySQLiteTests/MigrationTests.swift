import Foundation
import GRDB
import Testing
import FerryModel
import FerryStore
import FerrySQLite
import FerryTestSupport

@Suite("Opening a store with another model")
struct MigrationTests {
    static let version1 = try! ManagedObjectModel {
        Entity("Note") { Attribute("text", .string, optional: false); Attribute("stars", .integer16) }
        Entity("Tag") { Attribute("name", .string) }
    }

    func storeWithData(_ directory: TemporaryDirectory) throws -> (path: String, uuid: UUID) {
        let path = directory.file("notes.sqlite")
        let store = try SQLiteStore(path: path, model: Self.version1)
        let container = try PersistentContainer(store: store)
        let context = container.newContext()
        try context.make("Note", ["text": "hello", "stars": Int16(3)])
        try context.save()
        return (path, store.identifier)
    }

    @Test("Reopening with the same model keeps the UUID and the data")
    func reopen() throws {
        let directory = TemporaryDirectory()
        let (path, uuid) = try storeWithData(directory)
        let store = try SQLiteStore(path: path, model: Self.version1)
        #expect(store.identifier == uuid)
        let context = try PersistentContainer(store: store).newContext()
        #expect(try context.count(for: FetchRequest(entityName: "Note")) == 1)
    }

    @Test("Additive changes migrate automatically: new entity, optional attribute, relationships")
    func additive() throws {
        let directory = TemporaryDirectory()
        let (path, uuid) = try storeWithData(directory)
        let version2 = try ManagedObjectModel {
            Entity("Note") {
                Attribute("text", .string, optional: false); Attribute("stars", .integer16)
                Attribute("color", .string)
                Relationship("folder", to: "Folder", inverse: "notes")
                Relationship("tags", to: "Tag", inverse: "notes", toMany: true)
            }
            Entity("Tag") { Attribute("name", .string); Relationship("notes", to: "Note", inverse: "tags", toMany: true) }
            Entity("Folder") { Attribute("name", .string); Relationship("notes", to: "Note", inverse: "folder", toMany: true) }
        }
        let store = try SQLiteStore(path: path, model: version2)
        #expect(store.identifier == uuid)
        let context = try PersistentContainer(store: store).newContext()
        let note = try #require(context.fetch(FetchRequest(entityName: "Note")).first)
        #expect(try note.value(forKey: "color") == nil)
        #expect(try note.value(forKey: "stars") as? Int16 == 3)
        let folder = try context.make("Folder", ["name": "Inbox"])
        let tag = try context.make("Tag", ["name": "todo"])
        try note.setValue(folder, forKey: "folder")
        try note.setValue([tag], forKey: "tags")
        try note.setValue("red", forKey: "color")
        try context.save()
        try withDatabase(path) { db in
            #expect(try db.columns(in: "ZNOTE").map(\.name).contains("ZCOLOR"))
            let numbers = try Row.fetchAll(db, sql: "SELECT Z_ENT, Z_NAME FROM Z_PRIMARYKEY ORDER BY Z_ENT").map { "\($0[0] as Int)=\($0[1] as String)" }
            #expect(numbers == ["1=Note", "2=Tag", "3=Folder"], "existing entities keep their numbers; new ones come after")
        }
        // And the migrated file opens again with the new model, without changes.
        let reopened = try SQLiteStore(path: path, model: version2)
        let again = try PersistentContainer(store: reopened).newContext()
        let reloaded = try #require(again.fetch(FetchRequest(entityName: "Note")).first)
        #expect(try (reloaded.value(forKey: "folder") as? ManagedObject)?.value(forKey: "name") as? String == "Inbox")
        #expect(try (reloaded.value(forKey: "tags") as? Set<ManagedObject>)?.count == 1)
    }

    @Test("Validation-only changes need no migration")
    func validationOnly() throws {
        let directory = TemporaryDirectory()
        let (path, _) = try storeWithData(directory)
        let stricter = try ManagedObjectModel {
            Entity("Note") { Attribute("text", .string, optional: false, maximum: .integer(100)); Attribute("stars", .integer16, maximum: .integer(5)) }
            Entity("Tag") { Attribute("name", .string) }
        }
        _ = try SQLiteStore(path: path, model: stricter)
    }

    static let incompatible: [(String, ManagedObjectModel, String)] = [
        ("removed entity", try! ManagedObjectModel { Entity("Note") { Attribute("text", .string, optional: false); Attribute("stars", .integer16) } },
         "entity 'Tag' was removed"),
        ("removed attribute", try! ManagedObjectModel { Entity("Note") { Attribute("text", .string, optional: false) }; Entity("Tag") { Attribute("name", .string) } },
         "attribute 'stars' was removed"),
        ("changed type", try! ManagedObjectModel { Entity("Note") { Attribute("text", .string, optional: false); Attribute("stars", .string) }; Entity("Tag") { Attribute("name", .string) } },
         "attribute 'stars' changed type from Integer 16 to String"),
        ("new required attribute", try! ManagedObjectModel {
            Entity("Note") { Attribute("text", .string, optional: false); Attribute("stars", .integer16); Attribute("author", .string, optional: false) }
            Entity("Tag") { Attribute("name", .string) }
        }, "new attribute 'author' is required"),
        ("became required", try! ManagedObjectModel { Entity("Note") { Attribute("text", .string, optional: false); Attribute("stars", .integer16, optional: false) }; Entity("Tag") { Attribute("name", .string) } },
         "attribute 'stars' became required"),
    ]

    @Test("Anything else fails with an error listing what differs, and the file is untouched", arguments: incompatible.indices)
    func incompatibleChange(index: Int) throws {
        let (name, model, expected) = Self.incompatible[index]
        let directory = TemporaryDirectory()
        let (path, _) = try storeWithData(directory)
        do {
            _ = try SQLiteStore(path: path, model: model)
            Issue.record("\(name): opened")
        } catch {
            guard case .incompatibleModel(let errorPath, let differences) = error else {
                Issue.record("\(name): \(error)")
                return
            }
            #expect(errorPath == path)
            #expect(differences.contains { $0.contains(expected) }, "\(name): \(differences)")
            #expect(error.description.contains("134100"))
        }
        let store = try SQLiteStore(path: path, model: Self.version1)
        #expect(try PersistentContainer(store: store).newContext().count(for: FetchRequest(entityName: "Note")) == 1)
    }
}
