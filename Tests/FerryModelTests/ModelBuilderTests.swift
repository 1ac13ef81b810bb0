import Testing
import FerryModel

@Suite("Model builder and consistency checks")
struct ModelBuilderTests {
    static func company() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Party", abstract: true) {
                Attribute("name", .string, optional: false)
            }
            Entity("Person", parent: "Party") {
                Attribute("age", .integer16, default: .integer(18), minimum: .integer(0))
                Relationship("employer", to: "Company", inverse: "staff")
            }
            Entity("Company", parent: "Party") {
                Relationship("staff", to: "Person", inverse: "employer", toMany: true, deleteRule: .cascade)
            }
            FetchTemplate("byName", entity: "Party", predicate: "name == $NAME")
        }
    }

    @Test("Inheritance: inherited properties come first, subentities are listed, roots resolved")
    func inheritance() throws {
        let model = try Self.company()
        let person = try #require(model.entity(named: "Person"))
        #expect(person.properties.map(\.name) == ["name", "age", "employer"])
        #expect(person.rootName == "Party")
        #expect(person.ancestry == ["Party", "Person"])
        #expect(person.isKind(of: "Party"))
        #expect(model.entity(named: "Party")?.subentityNames == ["Company", "Person"])
        #expect(model.rootEntities.map(\.name) == ["Party"])
        #expect(person.propertyIndex(named: "name") == model.entity(named: "Company")?.propertyIndex(named: "name"))
        #expect(model.inverse(of: try #require(person.relationship(named: "employer")))?.name == "staff")
        #expect(model.fetchRequestTemplate(named: "byName")?.predicate == "name == $NAME")
    }

    @Test("Defaults: attributes optional, relationships optional with Nullify")
    func defaults() throws {
        let model = try ManagedObjectModel { Entity("A") { Attribute("x", .string); Relationship("b", to: "A") } }
        let a = try #require(model.entity(named: "A"))
        #expect(a.attribute(named: "x")?.isOptional == true)
        #expect(a.relationship(named: "b")?.deleteRule == .nullify)
        #expect(a.relationship(named: "b")?.maxCount == 0)
    }

    static let broken: [(String, @Sendable () throws -> ManagedObjectModel, String)] = [
        ("duplicate entity", { try ManagedObjectModel { Entity("A"); Entity("A") } }, "defined twice"),
        ("unknown parent", { try ManagedObjectModel { Entity("A", parent: "Ghost") } }, "'Ghost', which does not exist"),
        ("inheritance cycle", { try ManagedObjectModel { Entity("A", parent: "B"); Entity("B", parent: "A") } }, "inherits from itself"),
        ("shadowed property", { try ManagedObjectModel { Entity("A") { Attribute("x", .string) }; Entity("B", parent: "A") { Attribute("x", .integer16) } } },
         "two properties named 'x'"),
        ("unknown destination", { try ManagedObjectModel { Entity("A") { Relationship("b", to: "Ghost") } } }, "destination entity 'Ghost' does not exist"),
        ("missing inverse", { try ManagedObjectModel { Entity("A") { Relationship("b", to: "B", inverse: "a") }; Entity("B") } },
         "inverse 'a' is not a relationship of 'B'"),
        ("inverse pointing elsewhere", { try ManagedObjectModel {
            Entity("A") { Relationship("b", to: "B", inverse: "c") }
            Entity("B") { Relationship("c", to: "C") }
            Entity("C")
        } }, "points at 'C'"),
        ("inverses not naming each other", { try ManagedObjectModel {
            Entity("A") { Relationship("b", to: "B", inverse: "a"); Relationship("b2", to: "B", inverse: "a") }
            Entity("B") { Relationship("a", to: "A", inverse: "b") }
        } }, "must name each other"),
        ("bad default", { try ManagedObjectModel { Entity("A") { Attribute("x", .integer16, default: .string("seven")) } } }, "default value seven"),
        ("bad regex", { try ManagedObjectModel { Entity("A") { Attribute("x", .string, regularExpression: "(") } } }, "does not compile"),
        ("template of unknown entity", { try ManagedObjectModel { Entity("A"); FetchTemplate("t", entity: "B") } }, "fetches entity 'B'"),
        ("min above max", { try ManagedObjectModel { Entity("A") { Relationship("b", to: "A", toMany: true, minCount: 3, maxCount: 2) } } },
         "minCount 3 is above maxCount 2"),
        ("ordered to-one", { try ManagedObjectModel { Entity("A") { Relationship("b", to: "A", ordered: true) } } }, "only to-many"),
        ("entity name with SQL in it", { try ManagedObjectModel { Entity("A\"; DROP TABLE x; --") } }, "the name must start with a letter"),
        ("property name with a space", { try ManagedObjectModel { Entity("A") { Attribute("first name", .string) } } }, "property 'first name'"),
        ("property name starting with a digit", { try ManagedObjectModel { Entity("A") { Relationship("2b", to: "A") } } },
         "the name must start with a letter"),
        ("constraint on unknown key", { try ManagedObjectModel { Entity("A", uniquenessConstraints: [["nope"]]) } }, "uniqueness constraint on 'nope'"),
    ]

    @Test("Inconsistent models are refused with an error naming what is wrong", arguments: broken.indices)
    func inconsistent(index: Int) {
        let (name, build, expected) = Self.broken[index]
        do {
            _ = try build()
            Issue.record("\(name): built without error")
        } catch let error as ModelError {
            #expect(error.code == .inconsistentModel, "\(name)")
            #expect(error.description.contains(expected), "\(name): \(error)")
        } catch {
            Issue.record("\(name): unexpected \(error)")
        }
    }

    @Test("The version hash is stable and covers only what changes stored meaning")
    func versionHash() throws {
        func model(_ attribute: Attribute, rule: DeleteRule = .nullify, userInfo: [String: String] = [:]) throws -> ManagedObjectModel {
            try ManagedObjectModel {
                Entity("A", userInfo: userInfo) { attribute; Relationship("b", to: "A", deleteRule: rule) }
            }
        }
        let base = try model(Attribute("x", .string))
        #expect(base.versionHash.count == 64)
        #expect(base.versionHash == (try model(Attribute("x", .string))).versionHash)
        // Not covered: validation rules, defaults, userInfo, indexes.
        #expect(base.versionHash == (try model(Attribute("x", .string, default: .string("d"), minimum: .integer(1), regularExpression: "a+", indexed: true),
                                               userInfo: ["k": "v"])).versionHash)
        // Covered: type, optionality, name, transience, delete rules.
        #expect(base.versionHash != (try model(Attribute("x", .integer32))).versionHash)
        #expect(base.versionHash != (try model(Attribute("x", .string, optional: false))).versionHash)
        #expect(base.versionHash != (try model(Attribute("y", .string))).versionHash)
        #expect(base.versionHash != (try model(Attribute("x", .string, transient: true))).versionHash)
        #expect(base.versionHash != (try model(Attribute("x", .string), rule: .cascade)).versionHash)
        // Pinned, so that an accidental change of the hash function shows up here.
        // SHA-256 of the canonical text (checked with Python hashlib):
        // "entity A\nabstract false\nattribute x String optional=true\nrelationship b -> A inverse=- toMany=false ordered=false optional=true delete=Nullify"
        #expect(base.entityVersionHashes["A"] == "54b1dbc0ab34438b37d554e959451c64ac077a176c8b2575eec80431bbd3a48e")
    }
}
