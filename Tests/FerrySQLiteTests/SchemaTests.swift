import Foundation
import GRDB
import Testing
import FerryModel
import FerryStore
import FerrySQLite
import FerryTestSupport

/// Reads a store file directly, as another tool would.
func withDatabase<T>(_ path: String, _ body: (Database) throws -> T) throws -> T {
    try DatabaseQueue(path: path).read(body)
}

@Suite("SQLite layout in Core Data's spirit")
struct SchemaTests {
    @Test("Tables, columns, metadata and primary keys")
    func layout() throws {
        let test = try TestContainer(model: try SampleModels.load("OrgChart"), kind: .sqlite)
        let path = try #require(test.storePath)
        let context = test.context()
        let john = try context.make("Person", ["name": "John", "id": Int64(7)])
        try context.make("Person", ["name": "Jane", "manager": john])
        try context.make("Organization", ["name": "Acme", "leader": john])
        try context.save()
        try withDatabase(path) { db in
            #expect(try db.tableExists("ZPERSON"))
            #expect(try db.tableExists("ZORGANIZATION"))
            #expect(try db.columns(in: "ZPERSON").map(\.name) == ["Z_PK", "Z_ENT", "Z_OPT", "ZID", "ZMANAGER", "ZNAME"])
            #expect(try db.columns(in: "ZORGANIZATION").map(\.name) == ["Z_PK", "Z_ENT", "Z_OPT", "ZID", "ZLEADER", "ZNAME"])
            let keys = try Row.fetchAll(db, sql: "SELECT Z_ENT, Z_NAME, Z_SUPER, Z_MAX FROM Z_PRIMARYKEY ORDER BY Z_ENT")
            #expect(keys.map { $0[1] as String } == ["Organization", "Person"], "entity numbers follow alphabetical order")
            #expect(keys.map { $0[3] as Int64 } == [1, 2], "Z_MAX is the last primary key handed out")
            let uuid = try String.fetchOne(db, sql: "SELECT Z_UUID FROM Z_METADATA WHERE Z_VERSION = 1")
            #expect(uuid == test.container.store.identifier.uuidString)
            let plist = try #require(try Data.fetchOne(db, sql: "SELECT Z_PLIST FROM Z_METADATA"))
            let metadata = try #require(try JSONSerialization.jsonObject(with: plist) as? [String: Any])
            #expect(metadata["modelVersionHash"] as? String == test.container.model.versionHash)
            #expect(metadata["storeType"] as? String == "SQLite")
            let jane = try #require(try Row.fetchOne(db, sql: "SELECT Z_PK, Z_ENT, Z_OPT, ZMANAGER, ZNAME FROM ZPERSON WHERE ZNAME = 'Jane'"))
            #expect(jane["Z_PK"] as Int64 == 2)
            #expect(jane["Z_ENT"] as Int64 == 2)
            #expect(jane["Z_OPT"] as Int64 == 1)
            #expect(jane["ZMANAGER"] as Int64 == 1, "the to-one is a foreign key to the manager's Z_PK")
            #expect(try String.fetchOne(db, sql: "PRAGMA journal_mode") == "wal")
        }
    }

    @Test("Z_OPT counts updates; dates are seconds since 2001; decimals keep every digit")
    func values() throws {
        let model = try ManagedObjectModel {
            Entity("Event") { Attribute("when", .date); Attribute("amount", .decimal); Attribute("id", .uuid); Attribute("ok", .boolean) }
        }
        let test = try TestContainer(model: model, kind: .sqlite)
        let context = test.context()
        let event = try context.make("Event", ["when": Date(timeIntervalSinceReferenceDate: 100), "amount": Decimal(string: "0.1000000000000000000001")!,
                                              "id": UUID(uuidString: "96EBBFDE-1D44-4B8A-9B57-4A0C5C1B7E00")!, "ok": true])
        try context.save()
        try event.setValue(false, forKey: "ok")
        try context.save()
        try event.setValue(true, forKey: "ok")
        try context.save()
        try withDatabase(try #require(test.storePath)) { db in
            let row = try #require(try Row.fetchOne(db, sql: "SELECT Z_OPT, ZWHEN, ZAMOUNT, ZID, ZOK FROM ZEVENT"))
            #expect(row["Z_OPT"] as Int64 == 3)
            #expect(row["ZWHEN"] as Double == 100)
            #expect(row["ZAMOUNT"] as String == "0.1000000000000000000001")
            #expect((row["ZID"] as Data).count == 16)
            #expect(row["ZOK"] as Int64 == 1)
        }
    }

    @Test("Inheritance: one table per root, Z_ENT per subentity, clashing names get suffixes; join tables for many-to-many")
    func inheritanceAndJoins() throws {
        let model = try ManagedObjectModel {
            Entity("Item", abstract: true) { Attribute("title", .string) }
            Entity("Book", parent: "Item") { Attribute("isbn", .string); Relationship("authors", to: "Author", inverse: "books", toMany: true) }
            Entity("Film", parent: "Item") { Attribute("minutes", .integer32) }
            Entity("Author") { Attribute("name", .string); Relationship("books", to: "Book", inverse: "authors", toMany: true) }
            Entity("Shelf") { Relationship("item", to: "Item") }
        }
        let test = try TestContainer(model: model, kind: .sqlite)
        let context = test.context()
        let book = try context.make("Book", ["title": "Dune", "isbn": "1"])
        try context.make("Film", ["title": "Dune", "minutes": Int32(155)])
        try context.make("Author", ["name": "Herbert", "books": [book]])
        try context.make("Shelf", ["item": book])
        try context.save()
        try withDatabase(try #require(test.storePath)) { db in
            #expect(try !db.tableExists("ZBOOK"), "subentities share their root's table")
            #expect(try db.columns(in: "ZITEM").map(\.name) == ["Z_PK", "Z_ENT", "Z_OPT", "ZISBN", "ZMINUTES", "ZTITLE"])
            let entities = try Row.fetchAll(db, sql: "SELECT Z_ENT, Z_NAME, Z_SUPER FROM Z_PRIMARYKEY ORDER BY Z_ENT")
                .map { "\($0[0] as Int)=\($0[1] as String)<\($0[2] as Int)" }
            #expect(entities == ["1=Author<0", "2=Item<0", "3=Book<2", "4=Film<2", "5=Shelf<0"], "alphabetical, subentities right after their parent")
            #expect(try Int.fetchAll(db, sql: "SELECT Z_ENT FROM ZITEM ORDER BY Z_PK") == [3, 4])
            let shelfColumns = try db.columns(in: "ZSHELF").map(\.name)
            #expect(shelfColumns.contains("Z2_ITEM"), "a to-one to a parent also stores the destination's Z_ENT")
            #expect(try db.tableExists("Z_1BOOKS"))
            #expect(try db.columns(in: "Z_1BOOKS").map(\.name) == ["Z_1AUTHORS", "Z_3BOOKS"])
            #expect(try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM Z_1BOOKS") == 1)
        }
        let reader = test.context()
        let shelf = try #require(reader.fetch(FetchRequest(entityName: "Shelf")).first)
        #expect((try shelf.value(forKey: "item") as? ManagedObject)?.entity.name == "Book")
    }

    @Test("Ordered relationships keep their positions in Z_FOK columns")
    func orderColumns() throws {
        let model = try ManagedObjectModel {
            Entity("List") { Relationship("items", to: "Entry", inverse: "list", toMany: true, ordered: true) }
            Entity("Entry") { Attribute("text", .string); Relationship("list", to: "List", inverse: "items") }
        }
        let test = try TestContainer(model: model, kind: .sqlite)
        let context = test.context()
        let entries = try ["b", "c", "a"].map { try context.make("Entry", ["text": $0]) }
        try context.make("List", ["items": entries])
        try context.save()
        let texts = try withDatabase(try #require(test.storePath)) { db in
            try String.fetchAll(db, sql: "SELECT ZTEXT FROM ZENTRY ORDER BY Z_FOK_LIST")
        }
        #expect(texts == ["b", "c", "a"])
    }

    @Test("Opening a file that is not a Ferry store fails clearly")
    func notAStore() throws {
        let directory = TemporaryDirectory()
        let model = try SampleModels.load("OrgChart")
        let garbage = directory.file("garbage.sqlite")
        try Data("this is not a database, just text padded out to more than a page ".utf8 + Data(count: 4096)).write(to: URL(fileURLWithPath: garbage))
        #expect(throws: StoreError.self) { try SQLiteStore(path: garbage, model: model) }
        let foreign = directory.file("foreign.sqlite")
        try DatabaseQueue(path: foreign).write { try $0.execute(sql: "CREATE TABLE users (id INTEGER)") }
        do {
            _ = try SQLiteStore(path: foreign, model: model)
            Issue.record("opened a foreign database")
        } catch {
            #expect(error.description.contains("not a Ferry store"))
            #expect(error.description.contains("users"))
        }
        #expect(throws: StoreError.self) { try SQLiteStore(path: directory.file("missing/store.sqlite"), model: model) }
        do {
            _ = try SQLiteStore(path: directory.file("absent.sqlite"), model: model, options: .init(createIfMissing: false))
            Issue.record("created a store despite createIfMissing: false")
        } catch {
            #expect(error.description.contains("ferry init"))
        }
    }

    @Test("A store written by a newer Ferry (a higher format version) is refused, not misread, and left as it is")
    func newerFormat() throws {
        let directory = TemporaryDirectory()
        let model = try SampleModels.load("OrgChart")
        let path = directory.file("store.sqlite")
        do { _ = try SQLiteStore(path: path, model: model) }
        try DatabaseQueue(path: path).write { try $0.execute(sql: "UPDATE Z_METADATA SET Z_PLIST = json_set(Z_PLIST, '$.formatVersion', 4)") }
        let contents = {
            try withDatabase(path) { db in
                try Row.fetchAll(db, sql: "SELECT name, sql FROM sqlite_master ORDER BY name") + Row.fetchAll(db, sql: "SELECT * FROM Z_METADATA")
            }
        }
        let before = try contents()
        for readOnly in [false, true] {
            let error = #expect(throws: StoreError.self) { try SQLiteStore(path: path, model: model, options: .init(readOnly: readOnly)) }
            #expect(error.map { "\($0)" }?.contains("format version 4; this Ferry reads up to version 3. Upgrade Ferry.") == true,
                    "\(String(describing: error))")
        }
        #expect(try contents() == before, "schema and metadata untouched")
    }

    @Test("A read-only store reads, writes nothing, never creates or migrates, and says why it cannot be opened")
    func readOnly() throws {
        let directory = TemporaryDirectory()
        let model = try SampleModels.load("OrgChart")
        let path = directory.file("store.sqlite")
        do {
            let store = try SQLiteStore(path: path, model: model)
            let context = try PersistentContainer(store: store).newContext()
            try context.make("Person", ["name": "Ann", "id": Int64(1)])
            try context.save()
        }
        let before = try Data(contentsOf: URL(fileURLWithPath: path))

        let view = try SQLiteStore(path: path, model: model, options: .init(readOnly: true))
        #expect(view.isReadOnly)
        #expect(try view.changeSetLines().count == 1)
        #expect(try view.historyState().vector == [view.identifier: 1])
        let context = try PersistentContainer(store: view).newContext()
        #expect(try context.fetch(FetchRequest(entityName: "Person")).count == 1)
        try context.make("Person", ["name": "Bob", "id": Int64(2)])
        #expect(throws: SaveError.self) { try context.save() }
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before, "a read-only store changed its file")

        // Never creates a file, never migrates to another model.
        do {
            _ = try SQLiteStore(path: directory.file("absent.sqlite"), model: model, options: .init(readOnly: true))
            Issue.record("opened a missing store read-only")
        } catch {
            #expect(error.description.contains("no store file"))
        }
        #expect(!FileManager.default.fileExists(atPath: directory.file("absent.sqlite")))
        let otherModel = try SampleModels.load("Company")
        do {
            _ = try SQLiteStore(path: path, model: otherModel, options: .init(readOnly: true))
            Issue.record("opened a store made with another model read-only")
        } catch {
            #expect(error.description.contains("cannot be migrated"), "\(error)")
        }
    }

    @Test("A store kept shut by its surroundings is 'unavailable'; a wrong path is 'cannot open'")
    func unavailableOrNot() throws {
        let directory = TemporaryDirectory()
        let model = try SampleModels.load("OrgChart")
        do {
            _ = try SQLiteStore(path: directory.path, model: model)
            Issue.record("opened a folder as a store")
        } catch StoreError.cannotOpen(_, let reason, _) {
            #expect(reason.contains("this is a folder"))
        } catch {
            Issue.record("wrong error: \(error)")
        }
        // SQLite's busy timeout runs out while another connection holds the write lock: unavailable, for now.
        let path = directory.file("store.sqlite")
        _ = try SQLiteStore(path: path, model: model)
        let holder = try DatabaseQueue(path: path)
        try holder.writeWithoutTransaction { db in
            try db.execute(sql: "BEGIN EXCLUSIVE")
            defer { try? db.execute(sql: "ROLLBACK") }
            do {
                _ = try SQLiteStore(path: path, model: model, options: .init(busyTimeout: 0.1))
                Issue.record("opened a store another connection holds exclusively")
            } catch StoreError.unavailable(_, let reason, _) {
                #expect(reason.contains("locked"), "\(reason)")
            } catch {
                Issue.record("wrong error: \(error)")
            }
        }
    }
}
