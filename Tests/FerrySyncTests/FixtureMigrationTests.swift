import Foundation
import Testing
import FerryModel
import FerryStore
import FerrySQLite
import FerrySync
import FerryTestSupport

/// Lightweight migration on every model under test (the real model files and the sample models):
/// a store filled with random saves generated from the model migrates to a next version that
/// renames each entity's first attribute by Renaming ID and adds an optional one, and holds the
/// same objects, the renamed values under their new names. A change set made before the
/// upgrade, on a replica still on the first version, applies translated.
@Suite("Migration on every fixture model")
struct FixtureMigrationTests {
    /// The next version of `model`: each entity's first own persistent attribute renamed
    /// (`<name>Renamed`, Renaming ID the old name), an optional `addedInNext` on each root.
    /// Fetch templates and fetched properties, which may name the old attribute, are left out.
    static func nextVersion(of model: ManagedObjectModel) throws -> (model: ManagedObjectModel, renamed: [String: [String: String]]) {
        var renamed: [String: [String: String]] = [:]  // entity (and subentities) → old → new
        // (An attribute a derivation reads keeps its name: renaming it means editing the expression too.)
        let read = Set(model.entities.flatMap { $0.ownAttributes.compactMap(\.derivation?.sourceAttribute) })
        let entities = model.entities.map { entity -> EntityDescription in
            var next = EntityDescription(name: entity.name, parent: entity.parentName, isAbstract: entity.isAbstract, className: entity.className,
                                         attributes: entity.ownAttributes, relationships: entity.ownRelationships,
                                         uniquenessConstraints: entity.uniquenessConstraints, versionHashModifier: entity.versionHashModifier)
            if let index = next.ownAttributes.firstIndex(where: { !$0.isTransient && !read.contains($0.name) }) {
                let old = next.ownAttributes[index].name
                next.ownAttributes[index].name = old + "Renamed"
                next.ownAttributes[index].renamingIdentifier = old
                next.uniquenessConstraints = next.uniquenessConstraints.map { $0.map { $0 == old ? old + "Renamed" : $0 } }
                for name in [entity.name] + entity.subentityNames { renamed[name, default: [:]][old] = old + "Renamed" }
            }
            if entity.parentName == nil { next.ownAttributes.append(AttributeDescription(name: "addedInNext", type: .string)) }
            return next
        }
        return (try ManagedObjectModel(entities: entities), renamed)
    }

    /// A dump line as the next version would print it: renamed keys, the added attribute nil.
    static func expected(_ line: String, renamed: [String: [String: String]]) throws -> NSDictionary {
        var object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        var values = object["values"] as? [String: Any] ?? [:]
        for (old, new) in renamed[object["entity"] as? String ?? ""] ?? [:] {
            values[new] = values.removeValue(forKey: old)
        }
        values["addedInNext"] = NSNull()
        object["values"] = values
        return object as NSDictionary
    }

    @Test("A store of random saves migrates to the next version with every value kept; an earlier change set applies translated",
          arguments: ModelDrivenConvergenceTests.cases)
    func migrate(model name: String) throws {
        let model = try #require(ModelDrivenConvergenceTests.models[name])
        let (next, renamed) = try Self.nextVersion(of: model)
        var random = SeededGenerator(seed: 42 &+ UInt64(name.utf8.count))
        let replica = try Replica(model: model)
        let late = try Replica(model: model)  // stays on the first version
        replica.context.mergePolicy = .mergeByPropertyObjectTrump
        late.context.mergePolicy = .mergeByPropertyObjectTrump
        var generator = SaveGenerator(model: model)
        for _ in 0..<8 {
            for _ in 0..<3 { try generator.operate(on: replica, random: &random) }
            if !ModelDrivenConvergenceTests.save(replica.context) { replica.context.rollback() }
        }
        try late.pull(from: replica)
        for _ in 0..<3 { try generator.operate(on: late, random: &random) }
        if !ModelDrivenConvergenceTests.save(late.context) { late.context.rollback() }
        let before = try replica.dump()
        #expect(!before.isEmpty, "\(name): the random saves made no objects")
        let path = try #require(replica.store as? SQLiteStore).path

        let migrated = try SQLiteStore(path: path, model: next, options: .init(earlierModels: [model], signingKey: replica.signingKey))
        var after: [String] = []
        try StoreDump(store: migrated).write { after.append($0) }
        let parsed = try after.map { try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? NSDictionary) }
        #expect(parsed == (try before.map { try Self.expected($0, renamed: renamed) }), "\(name): the migrated dump differs")

        // What the replica on the first version wrote applies translated, and the two agree once it is upgraded too.
        let engine = try ReplayEngine(store: migrated)
        let report = try engine.apply(lines: late.store.changeSetLines(after: migrated.historyState().vector, limit: nil))
        #expect(report.waiting == 0 && report.quarantined == 0, "\(name): \(report)")
        let latePath = try #require(late.store as? SQLiteStore).path
        let lateMigrated = try SQLiteStore(path: latePath, model: next, options: .init(earlierModels: [model], signingKey: late.signingKey))
        _ = try ReplayEngine(store: lateMigrated).apply(lines: migrated.changeSetLines(after: lateMigrated.historyState().vector, limit: nil))
        var one: [String] = [], two: [String] = []
        try StoreDump(store: migrated).write { one.append($0) }
        try StoreDump(store: lateMigrated).write { two.append($0) }
        #expect(one == two, "\(name): the two migrated replicas differ")
    }
}
