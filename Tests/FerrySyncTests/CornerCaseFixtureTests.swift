import Foundation
import Testing
import FerryModel
import FerryStore
import FerrySQLite
import FerrySync
import FerryTestSupport

/// Corner cases kept as fixture files (`Fixtures/cases/<model>-<case>.jsonl` with
/// the expected `ferry dump` in `.expected`): every order of the change sets,
/// each delivered on its own, and all of them in one batch, must end in the
/// expected dump with nothing left waiting. `MODEL` in a file stands for the
/// model's version hash.
@Suite("Corner cases from fixture files")
struct CornerCaseFixtureTests {
    static let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures/cases")

    /// Case name → how many change sets end quarantined.
    static let cases: [String: Int] = [
        "orgchart-update-after-delete": 0,
        "orgchart-double-insert": 0,
        "orgchart-relate-and-delete-nullify": 0,
        "company-relate-and-delete-cascade": 0,
        "departments-deny-late-reference": 0,
        "departments-update-concurrent-with-undone-delete": 0,
        "orders-validation-quarantine": 1,
        "orgchart-missing-predecessor": 0,
        "playlists-concurrent-reorder": 0,
        "members-noaction-late-reference": 0,
        "members-duplicate-keys": 0,
        "clubs-members-below-minimum": 0,
        "continents-required-reference": 0,
    ]

    static func model(for name: String) throws -> ManagedObjectModel {
        switch name.split(separator: "-").first {
        case "orgchart": try SampleModels.load("OrgChart")
        case "company": try SampleModels.load("Company")
        case "orders": try SampleModels.load("Orders")
        case "playlists": ConvergenceTests.playlists
        case "members": ConvergenceTests.members
        case "clubs": ClockRuleTests.clubs(ownerHolds: true).model
        case "continents": MergeRuleTests.requiredContinent(.nullify)
        default: ConvergenceTests.departments
        }
    }

    static func permutations<T>(_ items: [T]) -> [[T]] {
        guard items.count > 1 else { return [items] }
        return items.indices.flatMap { index in
            var rest = items
            let first = rest.remove(at: index)
            return permutations(rest).map { [first] + $0 }
        }
    }

    @Test("Every fixture file has its case here")
    func listed() throws {
        let files = try FileManager.default.contentsOfDirectory(atPath: Self.directory.path).filter { $0.hasSuffix(".jsonl") }
        #expect(Set(files.map { String($0.dropLast(".jsonl".count)) }) == Set(Self.cases.keys))
    }

    @Test("Any order, one at a time or all at once, ends in the expected dump", arguments: cases.keys.sorted())
    func replay(name: String) throws {
        let model = try Self.model(for: name)
        let lines = try String(contentsOf: Self.directory.appendingPathComponent("\(name).jsonl"), encoding: .utf8)
            .split(separator: "\n").map { $0.replacingOccurrences(of: "MODEL", with: model.versionHash) }
        let expected = try String(contentsOf: Self.directory.appendingPathComponent("\(name).expected"), encoding: .utf8)
            .split(separator: "\n").map(String.init)
        var deliveries = Self.permutations(lines).map { order in order.map { [$0] } }
        deliveries.append([lines])
        for (number, delivery) in deliveries.enumerated() {
            let replica = try Replica(model: model, kind: number % 2 == 0 ? .sqlite : .memory)
            for batch in delivery { _ = try replica.engine.apply(lines: batch) }
            #expect(try replica.dump() == expected, "\(name), order \(delivery.map { $0.map { $0.prefix(60) } })")
            #expect(try replica.engine.heldChangeSets().isEmpty, "\(name): nothing left waiting")
            #expect(try replica.store.quarantinedChangeSets().count == Self.cases[name], "\(name)")
        }
    }
}
