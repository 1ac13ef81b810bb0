import Foundation
import Testing
import FerryTestTraits
import FerryModel
import FerryStore
import FerrySQLite
import FerrySync
import FerryTestSupport

/// Convergence on any model: random saves generated from the model itself (every attribute
/// type within its rules, to-one, to-many, ordered and many-to-many members, deletes under
/// every delete rule, inheritance, unique keys from small pools, several objects per save),
/// over every model file in `Tests/Fixtures/models` and the sample models, on SQLite and
/// in-memory replicas. After random partial exchanges and then full ones, every replica must
/// hold the same dump and vector, and no unique key twice. `FERRY_MODEL_SOAK=N` runs N seeds
/// per model instead of 12 (from `FERRY_MODEL_SOAK_FIRST`, 1 by default); `FERRY_MODEL_SEED=S` replays one (with `FERRY_MODEL=name`), and
/// `FERRY_DEBUG=1` prints every replica's change sets when their dumps differ. Known gaps
/// that a long soak finds are listed in docs/SYNC.md, "Not yet".
@Suite("Model-driven convergence", .blocking)
struct ModelDrivenConvergenceTests {
    /// Every model under test, by name.
    static let models: [String: ManagedObjectModel] = {
        var models: [String: ManagedObjectModel] = [:]
        let directory = SampleModels.realModelsDirectory
        for file in ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).filter({ $0.hasSuffix(".contents") }) {
            if let model = try? XcodeModelReader.read(at: "\(directory)/\(file)") { models[String(file.dropLast(".xcdatamodel.contents".count))] = model }
        }
        for name in ["OrgChart", "Company", "Orders"] { models[name] = try? SampleModels.load(name) }
        models["Playlists"] = ConvergenceTests.playlists
        models["Members"] = ConvergenceTests.members
        models["Departments"] = ConvergenceTests.departments
        // To-many counts: a maximum (repaired by removing the newest memberships) and a minimum.
        models["Teams"] = ClockRuleTests.teams
        models["Moody"] = ClockRuleTests.moody
        models["Clubs"] = ClockRuleTests.clubs(ownerHolds: true).model
        models["Squads"] = ClockRuleTests.clubs(ownerHolds: false).model
        models["RequiredContinents"] = MergeRuleTests.requiredContinent(.nullify)
        // Derived attributes of every form (recomputed on every replica; now() replicated).
        models["Derived"] = DerivedAttributeTests.model
        return models
    }()

    static let cases: [String] = {
        let environment = ProcessInfo.processInfo.environment
        if let name = environment["FERRY_MODEL"] { return [name] }
        return models.keys.sorted()
    }()

    static let seeds: [UInt64] = {
        let environment = ProcessInfo.processInfo.environment
        if let seed = environment["FERRY_MODEL_SEED"].flatMap(UInt64.init) { return [seed] }
        let count = environment["FERRY_MODEL_SOAK"].flatMap(Int.init) ?? 12
        let first = environment["FERRY_MODEL_SOAK_FIRST"].flatMap(UInt64.init) ?? 1
        return (first..<first + UInt64(max(count, 1))).map { $0 }
    }()

    @Test("Every fixture model has been read")
    func fixturesPresent() {
        #expect(Self.models.count >= 16, "\(Self.models.keys.sorted())")
    }

    @Test("Random saves generated from the model converge", arguments: cases)
    func converge(model name: String) throws {
        let model = try #require(Self.models[name])
        for seed in Self.seeds {
            try run(model: model, name: name, seed: seed)
        }
    }

    /// Saves; false when the save is refused (validation, a constraint).
    static func save(_ context: ManagedObjectContext) -> Bool {
        do {
            try context.save()
            return true
        } catch {
            return false
        }
    }

    func run(model: ManagedObjectModel, name: String, seed: UInt64) throws {
        var random = SeededGenerator(seed: seed &* 7919 &+ UInt64(name.utf8.reduce(0) { $0 &* 31 &+ Int($1) } & 0xFFFF))
        let replicas = try (0..<3).map { index in
            try Replica(model: model, identifier: UUID(uuidString: String(format: "%08X-0000-4000-8000-%012X", UInt32(truncatingIfNeeded: seed), index)),
                        directInserts: index != 2, kind: index == 1 ? .memory : .sqlite)
        }
        for replica in replicas { replica.context.mergePolicy = .mergeByPropertyObjectTrump }
        // Signed, and every signature checked: repairs and merges recorded on the way are signed by their store.
        try Replica.trustEachOther(replicas)
        var generator = SaveGenerator(model: model)
        for _ in 0..<20 {
            if Int.random(in: 0..<3, using: &random) == 0 {
                let from = replicas.randomElement(using: &random), to = replicas.randomElement(using: &random)
                if let from, let to, from !== to { try to.pull(from: from) }
                to?.context.reset()
            } else if let replica = replicas.randomElement(using: &random) {
                for _ in 0..<Int.random(in: 1...4, using: &random) { try generator.operate(on: replica, random: &random) }
                if !Self.save(replica.context) {
                    replica.context.rollback()  // a save the model refuses: the operation is lost, as an app's would be
                }
            }
        }
        let rounds = try Replica.exchangeUntilSettled(replicas)
        #expect(rounds < 10, "\(name) seed \(seed): exchanges did not settle")
        let dumps = try replicas.map { try $0.dump() }
        if ProcessInfo.processInfo.environment["FERRY_DEBUG"] != nil, Set(dumps).count > 1 {
            for (number, replica) in replicas.enumerated() {
                print("=== replica \(number)")
                for line in try replica.store.changeSetLines() { print(line) }
            }
        }
        for (index, dump) in dumps.enumerated().dropFirst() where dump != dumps[0] {
            Issue.record("""
                \(name) seed \(seed): replica \(index) differs from replica 0.
                only in \(index):
                \(dump.filter { !dumps[0].contains($0) }.joined(separator: "\n"))
                only in 0:
                \(dumps[0].filter { !dump.contains($0) }.joined(separator: "\n"))
                """)
        }
        #expect(Set(try replicas.map { try $0.store.historyState().vector }).count == 1, "\(name) seed \(seed): vectors differ")
        // `ferry dump`'s streamed form (SQL, URI order) is the same text as the generic dump.
        for (index, replica) in replicas.enumerated() {
            guard let store = replica.store as? SQLiteStore else { continue }
            var streamed: [String] = []
            try store.streamDump { streamed.append($0) }
            if streamed != dumps[index] {
                Issue.record("""
                    \(name) seed \(seed): the streamed dump of replica \(index) differs.
                    only streamed:
                    \(streamed.filter { !dumps[index].contains($0) }.prefix(3).joined(separator: "\n"))
                    only generic:
                    \(dumps[index].filter { !streamed.contains($0) }.prefix(3).joined(separator: "\n"))
                    """)
            }
        }
        let duplicates = try ConvergenceTests.duplicateKeys(in: dumps[0], model: model)
        #expect(duplicates.isEmpty, "\(name) seed \(seed): \(duplicates)")
        let overfull = try Self.membersPastMaximum(in: replicas[0])
        #expect(overfull.isEmpty, "\(name) seed \(seed): \(overfull)")
        for replica in replicas {
            let quarantined = try replica.store.quarantinedChangeSets().map(\.reason)
            #expect(quarantined.isEmpty, "\(name) seed \(seed): \(quarantined)")
        }
    }
}

extension ModelDrivenConvergenceTests {
    /// Objects holding more members than a to-many relationship's maximum allows (none once merged: docs/SYNC.md, "Counts").
    static func membersPastMaximum(in replica: Replica) throws -> [String] {
        var found: [String] = []
        for entity in replica.store.model.entities where !entity.isAbstract {
            let bounded = entity.relationships.filter { $0.isToMany && $0.maxCount > 0 && !$0.isTransient }
            guard !bounded.isEmpty else { continue }
            for object in try replica.context.fetch(FetchRequest(entityName: entity.name)) where object.entity.name == entity.name {
                for relationship in bounded where try object.mutableSetValue(forKey: relationship.name).objects.count > relationship.maxCount {
                    found.append("\(object.objectID.uriString).\(relationship.name)")
                }
            }
        }
        return found
    }
}

/// Random operations on a replica's context, from the model alone.
struct SaveGenerator {
    let model: ManagedObjectModel
    let concrete: [EntityDescription]
    /// Properties bound by a uniqueness constraint: their values come from small pools, so replicas collide.
    let constrained: Set<String>

    init(model: ManagedObjectModel) {
        self.model = model
        concrete = model.entities.filter { !$0.isAbstract }.sorted { $0.name < $1.name }
        constrained = Set(model.entities.flatMap { entity in entity.uniquenessConstraints.flatMap { $0.map { "\(entity.name).\($0)" } } })
    }

    /// Objects of `entity` (or its subentities) in the context, in origin-URI order so a seed replays exactly.
    func objects(_ entity: String, in replica: Replica) throws -> [ManagedObject] {
        let origins = try replica.store.originURIs()
        return try replica.context.fetch(FetchRequest(entityName: entity)).filter { !$0.isDeleted }
            .sorted { (origins[$0.objectID] ?? $0.objectID.uriString) < (origins[$1.objectID] ?? $1.objectID.uriString) }
    }

    mutating func operate(on replica: Replica, random: inout SeededGenerator) throws {
        guard let entity = concrete.randomElement(using: &random) else { return }
        let context = replica.context
        switch Int.random(in: 0..<10, using: &random) {
        case 0...3:
            let object = try context.insert(entityName: entity.name)
            for attribute in entity.attributes where !attribute.isTransient {
                try object.setAttributeValue(value(for: attribute, of: entity, random: &random), forKey: attribute.name)
            }
            for relationship in entity.relationships where !relationship.isTransient {
                try relate(object, relationship, in: replica, random: &random)
            }
        case 4...5:
            guard let object = try objects(entity.name, in: replica).randomElement(using: &random),
                  let attribute = object.entity.attributes.filter({ !$0.isTransient }).randomElement(using: &random) else { return }
            try object.setAttributeValue(value(for: attribute, of: object.entity, random: &random), forKey: attribute.name)
        case 6...8:
            guard let object = try objects(entity.name, in: replica).randomElement(using: &random),
                  let relationship = object.entity.relationships.filter({ !$0.isTransient }).randomElement(using: &random) else { return }
            try relate(object, relationship, in: replica, random: &random)
        default:
            if let object = try objects(entity.name, in: replica).randomElement(using: &random) { context.delete(object) }
        }
    }

    /// Sets a to-one, or adds (at a random place when ordered) or removes a to-many member.
    func relate(_ object: ManagedObject, _ relationship: RelationshipDescription, in replica: Replica, random: inout SeededGenerator) throws {
        let candidates = try objects(relationship.destinationEntityName, in: replica)
        if !relationship.isToMany {
            let target = Int.random(in: 0..<4, using: &random) == 0 ? nil : candidates.randomElement(using: &random)
            try object.setToOneValue(target, forKey: relationship.name)
            return
        }
        let members = try object.mutableSetValue(forKey: relationship.name)
        if Bool.random(using: &random), let member = members.objects.randomElement(using: &random) {
            try members.remove(member)
        } else if let member = candidates.randomElement(using: &random) {
            try members.insert(member, at: relationship.isOrdered ? Int.random(in: 0...members.count, using: &random) : nil)
        }
    }

    /// A value for an attribute within its rules (nil sometimes when optional); small pools for unique keys.
    func value(for attribute: AttributeDescription, of entity: EntityDescription, random: inout SeededGenerator) -> AttributeValue? {
        let unique = entity.ancestry.contains { constrained.contains("\($0).\(attribute.name)") }
        if attribute.isOptional, Int.random(in: 0..<(unique ? 8 : 4), using: &random) == 0 { return nil }
        let pick = Int64.random(in: 0...(unique ? 3 : 40), using: &random)
        func bounded(_ value: Int64) -> Int64 {
            var value = value
            if case .integer(let low)? = attribute.validation.minimum { value = max(value, low) }
            if case .integer(let high)? = attribute.validation.maximum { value = min(value, high) }
            return value
        }
        switch attribute.type {
        case .integer16, .integer32, .integer64: return .integer(bounded(pick))
        case .decimal: return .decimal(Decimal(pick) / 4)
        case .double: return .double(Double(bounded(pick)) / 2)
        case .float: return .float(Float(bounded(pick)) / 2)
        case .boolean: return .boolean(pick % 2 == 0)
        case .date: return .date(Date(timeIntervalSince1970: 1_700_000_000 + Double(pick) * 86_400))
        case .binaryData, .transformable: return .binaryData(Data([UInt8(pick), 7]))
        case .uuid: return .uuid(UUID(uuidString: String(format: "00000000-0000-4000-8000-%012X", pick)) ?? UUID())
        case .uri: return .uri(URL(string: "https://example.com/\(pick)") ?? URL(fileURLWithPath: "/"))
        case .string:
            if attribute.validation.regularExpression != nil { return attribute.isOptional ? nil : .string("a") }
            var text = ["ann", "bob", "cid", "dee", "eve"][Int(pick % 5)] + (unique ? "" : String(pick))
            if case .integer(let low)? = attribute.validation.minimum { while text.count < low { text += "x" } }
            if case .integer(let high)? = attribute.validation.maximum, text.count > high { text = String(text.prefix(Int(max(high, 0)))) }
            return .string(text)
        }
    }
}
