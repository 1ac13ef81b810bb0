import Foundation
import Synchronization
import GRDB
import Testing
import FerryModel
import FerryStore
import FerrySQLite
import FerrySync
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
        let (path, uuid) = try storeWithData(directory)
        let stricter = try ManagedObjectModel {
            Entity("Note") { Attribute("text", .string, optional: false, maximum: .integer(100)); Attribute("stars", .integer16, maximum: .integer(5)) }
            Entity("Tag") { Attribute("name", .string) }
        }
        // Core Data leaves validation out of the version hash: the store is the same version.
        #expect(stricter.versionHash == Self.version1.versionHash)
        let schemaBefore = try withDatabase(path) { db in try String.fetchAll(db, sql: "SELECT sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY name") }
        let store = try SQLiteStore(path: path, model: stricter)
        #expect(store.migration == nil, "a validation-only change migrated: \(String(describing: store.migration?.changes))")
        #expect(store.identifier == uuid)
        let context = try PersistentContainer(store: store).newContext()
        #expect(try context.count(for: FetchRequest(entityName: "Note")) == 1)
        try store.close()
        let schemaAfter = try withDatabase(path) { db in try String.fetchAll(db, sql: "SELECT sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY name") }
        #expect(schemaAfter == schemaBefore, "the schema was rewritten")
    }

    static let incompatible: [(String, ManagedObjectModel, String)] = [
        ("changed type", try! ManagedObjectModel {
            Entity("Note") { Attribute("text", .string, optional: false); Attribute("stars", .string) }
            Entity("Tag") { Attribute("name", .string) }
        },
         "attribute 'stars' changed type from Integer 16 to String"),
        ("new required attribute", try! ManagedObjectModel {
            Entity("Note") { Attribute("text", .string, optional: false); Attribute("stars", .integer16); Attribute("author", .string, optional: false) }
            Entity("Tag") { Attribute("name", .string) }
        }, "new attribute 'author' is required"),
        ("became required", try! ManagedObjectModel {
            Entity("Note") { Attribute("text", .string, optional: false); Attribute("stars", .integer16, optional: false) }
            Entity("Tag") { Attribute("name", .string) }
        },
         "attribute 'stars' became required without a default value"),
        ("two claim one", try! ManagedObjectModel {
            Entity("Note") {
                Attribute("text", .string, optional: false); Attribute("stars", .integer16); Attribute("rating", .integer16, renamedFrom: "stars")
            }
            Entity("Tag") { Attribute("name", .string) }
        }, "two properties claim the old property 'stars'"),
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

/// Core Data's lightweight migration, rule by rule, on a store with data: what each rule keeps,
/// what it rewrites, and that the migrated file opens again unchanged.
@Suite("Lightweight migration rules")
struct LightweightMigrationTests {
    static let version1 = try! ManagedObjectModel {
        Entity("Note") {
            Attribute("text", .string, optional: false)
            Attribute("stars", .integer16)
            Attribute("weight", .integer32)
            Attribute("score", .double)
            Relationship("folder", to: "Folder", inverse: "notes")
            Relationship("tags", to: "Tag", inverse: "notes", toMany: true)
        }
        Entity("Tag") { Attribute("name", .string); Relationship("notes", to: "Note", inverse: "tags", toMany: true) }
        Entity("Folder") { Attribute("name", .string); Relationship("notes", to: "Note", inverse: "folder", toMany: true, deleteRule: .nullify) }
    }

    // Version 2 of each rule's test (LightweightParityTests migrates both stores to each).
    static let renamedAttribute = try! ManagedObjectModel {
        Entity("Note") {
            Attribute("text", .string, optional: false); Attribute("rating", .integer16, renamedFrom: "stars")
            Attribute("weight", .integer32); Attribute("score", .double)
            Relationship("folder", to: "Folder", inverse: "notes"); Relationship("tags", to: "Tag", inverse: "notes", toMany: true)
        }
        Entity("Tag") { Attribute("name", .string); Relationship("notes", to: "Note", inverse: "tags", toMany: true) }
        Entity("Folder") { Attribute("name", .string); Relationship("notes", to: "Note", inverse: "folder", toMany: true) }
    }

    static let renamedEntity = try! ManagedObjectModel {
        Entity("Memo", renamedFrom: "Note") {
            Attribute("text", .string, optional: false); Attribute("stars", .integer16); Attribute("weight", .integer32); Attribute("score", .double)
            Relationship("folder", to: "Folder", inverse: "memos", renamedFrom: "folder")
            Relationship("labels", to: "Tag", inverse: "memos", toMany: true, renamedFrom: "tags")
        }
        Entity("Tag") { Attribute("name", .string); Relationship("memos", to: "Memo", inverse: "labels", toMany: true, renamedFrom: "notes") }
        Entity("Folder") { Attribute("name", .string); Relationship("memos", to: "Memo", inverse: "folder", toMany: true, renamedFrom: "notes") }
    }

    static let removedThings = try! ManagedObjectModel {
        Entity("Note") {
            Attribute("text", .string, optional: false); Attribute("weight", .integer32); Attribute("score", .double)
            Relationship("folder", to: "Folder", inverse: "notes")
        }
        Entity("Folder") { Attribute("name", .string); Relationship("notes", to: "Note", inverse: "folder", toMany: true) }
    }

    static let requiredWithDefaults = try! ManagedObjectModel {
        Entity("Note") {
            Attribute("text", .string, optional: false); Attribute("stars", .integer16, optional: false, default: .integer(1))
            Attribute("weight", .integer32); Attribute("score", .double)
            Attribute("kind", .string, optional: false, default: .string("plain"))
            Relationship("folder", to: "Folder", inverse: "notes"); Relationship("tags", to: "Tag", inverse: "notes", toMany: true)
        }
        Entity("Tag") { Attribute("name", .string); Relationship("notes", to: "Note", inverse: "tags", toMany: true) }
        Entity("Folder") { Attribute("name", .string); Relationship("notes", to: "Note", inverse: "folder", toMany: true) }
    }

    static let changedTypes = try! ManagedObjectModel {
        Entity("Note") {
            Attribute("text", .string, optional: false); Attribute("stars", .integer64); Attribute("weight", .decimal); Attribute("score", .float)
            Relationship("folder", to: "Folder", inverse: "notes"); Relationship("tags", to: "Tag", inverse: "notes", toMany: true)
        }
        Entity("Tag") { Attribute("name", .string); Relationship("notes", to: "Note", inverse: "tags", toMany: true) }
        Entity("Folder") { Attribute("name", .string); Relationship("notes", to: "Note", inverse: "folder", toMany: true) }
    }

    static let renamedAndRemoved = try! ManagedObjectModel {
        Entity("Memo", renamedFrom: "Note") {
            Attribute("text", .string, optional: false); Attribute("rating", .integer16, renamedFrom: "stars"); Attribute("score", .double)
            Relationship("folder", to: "Folder", inverse: "memos", renamedFrom: "folder")
        }
        Entity("Folder") {
            Attribute("name", .string); Attribute("color", .string)
            Relationship("memos", to: "Memo", inverse: "folder", toMany: true, renamedFrom: "notes")
        }
    }

    /// A store of version 1 holding two notes (one with stars, folder and tag; one with nothing optional).
    func store(_ directory: TemporaryDirectory) throws -> String {
        let path = directory.file("rules.sqlite")
        try Self.fill(try SQLiteStore(path: path, model: Self.version1))
        return path
    }

    /// Saves the two notes into a store of version 1.
    static func fill(_ store: any PersistentStore) throws {
        let context = try PersistentContainer(store: store).newContext()
        let folder = try context.make("Folder", ["name": "Inbox"])
        let tag = try context.make("Tag", ["name": "todo"])
        let full = try context.make("Note", ["text": "full", "stars": Int16(3), "weight": Int32(70_000), "score": 2.5])
        try full.setValue(folder, forKey: "folder")
        try full.setValue([tag], forKey: "tags")
        try context.make("Note", ["text": "bare"])
        try context.save()
    }

    /// Opens `path` with `model`, version 1 named as its earlier version (migrating), then again
    /// (no change), and returns a context on the second.
    func migrate(_ path: String, to model: ManagedObjectModel) throws -> ManagedObjectContext {
        _ = try SQLiteStore(path: path, model: model, options: .init(earlierModels: [Self.version1]))
        return try PersistentContainer(store: try SQLiteStore(path: path, model: model)).newContext()
    }

    func note(_ context: ManagedObjectContext, _ text: String, entity: String = "Note") throws -> ManagedObject {
        try #require(try context.fetch(FetchRequest(entityName: entity)).first { try $0.value(forKey: "text") as? String == text })
    }

    func columns(_ path: String, _ table: String) throws -> [String] {
        try DatabaseQueue(path: path).read { db in try db.columns(in: table).map(\.name) }
    }

    @Test("A store keeps every model version it was opened with, readable as the same model")
    func keepsModelVersions() throws {
        let directory = TemporaryDirectory()
        let path = try store(directory)
        let extra = EntityDescription(name: "Extra", attributes: [AttributeDescription(name: "x", type: .string)])
        let version2 = try ManagedObjectModel(entities: Self.version1.entities + [extra])
        _ = try SQLiteStore(path: path, model: version2)
        let store = try SQLiteStore(path: path, model: version2)
        #expect(try store.knownModels() == [Self.version1, version2])
    }

    @Test("The store reports what its open migrated, and nothing when it migrated nothing")
    func report() throws {
        let directory = TemporaryDirectory()
        let path = try store(directory)
        #expect(try SQLiteStore(path: path, model: Self.version1).migration == nil)
        let model = Self.renamedAndRemoved
        let steps = Mutex<[String]>([])
        let migrated = try SQLiteStore(path: path, model: model, options: .init(earlierModels: [Self.version1], migrationProgress: { step, number, total in
            steps.withLock { $0.append("\(number)/\(total) \(step)") }
        }))
        #expect(steps.withLock { $0 }.map { String($0.prefix(3)) } == ["1/5", "2/5", "3/5", "4/5", "5/5"], "\(steps.withLock { $0 })")
        let report = try #require(migrated.migration)
        #expect(report.fromVersionHash == Self.version1.versionHash && report.toVersionHash == model.versionHash)
        #expect(report.changes.sorted() == ["added Folder.color", "removed Memo.tags", "removed Memo.weight", "removed entity Tag",
                                            "renamed Folder.notes to memos",
                                            "renamed Memo.stars to rating", "renamed entity Note to Memo"], "\(report.changes)")
        #expect(report.seconds > 0)
    }

    @Test("An attribute renamed by its Renaming ID keeps its values, in the same column (no row is rewritten)")
    func renameAttribute() throws {
        let directory = TemporaryDirectory()
        let path = try store(directory)
        let model = Self.renamedAttribute
        let context = try migrate(path, to: model)
        #expect(try note(context, "full").value(forKey: "rating") as? Int16 == 3)
        #expect(try context.count(for: FetchRequest(entityName: "Note", format: "rating == 3", model: model)) == 1)
        #expect(try columns(path, "ZNOTE").contains("ZSTARS"), "the column keeps its name")
        // Without the Renaming ID the same change is a removal and an addition: the values are gone.
        let directory2 = TemporaryDirectory()
        let path2 = try store(directory2)
        var plain = model.entities
        plain = plain.map { entity in
            var entity = entity
            entity.ownAttributes = entity.ownAttributes.map { var a = $0; a.renamingIdentifier = nil; return a }
            return entity
        }
        let context2 = try migrate(path2, to: try ManagedObjectModel(entities: plain))
        #expect(try note(context2, "full").value(forKey: "rating") == nil)
    }

    @Test("An entity renamed by its Renaming ID keeps its objects, numbers and links; its URIs name the new entity")
    func renameEntity() throws {
        let directory = TemporaryDirectory()
        let path = try store(directory)
        let model = Self.renamedEntity
        let context = try migrate(path, to: model)
        let full = try note(context, "full", entity: "Memo")
        #expect(full.objectID.uriString.contains("/Memo/p"))
        #expect(try (full.value(forKey: "folder") as? ManagedObject)?.value(forKey: "name") as? String == "Inbox")
        let labels = try #require(full.value(forKey: "labels") as? Set<ManagedObject>)
        #expect(try labels.map { try $0.value(forKey: "name") as? String } == ["todo"])
        let tag = try #require(try context.fetch(FetchRequest(entityName: "Tag")).first)
        #expect((try tag.value(forKey: "memos") as? Set<ManagedObject>)?.count == 1)
        let names = try DatabaseQueue(path: path).read { db in try String.fetchAll(db, sql: "SELECT Z_NAME FROM Z_PRIMARYKEY ORDER BY Z_ENT") }
        #expect(names == ["Folder", "Memo", "Tag"])
        // New objects get the next keys of the entity, not 1 again.
        try context.make("Memo", ["text": "new"])
        try context.save()
        #expect(try note(context, "new", entity: "Memo").objectID.primaryKey == 3)
    }

    @Test("A removed attribute, relationship and entity: values, links and objects are gone, columns and tables dropped, the rest kept")
    func removals() throws {
        let directory = TemporaryDirectory()
        let path = try store(directory)
        let model = Self.removedThings
        let joinTableQuery = "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'Z\\_%' ESCAPE '\\'"
            + " AND name NOT LIKE 'Z_FERRY%' AND name NOT IN ('Z_PRIMARYKEY', 'Z_METADATA', 'Z_MODELCACHE')"
        let joinTables = try DatabaseQueue(path: path).read { db in try String.fetchAll(db, sql: joinTableQuery) }
        #expect(joinTables.count == 1, "the Note–Tag join table: \(joinTables)")
        // Not named as an earlier version, version 1 is a stranger: nothing is removed, the open is refused.
        do {
            _ = try SQLiteStore(path: path, model: model)
            Issue.record("removed entities without knowing the store's model version")
        } catch {
            #expect("\(error)".contains("entity 'Tag' was removed (its objects would be deleted)") && "\(error)".contains("not an earlier version"), "\(error)")
        }
        #expect(try PersistentContainer(store: try SQLiteStore(path: path, model: Self.version1)).newContext().count(for: FetchRequest(entityName: "Tag")) == 1)
        let context = try migrate(path, to: model)
        let full = try note(context, "full")
        #expect(try full.value(forKey: "weight") as? Int32 == 70_000)
        #expect((try full.value(forKey: "folder") as? ManagedObject) != nil)
        #expect(throws: ContextError.self) { try full.value(forKey: "stars") }
        #expect(!(try columns(path, "ZNOTE").contains("ZSTARS")))
        let tables = try DatabaseQueue(path: path).read { db in try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'table'") }
        #expect(!tables.contains("ZTAG") && !tables.contains(joinTables[0]), "\(tables)")
        #expect(try DatabaseQueue(path: path).read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM Z_PRIMARYKEY WHERE Z_NAME = 'Tag'") } == 0)
    }

    @Test("Optional to required with a default, and a new required attribute with a default: stored nils take the default")
    func requiredWithDefault() throws {
        let directory = TemporaryDirectory()
        let path = try store(directory)
        let model = Self.requiredWithDefaults
        let context = try migrate(path, to: model)
        #expect(try note(context, "full").value(forKey: "stars") as? Int16 == 3, "a stored value is kept")
        #expect(try note(context, "bare").value(forKey: "stars") as? Int16 == 1, "a stored nil takes the default")
        #expect(try note(context, "bare").value(forKey: "kind") as? String == "plain")
        #expect(try note(context, "full").value(forKey: "kind") as? String == "plain")
    }

    @Test("Type changes: integers widen in place; an integer becomes Double or Decimal in a new column; narrowing and others are refused")
    func typeChanges() throws {
        let directory = TemporaryDirectory()
        let path = try store(directory)
        let model = Self.changedTypes
        let context = try migrate(path, to: model)
        let full = try note(context, "full")
        #expect(try full.value(forKey: "stars") as? Int64 == 3)
        #expect(try full.value(forKey: "weight") as? Decimal == Decimal(70_000))
        #expect(try full.value(forKey: "score") as? Float == 2.5)
        #expect(try note(context, "bare").value(forKey: "weight") == nil)
        let stored = try DatabaseQueue(path: path).read { db in try String.fetchOne(db, sql: "SELECT typeof(ZWEIGHT1) FROM ZNOTE WHERE ZTEXT = 'full'") }
        #expect(stored == "text", "a Decimal is stored as text, in a column of its own type")
        #expect(!(try columns(path, "ZNOTE").contains("ZWEIGHT")))
        #expect(try context.count(for: FetchRequest(entityName: "Note", format: "weight > 1000", model: model)) == 1)

        for (type, expected) in [(AttributeType.integer16, "a narrower integer"), (.string, "only integer widening")] {
            let narrowed = try ManagedObjectModel(entities: model.entities.map { entity in
                var entity = entity
                entity.ownAttributes = entity.ownAttributes.map { var a = $0; if a.name == "stars" { a.type = type }; return a }
                return entity
            })
            do {
                _ = try SQLiteStore(path: path, model: narrowed)
                Issue.record("opened with stars as \(type.xcodeName)")
            } catch {
                #expect("\(error)".contains(expected), "\(error)")
            }
        }
    }

    @Test("A changed delete rule migrates (nothing stored changes) and takes effect; a changed cardinality is refused, naming it")
    func relationshipChanges() throws {
        let directory = TemporaryDirectory()
        let path = try store(directory)
        let cascade = try ManagedObjectModel {
            Entity("Note") {
                Attribute("text", .string, optional: false); Attribute("stars", .integer16); Attribute("weight", .integer32); Attribute("score", .double)
                Relationship("folder", to: "Folder", inverse: "notes"); Relationship("tags", to: "Tag", inverse: "notes", toMany: true)
            }
            Entity("Tag") { Attribute("name", .string); Relationship("notes", to: "Note", inverse: "tags", toMany: true) }
            Entity("Folder") { Attribute("name", .string); Relationship("notes", to: "Note", inverse: "folder", toMany: true, deleteRule: .cascade) }
        }
        let context = try migrate(path, to: cascade)
        context.delete(try #require(try context.fetch(FetchRequest(entityName: "Folder")).first))
        try context.save()
        #expect(try context.count(for: FetchRequest(entityName: "Note")) == 1, "the folder's note went with it")

        let toOne = try ManagedObjectModel {
            Entity("Note") {
                Attribute("text", .string, optional: false); Attribute("stars", .integer16); Attribute("weight", .integer32); Attribute("score", .double)
                Relationship("folder", to: "Folder", inverse: "notes"); Relationship("tags", to: "Tag", inverse: "notes")
            }
            Entity("Tag") { Attribute("name", .string); Relationship("notes", to: "Note", inverse: "tags", toMany: true) }
            Entity("Folder") { Attribute("name", .string); Relationship("notes", to: "Note", inverse: "folder", toMany: true) }
        }
        do {
            _ = try SQLiteStore(path: path, model: toOne)
            Issue.record("opened with tags made to-one")
        } catch {
            #expect("\(error)".contains("relationship 'tags' changed from to-many to to-one"), "\(error)")
        }
        #expect(try PersistentContainer(store: try SQLiteStore(path: path, model: cascade)).newContext().count(for: FetchRequest(entityName: "Note")) == 1,
                "the refused open left the file as it was")
    }
}

/// Adding derived attributes, or changing what one derives, computes every stored object's value
/// in the migration, as a save would have (issue 22, point 4).
@Suite("Migration computes derived attributes")
struct DerivedMigrationTests {
    static let version1 = LightweightMigrationTests.version1

    static let version2 = try! version(loud: "uppercase:(text)")

    /// Version 1 with derived attributes of every form; `loud` is what `Note.loud` derives.
    static func version(loud: String) throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Note") {
                Attribute("text", .string, optional: false)
                Attribute("stars", .integer16)
                Attribute("weight", .integer32)
                Attribute("score", .double)
                Attribute("loud", .string, derivedFrom: loud)
                Attribute("same", .integer32, derivedFrom: "weight")
                Attribute("folderName", .string, derivedFrom: "canonical:(folder.name)")
                Attribute("touched", .date, derivedFrom: "now()")
                Relationship("folder", to: "Folder", inverse: "notes")
                Relationship("tags", to: "Tag", inverse: "notes", toMany: true)
            }
            Entity("Tag") {
                Attribute("name", .string)
                Attribute("noteCount", .integer16, derivedFrom: "notes.@count")
                Relationship("notes", to: "Note", inverse: "tags", toMany: true)
            }
            Entity("Folder") {
                Attribute("name", .string)
                Attribute("noteCount", .integer64, derivedFrom: "notes.@count")
                Attribute("totalScore", .double, derivedFrom: "notes.@sum.score")
                Attribute("totalStars", .decimal, derivedFrom: "notes.@sum.stars")
                Relationship("notes", to: "Note", inverse: "folder", toMany: true, deleteRule: .nullify)
            }
        }
    }

    /// Version 1 with data: a folder of three notes (two tagged), an empty folder, a note without folder.
    func store(_ directory: TemporaryDirectory) throws -> String {
        let path = directory.file("derived.sqlite")
        try Self.fill(try SQLiteStore(path: path, model: Self.version1))
        return path
    }

    /// Saves the folders, tag and notes into a store of version 1.
    static func fill(_ store: any PersistentStore) throws {
        let context = try PersistentContainer(store: store).newContext()
        let inbox = try context.make("Folder", ["name": "Écritures"])
        _ = try context.make("Folder", ["name": "Empty"])
        let tag = try context.make("Tag", ["name": "todo"])
        for (text, stars, score) in [("one", Int16(1), 0.1), ("two", Int16(2), 0.2), ("three", Int16(4), 0.3)] {
            let note = try context.make("Note", ["text": text, "stars": stars, "weight": Int32(stars) * 10, "score": score, "folder": inbox])
            if text != "three" { try note.setValue([tag], forKey: "tags") }
        }
        _ = try context.make("Note", ["text": "loose"])
        try context.save()
    }

    func objects(_ context: ManagedObjectContext, _ entity: String, by key: String) throws -> [String: ManagedObject] {
        Dictionary(uniqueKeysWithValues: try context.fetch(FetchRequest(entityName: entity)).map { (try $0.value(forKey: key) as? String ?? "", $0) })
    }

    @Test("Adding derived attributes of every form computes them for stored objects, as a save does")
    func addComputes() throws {
        let directory = TemporaryDirectory()
        let path = try store(directory)
        let migrated = try SQLiteStore(path: path, model: Self.version2, options: .init(earlierModels: [Self.version1]))
        #expect(migrated.migration?.changes.contains("derived Folder.totalScore for every object") == true)
        let context = try PersistentContainer(store: migrated).newContext()
        let notes = try objects(context, "Note", by: "text")
        #expect(try notes["two"]?.value(forKey: "loud") as? String == "TWO")
        #expect(try notes["three"]?.value(forKey: "same") as? Int32 == 40)
        #expect(try notes["one"]?.value(forKey: "folderName") as? String == "ecritures")
        #expect(try notes["loose"]?.value(forKey: "folderName") == nil)
        // now() is the time of a save that changed the object: none has been made since it was added.
        #expect(try notes["one"]?.value(forKey: "touched") == nil)
        let folders = try objects(context, "Folder", by: "name")
        #expect(try folders["Écritures"]?.value(forKey: "noteCount") as? Int64 == 3)
        #expect(try folders["Empty"]?.value(forKey: "noteCount") as? Int64 == 0)
        #expect(try folders["Empty"]?.value(forKey: "totalScore") as? Double == 0)
        #expect(try folders["Écritures"]?.value(forKey: "totalStars") as? Decimal == 7)
        let tags = try objects(context, "Tag", by: "name")
        #expect(try tags["todo"]?.value(forKey: "noteCount") as? Int16 == 2)
        // The same bits a save computes (floating-point sums in increasing order): saving a change
        // elsewhere in the folder and back gives the migrated value again.
        let migratedTotal = try folders["Écritures"]?.value(forKey: "totalScore") as? Double
        try notes["loose"]?.setValue(folders["Écritures"], forKey: "folder")
        try context.save()
        try notes["loose"]?.setValue(nil, forKey: "folder")
        try context.save()
        #expect(try folders["Écritures"]?.value(forKey: "totalScore") as? Double == migratedTotal)
    }

    @Test("Changing what an attribute derives recomputes it; an unchanged one is left alone")
    func changedExpression() throws {
        let directory = TemporaryDirectory()
        let path = try store(directory)
        _ = try SQLiteStore(path: path, model: Self.version2, options: .init(earlierModels: [Self.version1]))
        let version3 = try Self.version(loud: "lowercase:(text)")
        let migrated = try SQLiteStore(path: path, model: version3, options: .init(earlierModels: [Self.version2]))
        #expect(migrated.migration?.changes == ["derived Note.loud for every object"])
        let context = try PersistentContainer(store: migrated).newContext()
        let notes = try objects(context, "Note", by: "text")
        #expect(try notes["two"]?.value(forKey: "loud") as? String == "two")
    }
}

/// Every migration rule on both stores: the same content, migrated by `SQLiteStore` on open and
/// by `InMemoryStore.migrated(to:)`, dumps the same; and a change set made with the earlier
/// version by a replica that has not upgraded applies translated on both, with the same result.
@Suite("Migration rules on both stores")
struct MigrationParityTests {
    struct Rule: Sendable {
        let name: String
        let from: ManagedObjectModel
        let to: ManagedObjectModel
        let fill: @Sendable (any PersistentStore) throws -> Void
        /// What a replica still on the earlier version then writes (every note's text edited, a note added, unless told).
        let late: @Sendable (ManagedObjectContext) throws -> Void
        init(_ name: String, _ from: ManagedObjectModel, _ to: ManagedObjectModel, _ fill: @escaping @Sendable (any PersistentStore) throws -> Void,
             late: @escaping @Sendable (ManagedObjectContext) throws -> Void = MigrationParityTests.editNotes) {
            (self.name, self.from, self.to, self.fill, self.late) = (name, from, to, fill, late)
        }
    }

    static func editNotes(_ context: ManagedObjectContext) throws {
        for object in try context.fetch(FetchRequest(entityName: "Note")) {
            try object.setValue("edited \(try object.value(forKey: "text") as? String ?? "")", forKey: "text")
        }
        _ = try context.make("Note", ["text": "late"])
    }

    static let rules: [Rule] = [
        Rule("rename an attribute", LightweightMigrationTests.version1, LightweightMigrationTests.renamedAttribute, LightweightMigrationTests.fill),
        Rule("rename an entity and its relationships",
             LightweightMigrationTests.version1, LightweightMigrationTests.renamedEntity, LightweightMigrationTests.fill),
        Rule("remove an attribute, a relationship and an entity",
             LightweightMigrationTests.version1, LightweightMigrationTests.removedThings, LightweightMigrationTests.fill),
        Rule("required with a default", LightweightMigrationTests.version1, LightweightMigrationTests.requiredWithDefaults, LightweightMigrationTests.fill),
        Rule("widen and convert types", LightweightMigrationTests.version1, LightweightMigrationTests.changedTypes, LightweightMigrationTests.fill),
        Rule("rename, remove and add at once", LightweightMigrationTests.version1, LightweightMigrationTests.renamedAndRemoved, LightweightMigrationTests.fill),
        Rule("add derived attributes", DerivedMigrationTests.version1, DerivedMigrationTests.version2, DerivedMigrationTests.fill),
        Rule("make a to-one to-many", ToManyMigrationTests.version1, ToManyMigrationTests.version2, ToManyMigrationTests.fill,
             late: ToManyMigrationTests.moveCards),
    ]

    func dump(_ store: any PersistentStore) throws -> [String] {
        var lines: [String] = []
        try StoreDump(store: store).write { lines.append($0) }
        return lines
    }

    @Test("The same content migrates to the same content on both stores", arguments: rules.indices)
    func sameResult(rule index: Int) throws {
        let rule = Self.rules[index]
        let directory = TemporaryDirectory()
        let identifier = UUID()
        let path = directory.file("parity.sqlite")
        try rule.fill(try SQLiteStore(path: path, model: rule.from, options: .init(newStoreIdentifier: identifier)))
        let memory = InMemoryStore(model: rule.from, identifier: identifier)
        try rule.fill(memory)
        #expect(try dump(try SQLiteStore(path: path, model: rule.from)) == dump(memory))
        // A replica of the same content that stays on the earlier version, and writes.
        let late = InMemoryStore(model: rule.from)
        _ = try ReplayEngine(store: late).apply(lines: memory.changeSetLines(after: [:], limit: nil))
        let lateContext = try PersistentContainer(store: late).newContext()
        try rule.late(lateContext)
        try lateContext.save()
        let lateLines = try late.changeSetLines(after: memory.historyState().vector, limit: nil)
        #expect(!lateLines.isEmpty)

        let migratedSQLite = try SQLiteStore(path: path, model: rule.to, options: .init(earlierModels: [rule.from]))
        let migratedMemory = try memory.migrated(to: rule.to)
        let migrated = try dump(migratedSQLite)
        #expect(!migrated.isEmpty)
        #expect(try dump(migratedMemory) == migrated, "\(rule.name)")
        #expect(migratedMemory.identifier == identifier && migratedMemory.modelVersionHash == rule.to.versionHash)
        // The earlier version's change sets apply translated on both, alike.
        let reportSQLite = try ReplayEngine(store: migratedSQLite).apply(lines: lateLines)
        let reportMemory = try ReplayEngine(store: migratedMemory).apply(lines: lateLines)
        #expect(reportSQLite.applied == lateLines.count && reportSQLite.waiting == 0 && reportSQLite.quarantined == 0, "\(rule.name): \(reportSQLite)")
        #expect(reportMemory.applied == reportSQLite.applied && reportMemory.waiting == 0 && reportMemory.quarantined == 0, "\(rule.name): \(reportMemory)")
        let afterSQLite = try dump(migratedSQLite)
        #expect(try dump(migratedMemory) == afterSQLite, "\(rule.name)")
        #expect(afterSQLite.contains { $0.contains("edited ") || $0.contains("moved") }, "\(rule.name): the translated edits are in")
    }

    @Test("A change no rule covers is refused by both stores, naming it")
    func refusedAlike() throws {
        let model = try ManagedObjectModel {
            Entity("Note") { Attribute("text", .string, optional: false); Attribute("stars", .string) }
        }
        let memory = InMemoryStore(model: LightweightMigrationTests.version1)
        #expect {
            _ = try memory.migrated(to: model)
        } throws: { error in
            "\(error)".contains("attribute 'stars' changed type from Integer 16 to String")
        }
    }
}

/// A to-one made to-many (Core Data infers it): each object's destination becomes its one member,
/// on both stores; the forms that cannot converge in a fleet are refused, naming why.
@Suite("To-one made to-many")
struct ToManyMigrationTests {
    static let version1 = try! ManagedObjectModel {
        Entity("Card") { Attribute("title", .string); Relationship("deck", to: "Deck", inverse: "cards"); Relationship("tag", to: "Tag") }
        Entity("Deck") { Attribute("name", .string); Relationship("cards", to: "Card", inverse: "deck", toMany: true) }
        Entity("Tag") { Attribute("name", .string) }
    }
    /// Many-to-one → many-to-many (the card's side writes the join table: Card sorts first), and a one-way to-one → to-many.
    static let version2 = try! ManagedObjectModel {
        Entity("Card") {
            Attribute("title", .string)
            Relationship("decks", to: "Deck", inverse: "cards", toMany: true, renamedFrom: "deck")
            Relationship("tags", to: "Tag", toMany: true, renamedFrom: "tag")
        }
        Entity("Deck") { Attribute("name", .string); Relationship("cards", to: "Card", inverse: "decks", toMany: true) }
        Entity("Tag") { Attribute("name", .string) }
    }

    /// Two decks, a tag, three cards: one in deck A with the tag, one in deck B, one in none.
    static func fill(_ store: any PersistentStore) throws {
        let context = try PersistentContainer(store: store).newContext()
        let a = try context.make("Deck", ["name": "A"]), b = try context.make("Deck", ["name": "B"])
        let tag = try context.make("Tag", ["name": "t"])
        _ = try context.make("Card", ["title": "one", "deck": a, "tag": tag])
        _ = try context.make("Card", ["title": "two", "deck": b])
        _ = try context.make("Card", ["title": "three"])
        try context.save()
    }

    /// (On version 1) card one moves to deck B and loses its tag; a card is added to deck A.
    static func moveCards(_ context: ManagedObjectContext) throws {
        let decks = try Dictionary(uniqueKeysWithValues: context.fetch(FetchRequest(entityName: "Deck")).map {
            (try $0.value(forKey: "name") as? String ?? "", $0)
        })
        let one = try #require(try context.fetch(FetchRequest(entityName: "Card")).first { try $0.value(forKey: "title") as? String == "one" })
        try one.setValue(decks["B"], forKey: "deck")
        try one.setValue(nil, forKey: "tag")
        _ = try context.make("Card", ["title": "moved in", "deck": decks["A"] as Any])
    }

    @Test("Each object's destination becomes its one member; the foreign key column goes")
    func converts() throws {
        let directory = TemporaryDirectory()
        let path = directory.file("cards.sqlite")
        try Self.fill(try SQLiteStore(path: path, model: Self.version1))
        let store = try SQLiteStore(path: path, model: Self.version2, options: .init(earlierModels: [Self.version1]))
        #expect(store.migration?.changes.contains("made Card.decks to-many") == true, "\(store.migration?.changes ?? [])")
        let context = try PersistentContainer(store: store).newContext()
        let cards = try Dictionary(uniqueKeysWithValues: context.fetch(FetchRequest(entityName: "Card")).map {
            (try $0.value(forKey: "title") as? String ?? "", $0)
        })
        func names(_ card: String, _ key: String) throws -> [String] {
            try (try #require(cards[card]).value(forKey: key) as? Set<ManagedObject> ?? []).map { try $0.value(forKey: "name") as? String ?? "" }.sorted()
        }
        #expect(try names("one", "decks") == ["A"] && names("one", "tags") == ["t"])
        #expect(try names("two", "decks") == ["B"] && names("two", "tags") == [])
        #expect(try names("three", "decks") == [])
        let deckA = try #require(try context.fetch(FetchRequest(entityName: "Deck")).first { try $0.value(forKey: "name") as? String == "A" })
        #expect((try deckA.value(forKey: "cards") as? Set<ManagedObject>)?.count == 1, "the inverse reads the join table")
        let columns = try DatabaseQueue(path: path).read { db in try db.columns(in: "ZCARD").map(\.name) }
        #expect(!columns.contains("ZDECK") && !columns.contains("ZTAG"), "\(columns)")
        // A card may now be in two decks.
        let deckB = try #require(try context.fetch(FetchRequest(entityName: "Deck")).first { try $0.value(forKey: "name") as? String == "B" })
        try #require(cards["one"]).mutableSetValue(forKey: "decks").insert(deckB)
        try context.save()
        #expect(try names("one", "decks") == ["A", "B"])
    }

    static let refusedPairs: [(name: String, from: ManagedObjectModel, to: ManagedObjectModel, message: String)] = [
        ("one-to-one", try! ManagedObjectModel {
            Entity("Card") { Relationship("deck", to: "Deck", inverse: "card") }
            Entity("Deck") { Relationship("card", to: "Card", inverse: "deck") }
        }, try! ManagedObjectModel {
            Entity("Card") { Relationship("decks", to: "Deck", inverse: "card", toMany: true, renamedFrom: "deck") }
            Entity("Deck") { Relationship("card", to: "Card", inverse: "decks") }
        }, "from one-to-one"),
        ("ordered", try! ManagedObjectModel {
            Entity("Card") { Relationship("tag", to: "Tag") }
            Entity("Tag") { Attribute("name", .string) }
        }, try! ManagedObjectModel {
            Entity("Card") { Relationship("tags", to: "Tag", toMany: true, ordered: true, renamedFrom: "tag") }
            Entity("Tag") { Attribute("name", .string) }
        }, "to an ordered to-many"),
        ("the other side writes the join table", try! ManagedObjectModel {
            Entity("Card") { Relationship("fans", to: "Deck", inverse: "favorite", toMany: true) }
            Entity("Deck") { Relationship("favorite", to: "Card", inverse: "fans") }
        }, try! ManagedObjectModel {
            Entity("Card") { Relationship("fans", to: "Deck", inverse: "favorites", toMany: true) }
            Entity("Deck") { Relationship("favorites", to: "Card", inverse: "fans", toMany: true, renamedFrom: "favorite") }
        }, "whose join table the other side writes"),
    ]

    @Test("Forms a fleet could not converge through are refused, naming why", arguments: refusedPairs.indices)
    func refused(index: Int) throws {
        let pair = Self.refusedPairs[index]
        let migration = LightweightMigration(from: pair.from, to: pair.to)
        #expect(migration.problems.contains { $0.contains(pair.message) }, "\(pair.name): \(migration.problems)")
        #expect(migration.toManyConversions.isEmpty)
    }
}
