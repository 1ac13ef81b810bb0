import Foundation
import Testing
import FerryTestTraits
import FerryModel
import FerryStore
import FerrySQLite
import FerrySync
import FerryTestSupport

/// Ferry's invariant (docs/SYNC.md): stores that have applied the same change sets
/// hold the same content, whatever order they arrived in. Random operations on
/// 3–5 replicas, random partial exchanges in random orders, then exchanges
/// until nothing new flows: every dump must be identical and every change set
/// taken in everywhere. Each run mixes SQLite and in-memory stores, with and
/// without the direct-insert fast path. `FERRY_SOAK=N` runs N seeds instead of 200 (from
/// `FERRY_SOAK_FIRST`, 1 by default, so that a soak can go past the seeds earlier soaks ran); a failure
/// names its seed, and `FERRY_SEED=S` replays that one.
@Suite("Convergence of random replicas", .blocking)
struct ConvergenceTests {
    typealias Generator = SeededGenerator

    static let seeds: [UInt64] = {
        let environment = ProcessInfo.processInfo.environment
        if let seed = environment["FERRY_SEED"].flatMap(UInt64.init) { return [seed] }
        let count = environment["FERRY_SOAK"].flatMap(Int.init) ?? 200
        let first = environment["FERRY_SOAK_FIRST"].flatMap(UInt64.init) ?? 1
        return (first..<first + UInt64(max(count, 1))).map { $0 }
    }()

    static let orgChart = try! SampleModels.load("OrgChart")
    static let company = try! SampleModels.load("Company")
    /// Deny: a department with employees cannot be deleted.
    static let departments = try! ManagedObjectModel {
        Entity("Department") {
            Attribute("name", .string)
            Relationship("employees", to: "Employee", inverse: "department", toMany: true, deleteRule: .deny)
            // Many-to-many, kept on the Project side's join table: a Deny restore must bring it back.
            Relationship("projects", to: "Project", inverse: "departments", toMany: true)
        }
        Entity("Employee") {
            Attribute("name", .string)
            Relationship("department", to: "Department", inverse: "employees")
        }
        Entity("Project") {
            Attribute("name", .string)
            Relationship("departments", to: "Department", inverse: "projects", toMany: true)
        }
    }
    /// Ordered to-many relationships: one-to-many (tracks) and many-to-many (tags, ordered on one side).
    static let playlists = try! ManagedObjectModel {
        Entity("Playlist") {
            Attribute("name", .string)
            Relationship("tracks", to: "Track", inverse: "playlist", toMany: true, ordered: true)
            Relationship("tags", to: "Tag", inverse: "playlists", toMany: true, ordered: true)
        }
        Entity("Track") {
            Attribute("title", .string)
            Relationship("playlist", to: "Playlist", inverse: "tracks")
        }
        Entity("Tag") {
            Attribute("name", .string)
            Relationship("playlists", to: "Playlist", inverse: "tags", toMany: true)
        }
    }
    /// Uniqueness constraints (single and compound, on a parent and shared by a subentity), with
    /// keys drawn from small pools so that replicas keep inserting the same keys.
    static let members = try! ManagedObjectModel {
        Entity("Member", uniquenessConstraints: [["email"]]) {
            Attribute("email", .string)
            Attribute("name", .string)
            Attribute("score", .integer64)
            Relationship("club", to: "Club", inverse: "members")
            Relationship("tags", to: "Tag", inverse: "members", toMany: true)
        }
        Entity("Officer", parent: "Member") { Attribute("rank", .integer16) }
        Entity("Club", uniquenessConstraints: [["city", "code"]]) {
            Attribute("city", .string)
            Attribute("code", .integer16)
            Attribute("name", .string)
            // No Action: a delete clears the references to the deleted object (docs/SYNC.md).
            Relationship("members", to: "Member", inverse: "club", toMany: true, deleteRule: .noAction)
        }
        Entity("Tag") {
            Attribute("name", .string)
            Relationship("members", to: "Member", inverse: "tags", toMany: true)
        }
        Entity("Card") { Relationship("holder", to: "Member") }
    }
    static let names = ["Ann", "Bob", "Cid", "Dee", "Eve", nil]

    /// One random operation on a replica's context (objects picked by sorted origin URI, so a seed replays exactly).
    enum Workload { case orgChart, company, departments, playlists, members }

    func randomOperation(_ random: inout Generator, on replica: Replica, workload: Workload) throws {
        let context = replica.context
        func pick(_ entity: String) throws -> ManagedObject? {
            let all = try context.fetch(FetchRequest(entityName: entity)).filter { !$0.isDeleted }
            let origins = try replica.store.originURIs()
            let sorted = all.sorted { (origins[$0.objectID] ?? $0.objectID.uriString) < (origins[$1.objectID] ?? $1.objectID.uriString) }
            guard !sorted.isEmpty else { return nil }
            return sorted[Int.random(in: 0..<sorted.count, using: &random)]
        }
        let name = Self.names.randomElement(using: &random) ?? nil
        /// Inserts `member` into an ordered relationship at a random place (or moves it there).
        func place(_ member: ManagedObject, in owner: ManagedObject, _ relationship: String) throws {
            let members = try owner.mutableSetValue(forKey: relationship)
            try members.insert(member, at: Int.random(in: 0...members.count, using: &random))
        }
        if workload == .members {
            let email: String? = ["a@x", "b@x", "c@x", "d@x", nil].randomElement(using: &random) ?? nil
            switch Int.random(in: 0..<14, using: &random) {
            case 0...2:
                let member = try context.make(Bool.random(using: &random) ? "Member" : "Officer")
                try member.setValue(email, forKey: "email")
                try member.setValue(name, forKey: "name")
                if Bool.random(using: &random) { try member.setValue(Int64.random(in: 0...9, using: &random), forKey: "score") }
                if let club = try pick("Club"), Bool.random(using: &random) { try member.setValue(club, forKey: "club") }
            case 3...4:
                guard let member = try pick("Member") else { return }
                if Bool.random(using: &random) {
                    try member.setValue(name, forKey: "name")
                } else {
                    try member.setValue(Int64.random(in: 0...9, using: &random), forKey: "score")
                }
            case 5:
                if let member = try pick("Member") { try member.setValue(email, forKey: "email") }
            case 6...7:
                let club = try context.make("Club")
                try club.setValue(["Oslo", "Rome"].randomElement(using: &random), forKey: "city")
                try club.setValue(Int16.random(in: 1...2, using: &random), forKey: "code")
                try club.setValue(name, forKey: "name")
            case 8:
                if let member = try pick("Member") { try member.setValue(Bool.random(using: &random) ? try pick("Club") : nil, forKey: "club") }
            case 9:
                if let member = try pick("Member") {
                    let tag = try pick("Tag") ?? context.make("Tag", ["name": name ?? "untitled"])
                    try member.mutableSetValue(forKey: "tags").insert(tag)
                }
            case 10:
                try context.make("Card").setValue(try pick("Member"), forKey: "holder")
            case 11:
                if let card = try pick("Card") { try card.setValue(try pick("Member"), forKey: "holder") }
            case 12:
                if let member = try pick("Member") { context.delete(member) }
            default:
                if let club = try pick("Club") { context.delete(club) }
            }
        } else if workload == .playlists {
            switch Int.random(in: 0..<12, using: &random) {
            case 0...1:
                try context.make("Playlist").setValue(name, forKey: "name")
            case 2...3:
                let track = try context.make("Track")
                try track.setValue(name, forKey: "title")
                if let playlist = try pick("Playlist") { try place(track, in: playlist, "tracks") }
            case 4...5:
                // Move a track within its playlist, or to another one.
                guard let track = try pick("Track") else { return }
                let owner = try (track.value(forKey: "playlist") as? ManagedObject).flatMap { Bool.random(using: &random) ? $0 : nil }
                if let target = try owner ?? pick("Playlist") { try place(track, in: target, "tracks") }
            case 6:
                if let track = try pick("Track") { try track.setValue(nil, forKey: "playlist") }
            case 7:
                try context.make("Tag").setValue(name, forKey: "name")
            case 8...9:
                if let playlist = try pick("Playlist"), let tag = try pick("Tag") { try place(tag, in: playlist, "tags") }
            case 10:
                if let playlist = try pick("Playlist"), let tag = try pick("Tag") { try playlist.mutableSetValue(forKey: "tags").remove(tag) }
            default:
                if Bool.random(using: &random) {
                    if let track = try pick("Track") { context.delete(track) }
                } else if let victim = try pick(Bool.random(using: &random) ? "Playlist" : "Tag") {
                    context.delete(victim)
                }
            }
        } else if workload == .departments {
            switch Int.random(in: 0..<10, using: &random) {
            case 0...2:
                try context.make("Department").setValue(name, forKey: "name")
            case 3...5:
                let employee = try context.make("Employee")
                try employee.setValue(name, forKey: "name")
                try employee.setValue(try pick("Department"), forKey: "department")
            case 6:
                guard let employee = try pick("Employee") else { return }
                try employee.setValue(Bool.random(using: &random) ? try pick("Department") : nil, forKey: "department")
            case 7...8:
                // Deny: only departments without employees can go (here; elsewhere one may have gained some).
                if let department = try pick("Department"), try department.objects("employees").isEmpty { context.delete(department) }
            default:
                if let employee = try pick("Employee") { context.delete(employee) }
            }
        } else if workload == .company {
            switch Int.random(in: 0..<10, using: &random) {
            case 0...1:
                let company = try context.make("Company")
                try company.setValue(name, forKey: "name")
                try company.setValue(Bool.random(using: &random) ? "77\(Int.random(in: 0...9, using: &random))" : nil, forKey: "inn")
            case 2...4:
                let employee = try context.make("Employee")
                try employee.setValue(name, forKey: "firstName")
                try employee.setValue(try pick("Company"), forKey: "company")
            case 5...6:
                guard let employee = try pick("Employee") else { return }
                try employee.setValue(Bool.random(using: &random) ? try pick("Company") : nil, forKey: "company")
                try employee.setValue(name, forKey: "secondName")
            case 7:
                guard let company = try pick("Company") else { return }
                try company.setValue(name, forKey: "name")
            case 8:
                if let company = try pick("Company") { context.delete(company) }  // Cascade to its employees
            default:
                if let employee = try pick("Employee") { context.delete(employee) }  // Nullify
            }
        } else {
            switch Int.random(in: 0..<10, using: &random) {
            case 0...2:
                let person = try context.make("Person")
                // Sometimes nil over the model's default of 0: replicas must not bring the default back.
                try person.setValue(Int.random(in: 0..<4, using: &random) == 0 ? nil : Int64.random(in: 0...20, using: &random), forKey: "id")
                try person.setValue(name, forKey: "name")
                try person.setValue(try pick("Person"), forKey: "manager")
            case 3...4:
                guard let person = try pick("Person") else { return }
                if Bool.random(using: &random) {
                    try person.setValue(name, forKey: "name")
                } else {
                    try person.setValue(Int64.random(in: 0...20, using: &random), forKey: "id")
                }
            case 5...6:
                guard let person = try pick("Person") else { return }
                let manager = Bool.random(using: &random) ? try pick("Person") : nil
                try person.setValue(manager === person ? nil : manager, forKey: "manager")
            case 7:
                let organization = try context.make("Organization", ["id": Int16.random(in: 0...5, using: &random)])
                try organization.setValue(try pick("Person"), forKey: "leader")
            case 8:
                if let organization = try pick("Organization") { try organization.setValue(try pick("Person"), forKey: "leader") }
            default:
                if let person = try pick("Person") { context.delete(person) }  // Nullify: manager, employees, leader
            }
        }
    }

    /// The unique keys (constraint and values) that more than one object of a dump holds.
    static func duplicateKeys(in dump: [String], model: ManagedObjectModel) throws -> [String] {
        var seen: [String: Int] = [:]
        for line in dump {
            let json = try JSONValue.parse(line)
            guard let name = json["entity"]?.stringValue, let entity = model.entity(named: name) else { continue }
            for constraint in model.uniquenessConstraints(of: entity) {
                let values = constraint.properties.map { json["values"]?[$0] ?? .null }
                guard !values.contains(.null) else { continue }
                seen["\(constraint) " + values.map(\.text).joined(separator: ","), default: 0] += 1
            }
        }
        return seen.filter { $0.value > 1 }.map(\.key).sorted()
    }

    @Test("Random operations and exchanges converge", arguments: seeds)
    func converge(seed: UInt64) throws {
        var random = Generator(seed: seed)
        let workload: Workload = [.orgChart, .company, .departments, .playlists, .members][Int(seed % 5)]
        let model = switch workload {
        case .orgChart: Self.orgChart
        case .company: Self.company
        case .departments: Self.departments
        case .playlists: Self.playlists
        case .members: Self.members
        }
        // Store UUIDs from the seed too: they order origins and name objects, so a seed must fix them to replay exactly.
        // Every other replica merges without the direct-insert fast path, so the two paths must agree too;
        // replicas 0, 1 and 4 are SQLite stores, 2 and 3 in-memory ones, so the two stores must agree as well.
        let replicas = try (0..<(3 + Int(seed / 3 % 3))).map { index in
            try Replica(model: model, identifier: UUID(uuidString: String(format: "%08X-0000-4000-8000-%012X", UInt32(truncatingIfNeeded: seed), index)),
                        directInserts: index % 2 == 0, kind: index % 4 < 2 ? .sqlite : .memory)
        }
        // Local saves that duplicate a unique key upsert (an error would only lose the operation).
        for replica in replicas { replica.context.mergePolicy = .mergeByPropertyObjectTrump }
        // Signed, and every signature checked: repairs and merges recorded on the way are signed by their store.
        try Replica.trustEachOther(replicas)
        for _ in 0..<24 {
            if Int.random(in: 0..<3, using: &random) == 0 {
                let from = replicas.randomElement(using: &random)
                let to = replicas.randomElement(using: &random)
                if let from, let to, from !== to { try to.pull(from: from) }
                to?.context.reset()
            } else if let replica = replicas.randomElement(using: &random) {
                for _ in 0..<Int.random(in: 1...3, using: &random) { try randomOperation(&random, on: replica, workload: workload) }
                try replica.context.save()
            }
        }
        // Exchange until nothing new flows (delete propagation may add change sets on the way).
        let rounds = try Replica.exchangeUntilSettled(replicas)
        #expect(rounds < 10, "seed \(seed): exchanges did not settle")
        let dumps = try replicas.map { try $0.dump() }
        if ProcessInfo.processInfo.environment["FERRY_DEBUG"] == "all" {
            for (number, replica) in replicas.enumerated() {
                print("=== replica \(number) \(replica.store.identifier)")
                for line in try replica.store.changeSetLines() { print(line) }
                print("--- dump"); for line in dumps[number] { print(line) }
            }
        }
        for (index, dump) in dumps.enumerated().dropFirst() where dump != dumps[0] {
            let onlyHere = dump.filter { !dumps[0].contains($0) }
            let onlyThere = dumps[0].filter { !dump.contains($0) }
            if ProcessInfo.processInfo.environment["FERRY_DEBUG"] != nil {
                for (number, replica) in replicas.enumerated() {
                    print("=== replica \(number) \(replica.store.identifier)")
                    for line in try replica.store.changeSetLines() { print(line) }
                }
            }
            Issue.record("""
                seed \(seed): replica \(index) differs from replica 0.
                only in \(index):
                \(onlyHere.joined(separator: "\n"))
                only in 0:
                \(onlyThere.joined(separator: "\n"))
                """)
        }
        let vectors = try replicas.map { try $0.store.historyState().vector }
        #expect(Set(vectors).count == 1, "seed \(seed): every change set reached every replica")
        let duplicates = try Self.duplicateKeys(in: dumps[0], model: model)
        #expect(duplicates.isEmpty, "seed \(seed): duplicate unique keys \(duplicates)")
        let totalSets = vectors.first?.values.reduce(0, +) ?? 0
        for replica in replicas {
            #expect(try replica.store.changeSetLines().count == Int(totalSets), "seed \(seed): none lost, none twice")
            let quarantined = try replica.store.quarantinedChangeSets().map(\.reason)
            #expect(quarantined.isEmpty, "seed \(seed): \(quarantined)")
        }
    }
}
