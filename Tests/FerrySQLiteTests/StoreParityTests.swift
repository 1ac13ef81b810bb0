import Foundation
import Testing
import FerryModel
import FerryStore
import FerrySQLite
import FerryTestSupport

/// The in-memory store and the SQLite store must mean the same thing: the same
/// random saves leave the same content, and the same random queries (compiled
/// to SQL on one side, evaluated in memory on the other) return the same objects.
@Suite("Store parity: in-memory and SQLite agree")
struct StoreParityTests {
    typealias Generator = SeededGenerator

    // Includes LIKE metacharacters, the Kelvin sign (U+212A), which folds to "k", ß (folds to "ss"),
    // and an "o" followed by a combining diaeresis (so "Jo\u{308}" does not begin with "Jo").
    static let names = ["Ann", "Bob", "ann", "Émile", "Zoë", "bob", "Al", "", "50%_off", "a\\b", "\u{212A}elvin", "kelvin",
                        "Jo\u{308}rg", "Jon", "Straße", "STRASSE"]

    func randomValue(_ random: inout Generator) -> PredicateValue {
        switch Int.random(in: 0..<4, using: &random) {
        case 0: .null
        case 1: .attribute(.string(Self.names.randomElement(using: &random) ?? "Ann"))
        default: .attribute(.integer(Int64.random(in: -2...12, using: &random)))
        }
    }

    static let patterns = ["a", "A", "an", "é", "E", "b*", "*o*", "?l", "z", ".*n", "[a-e].*", "", "%", "_", "0%_", "\\", "ke", "K", "LVIN",
                           "jo", "JO", "sse", "strasse"]

    func randomPredicate(_ random: inout Generator, depth: Int = 0) -> FetchPredicate {
        let choice = Int.random(in: 0..<(depth > 1 ? 4 : 12), using: &random)
        switch choice {
        case 11:
            let pairs = [("id", "manager.id"), ("manager.id", "manager.manager.id"), ("name", "manager.name"), ("manager", "manager.manager"),
                         ("SELF_MANAGER", "")]
            let (left, right) = pairs.randomElement(using: &random) ?? ("id", "manager.id")
            if left == "SELF_MANAGER" { return .keyPathComparison(keyPath: "manager.manager", .equal, otherKeyPath: "manager") }
            let op: ComparisonOperator = left == "manager" ? [.equal, .notEqual].randomElement(using: &random) ?? .equal
                : ComparisonOperator.allCases.randomElement(using: &random) ?? .equal
            return .keyPathComparison(keyPath: left, op, otherKeyPath: right)
        case 10:
            return .subqueryCount(keyPath: Bool.random(using: &random) ? "employees" : "manager.employees", randomPredicate(&random, depth: depth + 1),
                                  ComparisonOperator.allCases.randomElement(using: &random) ?? .equal, Int64.random(in: 0...2, using: &random))
        case 9:
            let function = CollectionFunction.allCases.randomElement(using: &random) ?? .sum
            let value: PredicateValue = Int.random(in: 0..<5, using: &random) == 0 ? .null : .attribute(.integer(Int64.random(in: 0...12, using: &random)))
            let op: ComparisonOperator = value == .null ? [.equal, .notEqual].randomElement(using: &random) ?? .equal
                : ComparisonOperator.allCases.randomElement(using: &random) ?? .equal
            return .aggregate(function, keyPath: Bool.random(using: &random) ? "employees" : "manager.employees", key: "id", op, value)
        case 7:
            let quantifier = Quantifier.allCases.randomElement(using: &random) ?? .any
            let keyPath = Bool.random(using: &random) ? "employees" : "manager.employees"
            return .quantified(quantifier, keyPath: keyPath, randomPredicate(&random, depth: depth + 1))
        case 8:
            return .count(keyPath: Bool.random(using: &random) ? "employees" : "manager.employees",
                          ComparisonOperator.allCases.randomElement(using: &random) ?? .equal, Int64.random(in: 0...3, using: &random))
        case 2:
            let op = StringOperator.allCases.randomElement(using: &random) ?? .beginsWith
            let options = StringOptions(rawValue: Int.random(in: 0...3, using: &random))
            let keyPath = Bool.random(using: &random) ? "name" : "manager.name"
            let candidates = op == .matches ? Self.patterns.filter { (try? NSRegularExpression(pattern: $0)) != nil } : Self.patterns
            return .stringMatch(keyPath: keyPath, op, candidates.randomElement(using: &random) ?? "a", options)
        case 3:
            let values = (0..<Int.random(in: 0...3, using: &random)).map { _ in randomValue(&random) }.filter {
                if case .attribute(.string) = $0 { return false }
                return true
            }
            return .membership(keyPath: Bool.random(using: &random) ? "id" : "manager.id", values)
        case 0:
            return .comparison(keyPath: "name", ComparisonOperator.allCases.randomElement(using: &random) ?? .equal,
                               .attribute(.string(Self.names.randomElement(using: &random) ?? "Ann")))
        case 1:
            let keyPath = ["id", "manager.id", "manager.manager.id"].randomElement(using: &random) ?? "id"
            let value = randomValue(&random)
            let op: ComparisonOperator = value == .null ? [.equal, .notEqual].randomElement(using: &random) ?? .equal
                : ComparisonOperator.allCases.randomElement(using: &random) ?? .equal
            if case .attribute(.string) = value { return .comparison(keyPath: "manager.name", op, value) }
            return .comparison(keyPath: keyPath, op, value)
        case 4: return .and([randomPredicate(&random, depth: depth + 1), randomPredicate(&random, depth: depth + 1)])
        case 5: return .or([randomPredicate(&random, depth: depth + 1), randomPredicate(&random, depth: depth + 1)])
        default: return .not(randomPredicate(&random, depth: depth + 1))
        }
    }

    /// Applies one random save to every context, choosing objects by position so both sides pick the same ones.
    func randomSave(_ random: inout Generator, _ contexts: [ManagedObjectContext]) throws {
        let operations = Int.random(in: 1...6, using: &random)
        var plan: [(kind: Int, a: Int, b: Int, name: String?, id: Int64)] = []
        for _ in 0..<operations {
            plan.append((Int.random(in: 0..<10, using: &random), Int.random(in: 0..<1000, using: &random), Int.random(in: 0..<1000, using: &random),
                         Bool.random(using: &random) ? Self.names.randomElement(using: &random) : nil, Int64.random(in: 0...10, using: &random)))
        }
        for context in contexts {
            for step in plan {
                let people = try context.fetch(FetchRequest(entityName: "Person", sortDescriptors: [FetchSortDescriptor("id"), FetchSortDescriptor("name")]))
                    .sorted { ($0.objectID.primaryKey ?? Int64.max, $0.objectID.uriString) < ($1.objectID.primaryKey ?? Int64.max, $1.objectID.uriString) }
                switch step.kind {
                case 0...4 where true:
                    let person = try context.make("Person", ["id": step.id])
                    try person.setValue(step.name, forKey: "name")
                    if !people.isEmpty, step.a % 3 != 0 { try person.setValue(people[step.a % people.count], forKey: "manager") }
                case 5...7 where !people.isEmpty:
                    let person = people[step.a % people.count]
                    try person.setValue(step.name, forKey: "name")
                    try person.setValue(step.b % 4 == 0 ? nil : people[step.b % people.count], forKey: "manager")
                case 8...9 where !people.isEmpty:
                    context.delete(people[step.a % people.count])
                default:
                    continue
                }
            }
            try context.save()
        }
    }

    func normalizedDump(_ container: PersistentContainer) throws -> [String] {
        var lines: [String] = []
        try StoreDump(store: container.store).write { lines.append($0) }
        return lines.map { $0.replacingOccurrences(of: container.store.identifier.uuidString, with: "STORE") }
    }

    @Test("Random saves and random queries agree", arguments: [1, 2, 3, 4, 5] as [UInt64])
    func parity(seed: UInt64) throws {
        print("StoreParityTests seed \(seed)")
        var random = Generator(seed: seed)
        let model = try SampleModels.load("OrgChart")
        let memory = try TestContainer(model: model, kind: .memory)
        let sqlite = try TestContainer(model: model, kind: .sqlite)
        // Same UUID-free content requires the same primary keys, which both stores hand out in insert order.
        let contexts = [memory.context(), sqlite.context()]
        for _ in 0..<25 { try randomSave(&random, contexts) }
        let dump = try normalizedDump(sqlite.container)
        #expect(dump.count >= 20, "the random saves leave real data (seed \(seed))")
        #expect(try normalizedDump(memory.container) == dump, "seed \(seed)")

        let readers = [memory.context(), sqlite.context()]
        var partial = 0
        for _ in 0..<60 {
            let predicate = randomPredicate(&random)
            let request = FetchRequest(entityName: "Person", predicate: predicate,
                                       sortDescriptors: [FetchSortDescriptor("name", ascending: Bool.random(using: &random),
                                                                             caseInsensitive: Bool.random(using: &random)),
                                                         FetchSortDescriptor("id")])
            let results = try readers.map { try $0.fetch(request).map { $0.objectID.primaryKey ?? -1 } }
            #expect(results[0] == results[1], "seed \(seed): \(predicate)")
            let counts = try readers.map { try $0.count(for: request) }
            #expect(counts[0] == counts[1] && counts[0] == results[0].count, "seed \(seed): count of \(predicate)")
            if !results[0].isEmpty && results[0].count < dump.filter({ $0.contains("\"Person\"") }).count { partial += 1 }
        }
        #expect(partial >= 10, "enough queries select some but not all objects (seed \(seed))")
    }
}
