import Foundation
import FerryModel
import FerryStore
import FerryTestSupport

/// Small models, each exercising one behaviour.
enum TestModels {
    static let validation = try! ManagedObjectModel {
        Entity("Item") {
            Attribute("name", .string, optional: false, minimum: .integer(2), maximum: .integer(5), regularExpression: "[a-z]+")
            Attribute("quantity", .integer32, minimum: .integer(0), maximum: .integer(10))
            Attribute("price", .double, minimum: .double(0.5))
            Attribute("when", .date, minimum: .date(Date(timeIntervalSince1970: 946_684_800)), maximum: .date(Date(timeIntervalSince1970: 1_893_456_000)))
            Attribute("note", .string, transient: true)
            Relationship("owner", to: "Owner", inverse: "items", optional: false)
            Relationship("tags", to: "Tag", inverse: "items", toMany: true, minCount: 1, maxCount: 2)
        }
        Entity("Owner") {
            Relationship("items", to: "Item", inverse: "owner", toMany: true)
            Relationship("pets", to: "Pet", inverse: "owner", toMany: true, optional: false)
        }
        Entity("Pet") { Relationship("owner", to: "Owner", inverse: "pets", optional: false) }
        Entity("Tag") { Relationship("items", to: "Item", inverse: "tags", toMany: true) }
    }

    static let deleteRules = try! ManagedObjectModel {
        // Cascade chain A → B → C, and a cascade cycle X ⇄ Y.
        Entity("A") { Relationship("bs", to: "B", inverse: "a", toMany: true, deleteRule: .cascade) }
        Entity("B") {
            Relationship("a", to: "A", inverse: "bs")
            Relationship("cs", to: "C", inverse: "b", toMany: true, deleteRule: .cascade)
        }
        Entity("C") { Relationship("b", to: "B", inverse: "cs") }
        Entity("X") { Relationship("ys", to: "Y", inverse: "xs", toMany: true, deleteRule: .cascade) }
        Entity("Y") { Relationship("xs", to: "X", inverse: "ys", toMany: true, deleteRule: .cascade) }
        // Deny and No Action.
        Entity("Department") {
            Attribute("name", .string)
            Relationship("employees", to: "Employee", inverse: "department", toMany: true, deleteRule: .deny)
        }
        Entity("Employee") {
            Attribute("name", .string)
            Relationship("department", to: "Department", inverse: "employees")
        }
        Entity("Folder") { Relationship("notes", to: "Note", inverse: "folder", toMany: true, deleteRule: .noAction) }
        Entity("Note") { Relationship("folder", to: "Folder", inverse: "notes") }
    }

    static let relationships = try! ManagedObjectModel {
        Entity("Husband") { Attribute("name", .string); Relationship("wife", to: "Wife", inverse: "husband") }
        Entity("Wife") { Attribute("name", .string); Relationship("husband", to: "Husband", inverse: "wife") }
        Entity("Post") {
            Attribute("title", .string)
            Relationship("tags", to: "Tag", inverse: "posts", toMany: true)
        }
        Entity("Tag") {
            Attribute("label", .string)
            Relationship("posts", to: "Post", inverse: "tags", toMany: true)
        }
        Entity("Playlist") {
            Attribute("name", .string)
            Relationship("songs", to: "Song", inverse: "playlist", toMany: true, ordered: true)
            Relationship("tracks", to: "Track", inverse: "playlists", toMany: true, ordered: true)
        }
        Entity("Song") { Attribute("title", .string); Relationship("playlist", to: "Playlist", inverse: "songs") }
        Entity("Track") { Attribute("title", .string); Relationship("playlists", to: "Playlist", inverse: "tracks", toMany: true) }
        Entity("Bookmark") { Attribute("url", .string); Relationship("related", to: "Bookmark", toMany: true) }
    }

    static let inheritance = try! ManagedObjectModel {
        Entity("Party", abstract: true) { Attribute("name", .string) }
        Entity("Person", parent: "Party") { Attribute("age", .integer16, default: .integer(7)); Relationship("employer", to: "Company", inverse: "staff") }
        Entity("Company", parent: "Party") { Relationship("staff", to: "Person", inverse: "employer", toMany: true) }
        Entity("Startup", parent: "Company") { Attribute("funding", .decimal) }
        Entity("Contract") { Relationship("party", to: "Party") }
    }

    static let allTypes = try! ManagedObjectModel {
        Entity("Sample") {
            Attribute("i16", .integer16); Attribute("i32", .integer32); Attribute("i64", .integer64)
            Attribute("decimal", .decimal); Attribute("double", .double); Attribute("float", .float)
            Attribute("string", .string); Attribute("bool", .boolean); Attribute("date", .date)
            Attribute("data", .binaryData); Attribute("uuid", .uuid); Attribute("uri", .uri)
            Attribute("blob", .transformable); Attribute("scratch", .string, transient: true, default: .string("tmp"))
            Attribute("counter", .integer32, default: .integer(7))
        }
    }
}

/// The OrgChart sample's Person, with typed accessors.
typealias Person = OrgChartPerson
