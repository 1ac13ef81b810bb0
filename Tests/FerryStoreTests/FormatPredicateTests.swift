import Foundation
import Testing
import FerryModel
import FerryStore
import FerryTestSupport

@Suite("Predicate format strings: binding and fetching")
struct FormatPredicateTests {
    static let model = try! SampleModels.load("OrgChart")

    func bind(_ format: String, _ arguments: [(any Sendable)?] = [], variables: [String: Any?] = [:]) throws(PredicateFormatError) -> FetchPredicate {
        try FetchPredicate(format: format, arguments: arguments.map { $0 as Any? }, variables: variables, entity: "Person", model: Self.model)
    }

    @Test("Format strings bind to the structured predicates")
    func binding() throws {
        #expect(try bind("name == 'John'") == .equal("name", .string("John")))
        #expect(try bind("3 < id") == .comparison(keyPath: "id", .greater, .attribute(.integer(3))))
        #expect(try bind("%K >= %d", ["id", 7]) == .comparison(keyPath: "id", .greaterOrEqual, .attribute(.integer(7))))
        #expect(try bind("manager == nil") == .equal("manager", .null))
        #expect(try bind("name ==[c] %@", ["JOHN"]) == .stringMatch(keyPath: "name", .equal, "JOHN", .caseInsensitive))
        #expect(try bind("name !=[cd] 'x'") == .not(.stringMatch(keyPath: "name", .equal, "x", [.caseInsensitive, .diacriticInsensitive])))
        #expect(try bind("manager.name BEGINSWITH[d] 'jo'") == .stringMatch(keyPath: "manager.name", .beginsWith, "jo", .diacriticInsensitive))
        #expect(try bind("id IN {1, 2}") == .membership(keyPath: "id", [.attribute(.integer(1)), .attribute(.integer(2))]))
        let threeOrNil: [(any Sendable)?] = [3, nil]
        #expect(try bind("id IN %@", [threeOrNil]) == .membership(keyPath: "id", [.attribute(.integer(3)), .null]))
        let between: FetchPredicate = .and([.comparison(keyPath: "id", .greaterOrEqual, .attribute(.integer(2))),
                                            .comparison(keyPath: "id", .lessOrEqual, .attribute(.integer(5)))])
        #expect(try bind("id BETWEEN {2, 5}") == between)
        #expect(try bind("name == $NAME", variables: ["NAME": "Ann"]) == .equal("name", .string("Ann")))
        #expect(try bind("TRUEPREDICATE AND NOT FALSEPREDICATE") == .and([.alwaysTrue, .not(.alwaysFalse)]))
        #expect(try bind("ANY employees.name BEGINSWITH[c] 'j'")
                == .quantified(.any, keyPath: "employees", .stringMatch(keyPath: "name", .beginsWith, "j", .caseInsensitive)))
        #expect(try bind("NONE manager.employees.id > 3")
                == .quantified(.none, keyPath: "manager.employees", .comparison(keyPath: "id", .greater, .attribute(.integer(3)))))
        #expect(try bind("employees.@count >= %d", [2]) == .count(keyPath: "employees", .greaterOrEqual, 2))
        #expect(try bind("SUBQUERY(employees, $e, $e.id > 2 AND $e.name != nil).@count > 0")
                == .subqueryCount(keyPath: "employees", .and([.comparison(keyPath: "id", .greater, .attribute(.integer(2))),
                                                              .comparison(keyPath: "name", .notEqual, .null)]), .greater, 0))
    }

    func seeded(_ kind: TestStoreKind) throws -> TestContainer {
        let test = try TestContainer(model: Self.model, kind: kind)
        let context = test.context()
        let john = try context.make("Person", ["id": Int64(1), "name": "John"])
        try context.make("Person", ["id": Int64(2), "name": "Jane", "manager": john])
        try context.make("Person", ["id": Int64(3), "name": "Émile", "manager": john])
        try context.make("Person", ["id": Int64(4), "name": "jonas"])
        try context.make("Person", ["id": Int64(5)])
        try context.save()
        return test
    }

    static let queries: [(String, [(any Sendable)?], [Int64])] = [
        ("name == 'John'", [], [1]),
        ("name ==[c] 'JOHN'", [], [1]),
        ("name BEGINSWITH 'J'", [], [1, 2]),
        ("name BEGINSWITH[c] 'jo'", [], [1, 4]),
        ("name BEGINSWITH[cd] 'EM'", [], [3]),
        ("name CONTAINS 'n'", [], [1, 2, 4]),
        ("name ENDSWITH[c] 'E'", [], [2, 3]),
        ("name LIKE 'J*n'", [], [1]),
        ("name LIKE[c] 'j?n*'", [], [2, 4]),
        ("name MATCHES '[A-Z].*'", [], [1, 2]),
        ("manager.name == 'John'", [], [2, 3]),
        ("manager.name == nil", [], [1, 4, 5]),
        ("name != 'John'", [], [2, 3, 4, 5]),
        ("id IN {2, 4, 9}", [], [2, 4]),
        ("id BETWEEN {2, 4}", [], [2, 3, 4]),
        ("NOT id BETWEEN {2, 4}", [], [1, 5]),
        ("id > %d AND name != nil", [1], [2, 3, 4]),
        ("%K < 3 OR name ENDSWITH 'as'", ["id"], [1, 2, 4]),
        ("name IN %@", [["Jane", "jonas", "nobody"]], [2, 4]),
        ("TRUEPREDICATE", [], [1, 2, 3, 4, 5]),
        ("ANY employees.name == 'Jane'", [], [1]),
        ("ANY employees.name BEGINSWITH[cd] 'e'", [], [1]),
        ("ALL employees.id > 1", [], [1, 2, 3, 4, 5]),
        ("ALL employees.id > 2", [], [2, 3, 4, 5]),
        ("NONE employees.name == 'Jane'", [], [2, 3, 4, 5]),
        ("employees.@count == 2", [], [1]),
        ("employees.@count == 0 AND manager != nil", [], [2, 3]),
        ("ANY manager.employees.id == 3", [], [2, 3]),
        ("manager.employees.@count > 1", [], [2, 3]),
        ("employees.@sum.id == 5", [], [1]),
        ("employees.@sum.id == 0", [], [2, 3, 4, 5]),
        ("employees.@avg.id > 2", [], [1]),
        ("employees.@avg.id == nil", [], [2, 3, 4, 5]),
        ("employees.@max.id == 3 AND employees.@min.id == 2", [], [1]),
        ("manager.employees.@max.id >= 3", [], [2, 3]),
        ("SUBQUERY(employees, $e, $e.name BEGINSWITH[cd] 'e').@count == 1", [], [1]),
        ("SUBQUERY(employees, $e, $e.id >= 2).@count == 2", [], [1]),
        ("SUBQUERY(manager.employees, $x, $x.id != 2).@count == 1", [], [2, 3]),
    ]

    @Test("Fetching with format strings gives the same objects on both stores", arguments: queries.indices)
    func fetching(index: Int) throws {
        let (format, arguments, expected) = Self.queries[index]
        for kind in TestStoreKind.allCases {
            let test = try seeded(kind)
            let context = test.context()
            var request = try FetchRequest(entityName: "Person", format: format, arguments: arguments.map { $0 as Any? }, model: Self.model)
            request.sortDescriptors = [FetchSortDescriptor("id")]
            let ids = try context.fetch(request).compactMap { try $0.value(forKey: "id") as? Int64 }
            #expect(ids == expected, "\(kind): \(format)")
        }
    }

    static let errors: [(String, [(any Sendable)?], PredicateFormatError.Code, Int, String)] = [
        ("name ==", [], .syntax, 7, "ends where a value or key was expected"),
        ("nickname == 'x'", [], .unknownKey, 0, "'Person' has no property 'nickname'"),
        ("manager.nick == 'x'", [], .unknownKey, 0, "in key path 'manager.nick'"),
        ("id == 'seven'", [], .typeMismatch, 6, "'id' is an Integer 64; it cannot be compared with the String seven"),
        ("id BEGINSWITH '1'", [], .typeMismatch, 0, "BEGINSWITH needs a String attribute"),
        ("name MATCHES '('", [], .typeMismatch, 13, "not a valid regular expression"),
        ("id BETWEEN {1}", [], .typeMismatch, 11, "exactly two bounds"),
        ("name == %@", [], .argument, 0, "uses 1 format argument(s) but 0 were given"),
        ("%K == 1", [3], .argument, 0, "%K takes a key path as a String"),
        ("id == %d", ["x"], .argument, 6, "%d takes an integer"),
        ("name == $NAME", [], .argument, 8, "no value was given for $NAME"),
        ("employees.name == 'x'", [], .unsupported, 0, "compare its members with ANY, ALL or NONE"),
        ("ANY manager.name == 'x'", [], .typeMismatch, 4, "needs a key path through a to-many relationship"),
        ("SELF == 3", [], .typeMismatch, 8, "SELF compares with objects or object IDs"),
        ("SELF IN %@", ["x"], .argument, 8, "SELF IN needs an array"),
        ("SELF > %@", [nil], .unsupported, 5, "SELF compares with ==, != or IN"),
        ("ANY employees.nick == 'x'", [], .unknownKey, 4, "'Person' has no property 'nick'"),
        ("name.@count > 1", [], .typeMismatch, 0, "@count needs a to-many relationship"),
        ("employees.@count > 'x'", [], .typeMismatch, 19, "@count compares with a whole number"),
        ("employees.@sum.name > 1", [], .typeMismatch, 10, "@sum needs a number attribute"),
        ("SUBQUERY(employees, $e, name == 'x').@count > 0", [], .unsupported, 24, "name the members' keys through $e"),
        ("SUBQUERY(employees, $e, $e.nick == 'x').@count > 0", [], .unknownKey, 24, "'Person' has no property 'nick'"),
        ("SUBQUERY(name, $e, $e.id == 1).@count > 0", [], .typeMismatch, 9, "SUBQUERY needs a to-many relationship"),
        ("SUBQUERY(employees, $e, $e.id == 1) == 1", [], .unsupported, 0, "SUBQUERY is supported as SUBQUERY(…).@count"),
        ("employees.@max > 1", [], .typeMismatch, 10, "@max needs one attribute of the members"),
        ("name.@avg.id > 1", [], .typeMismatch, 0, "@avg needs a to-many relationship"),
        ("name == id", [], .typeMismatch, 8, "'name' is a String and 'id' is an Integer 64; they cannot be compared with =="),
        ("manager < manager.manager", [], .typeMismatch, 10, "they cannot be compared with <"),
        ("name BEGINSWITH manager.name", [], .unsupported, 5, "two key paths compare with ==, !=, <, <=, > or >="),
        ("name ==[c] manager.name", [], .unsupported, 5, "(without [c] or [d])"),
        ("id == manager.nick", [], .unknownKey, 6, "'Person' has no property 'nick'"),
        ("id == employees.id", [], .unsupported, 6, "compare its members with ANY, ALL or NONE"),
        ("manager == id", [], .typeMismatch, 11, "'manager' is a Person relationship and 'id' is an Integer 64"),
        ("id == $X", [], .argument, 6, "no value was given for $X"),
        ("id IN 3", [], .typeMismatch, 6, "IN and BETWEEN need a collection"),
        ("id == {1, 2}", [], .typeMismatch, 6, "a collection only makes sense with IN or BETWEEN"),
        ("name == 'a' AND", [], .syntax, 15, "ends where a value or key was expected"),
        ("(name == 'a'", [], .syntax, 12, "expected ')' to close the parenthesis opened at offset 0"),
        ("name == 'a", [], .syntax, 8, "not closed with '"),
        ("employees.@count > %d", ["many"], .argument, 19, "%d takes an integer; argument 1 is a String (many)"),
        ("ANY id == 3", [], .typeMismatch, 4, "needs a key path through a to-many relationship"),
        ("'J' BEGINSWITH name", [], .unsupported, 4, "a value on the left of BEGINSWITH"),
    ]

    @Test("Bad predicates quote the string and point at the problem", arguments: errors.indices)
    func badPredicate(index: Int) {
        let (format, arguments, code, position, message) = Self.errors[index]
        do {
            let predicate = try bind(format, arguments)
            Issue.record("accepted \(format) as \(predicate)")
        } catch {
            #expect(error.code == code, "\(format): \(error)")
            #expect(error.position == position, "\(format): \(error)")
            #expect(error.message.contains(message), "\(format): \(error.message)")
            #expect(error.description.contains("\n  \(format)\n"), "the description quotes the predicate")
            #expect(error.entity == "Person")
        }
    }

    @Test("SELF against an object, an object ID or a list, and ANY over the members themselves", arguments: TestStoreKind.allCases)
    func selfComparisons(kind: TestStoreKind) throws {
        let test = try seeded(kind)
        let context = test.context()
        func ids(_ format: String, _ arguments: [Any?]) throws -> [Int64] {
            var request = try FetchRequest(entityName: "Person", format: format, arguments: arguments, model: Self.model)
            request.sortDescriptors = [FetchSortDescriptor("id")]
            return try context.fetch(request).compactMap { try $0.value(forKey: "id") as? Int64 }
        }
        let byID = try Dictionary(uniqueKeysWithValues: context.all("Person").map { (try $0.value(forKey: "id") as? Int64 ?? 0, $0) })
        let john = try #require(byID[1])
        let jane = try #require(byID[2])
        #expect(try ids("SELF == %@", [john]) == [1])
        #expect(try ids("SELF == %@", [jane.objectID]) == [2])
        #expect(try ids("SELF != %@", [john]) == [2, 3, 4, 5])
        #expect(try ids("SELF IN %@", [[john, jane.objectID]]) == [1, 2])
        #expect(try ids("NOT SELF IN %@", [[john]]) == [2, 3, 4, 5])
        #expect(try ids("ANY employees == %@", [jane]) == [1])
        #expect(try ids("NONE employees IN %@", [[jane]]) == [2, 3, 4, 5])
        #expect(try ids("manager == %@ AND SELF != %@", [john, jane]) == [3])
        // An ID from another store matches nothing.
        let other = try TestContainer(model: Self.model, kind: kind)
        let otherContext = other.context()
        let stranger = try otherContext.make("Person", ["id": Int64(1)])
        try otherContext.save()
        #expect(try ids("SELF == %@", [stranger.objectID]) == [])
        // Unsaved objects are matched in memory.
        let pending = try context.make("Person", ["id": Int64(9)])
        #expect(try ids("SELF == %@", [pending]) == [9])
    }
}

@Suite("Fetch request templates")
struct FetchTemplateTests {
    @Test("A template runs with its variables substituted; the template itself is unchanged", arguments: TestStoreKind.allCases)
    func template(kind: TestStoreKind) throws {
        let model = try SampleModels.load("OrgChart")
        let test = try TestContainer(model: model, kind: kind)
        let context = test.context()
        for name in ["Ann", "Bob", "Ann"] { try context.make("Person", ["name": name]) }
        try context.save()
        let request = try FetchRequest(template: "personByName", substitutionVariables: ["NAME": "Ann"], model: model)
        #expect(request.entityName == "Person")
        #expect(try context.count(for: request) == 2)
        let other = try FetchRequest(template: "personByName", substitutionVariables: ["NAME": "Bob"], model: model)
        #expect(try context.count(for: other) == 1)
        #expect(model.fetchRequestTemplate(named: "personByName")?.predicate == "name == $NAME")
    }

    @Test("Every variable must be given, and unknown templates are named")
    func missing() throws {
        let model = try SampleModels.load("OrgChart")
        #expect(throws: PredicateFormatError.self) { try FetchRequest(template: "personByName", model: model) }
        do {
            _ = try FetchRequest(template: "nope", model: model)
            Issue.record("found a template named nope")
        } catch {
            #expect(error.message.contains("no fetch request template named 'nope' (it has: personByName)"))
        }
    }

    @Test("The templates of a real model file bind against their entities")
    func fixtureTemplates() throws {
        let model = try XcodeModelReader.read(at: "\(SampleModels.realModelsDirectory)/rentzsch__mogenerator__test.xcdatamodel.contents")
        let store = InMemoryStore(model: model)
        let container = try PersistentContainer(store: store)
        let context = container.newContext()
        let parent = try context.make("Parent", ["parentName": "Zeus", "humanName": "Zeus"])
        try context.make("Child", ["childName": "Ares", "parent": parent, "humanName": "Ares"])
        try context.save()
        let all = try FetchRequest(template: "allHumans", model: model)
        #expect(try context.count(for: all) == 2, "Human's subentities are included")
        let byParentName = try FetchRequest(template: "byParentName", substitutionVariables: ["parentName": "Zeus"], model: model)
        #expect(try context.fetch(byParentName).compactMap { try $0.value(forKey: "childName") as? String } == ["Ares"])
        let byParent = try FetchRequest(template: "byParent", substitutionVariables: ["parent": parent], model: model)
        #expect(try context.count(for: byParent) == 1)
        let byName = try FetchRequest(template: "byHumanName", substitutionVariables: ["humanName": "Ares"], model: model)
        #expect(try context.fetch(byName).map(\.entity.name) == ["Child"])
    }
}
