import Foundation
import Testing
import FerryModel
import FerryStore
import FerryTestSupport

/// Every predicate of ``PredicateTable`` must select exactly its expected
/// objects three ways: compiled to SQL by the SQLite store, evaluated by the
/// in-memory store, and evaluated by a context on unsaved objects.
@Suite("Predicate table: 200+ predicates over the three sample models")
struct PredicateTableTests {
    enum Mode: String, CaseIterable, CustomStringConvertible {
        /// Saved to a SQLite store: the predicate runs as SQL.
        case sqlite
        /// Saved to the in-memory store: the store evaluates rows.
        case memory
        /// Inserted but not saved: the context evaluates objects.
        case pending
        var description: String { rawValue }
    }

    struct UnknownLabel: Error { let label: String }

    static let models: [String: ManagedObjectModel] = {
        var models: [String: ManagedObjectModel] = [:]
        for name in ["OrgChart", "Orders", "Company"] { models[name] = try? SampleModels.load(name) }
        return models
    }()

    @Test("The table covers every entity of the three sample models")
    func coverage() throws {
        #expect(PredicateTable.cases.count >= 150)
        var covered: [String: Set<String>] = [:]
        for entry in PredicateTable.cases { covered[entry.model, default: []].insert(entry.entity) }
        for (name, model) in Self.models {
            #expect(covered[name] == Set(model.entities.map(\.name)), "\(name)")
        }
        #expect(Self.models.count == 3)
    }

    @Test("Each predicate selects its expected objects", arguments: PredicateTable.cases)
    func predicate(_ entry: PredicateCase) throws {
        let model = try #require(Self.models[entry.model])
        for mode in Mode.allCases {
            let test = try TestContainer(model: model, kind: mode == .sqlite ? .sqlite : .memory)
            let context = test.context()
            let objects = try PredicateTableData.insert(entry.model, into: context)
            if mode != .pending { try context.save() }
            let labels = Dictionary(uniqueKeysWithValues: objects.map { ($0.value.objectID, $0.key) })
            func object(_ label: String) throws -> ManagedObject {
                guard let object = objects[label] else { throw UnknownLabel(label: label) }
                return object
            }
            let arguments: [Any?] = try entry.arguments.map { argument -> Any? in
                switch argument {
                case .value(let value): return value
                case .object(let label): return try object(label)
                case .objects(let list): return try list.map(object)
                }
            }
            let predicate = try FetchPredicate(format: entry.format, arguments: arguments, variables: entry.variables, entity: entry.entity, model: model)
            let request = FetchRequest(entityName: entry.entity, predicate: predicate)
            let found = try context.fetch(request).map { labels[$0.objectID] ?? "?" }.sorted()
            #expect(found == entry.expected.sorted(), "\(mode): \(entry.format)")
            #expect(try context.count(for: request) == entry.expected.count, "\(mode) count: \(entry.format)")
        }
    }
}
