import Foundation
import Testing
import FerryModel
import FerryStore
import FerrySQLite
import FerrySync
import FerryTestSupport

/// One test per merge rule of docs/SYNC.md, each with two replicas that change
/// the same data concurrently and then exchange change sets in both orders,
/// on each kind of store (SQLite and in memory).
@Suite("Merge rules")
struct MergeRuleTests {
    static let orgChart = try! SampleModels.load("OrgChart")
    static let company = try! SampleModels.load("Company")
    static let departments = ConvergenceTests.departments

    /// Exchanges until neither replica takes in anything new.
    func exchange(_ a: Replica, _ b: Replica) throws {
        for _ in 0..<5 {
            let pulled = try b.pull(from: a).applied + a.pull(from: b).applied
            if pulled == 0 { break }
        }
        a.context.reset()
        b.context.reset()
    }

    /// Two replicas with the same starting data (made on `a`), and the origin URIs of the named objects.
    func pair(_ model: ManagedObjectModel, _ kind: Replica.Kind,
              setUp: (ManagedObjectContext) throws -> [String: ManagedObject]) throws -> (Replica, Replica, [String: String]) {
        let a = try Replica(model: model, kind: kind)
        let b = try Replica(model: model, kind: kind)
        let named = try setUp(a.context)
        try a.context.save()
        try b.pull(from: a)
        return (a, b, named.mapValues(\.objectID.uriString))
    }

    @Test("Double delivery and a repeated insert change nothing", arguments: Replica.Kind.allCases)
    func idempotence(kind: Replica.Kind) throws {
        let (a, b, _) = try pair(Self.orgChart, kind) { ["ann": try $0.make("Person", ["id": Int64(1), "name": "Ann"])] }
        let before = try b.dump()
        let all = try a.store.changeSetLines()
        let report = try b.engine.apply(lines: all + all)
        #expect(report.duplicate == 2 && report.applied == 0)
        #expect(try b.dump() == before)
    }

    @Test("Nullify: a reference made concurrently with the delete ends nil everywhere", arguments: Replica.Kind.allCases)
    func nullify(kind: Replica.Kind) throws {
        let (a, b, uris) = try pair(Self.orgChart, kind) { context in
            try Dictionary(uniqueKeysWithValues: ["Ann", "Bob", "Cid"].map { ($0, try context.make("Person", ["name": $0])) })
        }
        a.context.reset()
        let (annURI, bobURI, cidURI) = (uris["Ann"] ?? "", uris["Bob"] ?? "", uris["Cid"] ?? "")
        let ann = try #require(try a.object(annURI))
        try #require(try a.object(bobURI)).setValue(ann, forKey: "manager")
        try a.context.save()
        try b.pull(from: a)
        b.context.reset()
        // a deletes Ann; b, not knowing, makes her Cid's manager.
        a.context.delete(try #require(try a.object(annURI)))
        try a.context.save()
        try #require(try b.object(cidURI)).setValue(try b.object(annURI), forKey: "manager")
        try b.context.save()
        try exchange(a, b)
        #expect(try a.dump() == b.dump())
        let lines = try a.dump()
        #expect(lines.count == 2)
        #expect(lines.allSatisfy { $0.contains("\"manager\":null") })
    }

    @Test("Cascade: an employee added to a company deleted elsewhere is deleted everywhere, and stays deleted", arguments: Replica.Kind.allCases)
    func cascade(kind: Replica.Kind) throws {
        let (a, b, uris) = try pair(Self.company, kind) { ["Initech": try $0.make("Company", ["name": "Initech"])] }
        let initech = uris["Initech"] ?? ""
        a.context.delete(try #require(try a.object(initech)))
        try a.context.save()
        let milton = try b.context.make("Employee", ["firstName": "Milton", "company": try #require(try b.object(initech))])
        try b.context.save()
        let miltonURI = milton.objectID.uriString
        try b.pull(from: a)  // b: deleting Initech cascades to Milton here
        try a.pull(from: b)  // a: Milton refers to a deleted company with Cascade
        try exchange(a, b)
        #expect(try a.dump() == b.dump())
        #expect(try a.dump().isEmpty)
        // A late edit of Milton (made before b learned of the delete) changes nothing.
        let late = ChangeSet(origin: b.store.identifier, sequence: try b.store.historyState().vector[b.store.identifier, default: 0] + 1,
                             timestamp: HybridTimestamp.next(after: .zero), modelHash: Self.company.versionHash,
                             changes: [ObjectChange(kind: .update, uri: miltonURI, entity: "Employee", values: ["secondName": .attribute(.string("W"))])])
        #expect(try a.engine.apply([late]).applied == 1)
        #expect(try a.dump().isEmpty, "the tombstone keeps Milton deleted")
    }

    @Test("Deny: a delete refused elsewhere comes back, with the reference that refused it", arguments: Replica.Kind.allCases)
    func deny(kind: Replica.Kind) throws {
        let (a, b, uris) = try pair(Self.departments, kind) { ["Sales": try $0.make("Department", ["name": "Sales"])] }
        let sales = uris["Sales"] ?? ""
        a.context.delete(try #require(try a.object(sales)))
        try a.context.save()
        try b.context.make("Employee", ["name": "Eve", "department": try #require(try b.object(sales))])
        try b.context.save()
        try exchange(a, b)
        #expect(try a.dump() == b.dump())
        let lines = try a.dump()
        #expect(lines.count == 2, "Sales is back, with Eve")
        #expect(lines.contains { $0.contains("\"name\":\"Sales\"") && $0.contains(sales) })
        #expect(try a.store.changeSets().contains { $0.changes.contains { $0.kind == .restore && $0.uri == sales } })
        // Once Eve leaves, a new delete of Sales wins over the restores (it is newer).
        let eve = try #require(try a.context.fetch(FetchRequest(entityName: "Employee")).first)
        a.context.delete(eve)
        a.context.delete(try #require(try a.object(sales)))
        try a.context.save()
        try exchange(a, b)
        #expect(try a.dump() == b.dump())
        #expect(try b.dump().isEmpty)
    }

    @Test("Deny, other order: the replica that sees the reference first refuses the delete", arguments: Replica.Kind.allCases)
    func denyOtherOrder(kind: Replica.Kind) throws {
        let (a, b, uris) = try pair(Self.departments, kind) { ["Sales": try $0.make("Department", ["name": "Sales"])] }
        let sales = uris["Sales"] ?? ""
        a.context.delete(try #require(try a.object(sales)))
        try a.context.save()
        try b.context.make("Employee", ["name": "Eve", "department": try #require(try b.object(sales))])
        try b.context.save()
        let report = try b.pull(from: a)  // b refuses the delete and records a restore
        #expect(report.applied == 1 && report.quarantined == 0)
        #expect(try b.dump().count == 2)
        try exchange(a, b)
        #expect(try a.dump() == b.dump())
        #expect(try a.dump().count == 2)
    }

    @Test("Validation on replay: a change set that would break a rule is quarantined, listed, and applies on retry after a fix",
          arguments: Replica.Kind.allCases)
    func quarantine(kind: Replica.Kind) throws {
        // The receiving store allows at most two employees per company (a custom rule).
        let rule = EntityValidator(entityName: "Company") { object, _ in
            if try object.objects("employee").count > 2 {
                throw ValidationError(code: .custom, entityName: "Company", objectURI: object.objectID.uriString, key: "employee",
                                      message: "a company here has at most two employees")
            }
        }
        let a = try Replica(model: Self.company, kind: kind)
        let b = try Replica(model: Self.company, kind: kind)
        let strict = try PersistentContainer(store: b.store, validators: [rule])
        let engine = try ReplayEngine(container: strict)
        let acme = try a.context.make("Company", ["name": "Acme"])
        for name in ["Wile", "Road", "Bugs"] { try a.context.make("Employee", ["firstName": name, "company": acme]) }
        try a.context.save()
        let report = try engine.apply(lines: a.store.changeSetLines())
        #expect(report.quarantined == 1 && report.applied == 0)
        #expect(report.vector[a.store.identifier] == 1, "taken in, so it is not asked for again")
        let quarantined = try b.store.quarantinedChangeSets()
        #expect(quarantined.count == 1 && quarantined.first?.reason.contains("at most two employees") == true)
        #expect(try b.dump().isEmpty, "nothing of it applied")
        // Nothing is lost: the quarantined set is still in b's history, for other peers.
        #expect(try b.store.changeSetLines().count == 1)
        // After the fix (here: the plain engine, without the rule), a retry applies it.
        let retried = try b.engine.retryQuarantined()
        #expect(retried.applied == 1 && retried.quarantined == 0)
        #expect(try b.store.quarantinedChangeSets().isEmpty)
        #expect(try b.dump() == a.dump())
    }
}

@Suite("Merge rules: clocks")
struct ClockRuleTests {
    @Test("A winning write of the value already there still moves the clock, so an older write loses later", arguments: Replica.Kind.allCases)
    func sameValueWrite(kind: Replica.Kind) throws {
        let model = try SampleModels.load("OrgChart")
        let replica = try Replica(model: model, kind: kind)
        let x = UUID(uuidString: "00000000-0000-4000-8000-00000000000A") ?? UUID()
        let y = UUID(uuidString: "00000000-0000-4000-8000-00000000000B") ?? UUID()
        let person = "x-coredata://\(x.uuidString)/Person/p1"
        let organization = "x-coredata://\(x.uuidString)/Organization/p1"
        func at(_ time: Int64) -> HybridTimestamp { HybridTimestamp(rawValue: time << 16) }
        let insert = ChangeSet(origin: x, sequence: 1, timestamp: at(1_000), modelHash: model.versionHash, changes: [
            ObjectChange(kind: .insert, uri: person, entity: "Person", values: ["name": .attribute(.string("Ann"))]),
            ObjectChange(kind: .insert, uri: organization, entity: "Organization"),
        ])
        let clearsLate = ChangeSet(origin: x, sequence: 2, timestamp: at(5_000), modelHash: model.versionHash, changes: [
            ObjectChange(kind: .update, uri: organization, entity: "Organization", values: ["leader": .null]),
        ])
        let setsEarlier = ChangeSet(origin: y, sequence: 1, timestamp: at(3_000), modelHash: model.versionHash, dependencies: [x: 1], changes: [
            ObjectChange(kind: .update, uri: organization, entity: "Organization", values: ["leader": .object(person)]),
        ])
        #expect(try replica.engine.apply([insert, clearsLate, setsEarlier]).applied == 3)
        #expect(try replica.dump().contains { $0.contains("Organization") && $0.contains("\"leader\":null") }, "the later (unchanged) nil wins")
    }

    /// objc.io's Moody: a continent must have countries.
    static let moody = try! ManagedObjectModel {
        Entity("Continent") {
            Attribute("name", .string)
            Relationship("countries", to: "Country", inverse: "continent", toMany: true, optional: false, minCount: 1)
        }
        Entity("Country") {
            Attribute("name", .string)
            Relationship("continent", to: "Continent", inverse: "countries")
        }
    }

    @Test("Minimum counts: two deletes valid alone, invalid together: every replica brings back the newest-deleted member and records it",
          arguments: Replica.Kind.allCases)
    func minimumRepaired(kind: Replica.Kind) throws {
        let a = try Replica(model: Self.moody, kind: kind)
        let b = try Replica(model: Self.moody, kind: kind == .sqlite ? .memory : .sqlite)
        let europe = try a.context.make("Continent", ["name": "Europe"])
        let france = try a.context.make("Country", ["name": "France", "continent": europe])
        let spainObject = try a.context.make("Country", ["name": "Spain", "continent": europe])
        try a.context.save()
        // (A made them: their URIs are their origin URIs.)
        let franceURI = france.objectID.uriString, spainURI = spainObject.objectID.uriString
        try b.pull(from: a)
        // Each replica deletes a different country: each save leaves Europe one country.
        a.context.delete(france)
        try a.context.save()
        let spain = try #require(try b.context.fetch(FetchRequest(entityName: "Country", predicate: .equal("name", .attribute(.string("Spain"))))).first)
        b.context.delete(spain)
        try b.context.save()
        // The later delete (by clock, then origin) is the one undone: on the replica that made the
        // earlier one, by refusing it; on the other, from its own tombstone.
        func clock(of replica: Replica) throws -> (Int64, String) {
            let line = try JSONValue.parse(try #require(try replica.store.changeSetLines().last))
            return (try #require(line["hlc"]?.integerValue), try #require(line["origin"]?.stringValue))
        }
        let (kept, lost) = try clock(of: b) > clock(of: a) ? ("Spain", "France") : ("France", "Spain")
        let keptURI = kept == "Spain" ? spainURI : franceURI
        try a.pull(from: b)
        try b.pull(from: a)
        _ = try Replica.exchangeUntilSettled([a, b])
        let dump = try a.dump()
        #expect(dump == (try b.dump()))
        #expect(dump.count == 2 && dump.contains { $0.contains("\"name\":\"\(kept)\"") && $0.contains(europe.objectID.uriString) }, "\(dump)")
        #expect(!dump.contains { $0.contains("\"name\":\"\(lost)\"") })
        for replica in [a, b] {
            #expect(try replica.store.quarantinedChangeSets().isEmpty, "valid on its own: not quarantined")
            #expect(try replica.store.changeSetsLeftInvalid().isEmpty, "repaired, not left invalid")
            #expect(try replica.store.changeSetLines().contains { $0.contains("\"op\":\"restore\"") && $0.contains(keptURI) })
        }
    }

    /// Moody's many-to-many cousin: a club must have members, and the memberships are kept in a join
    /// table. `ownerHolds`: the club's side records the membership facts (`Club.members` sorts before
    /// `Person.clubs`); otherwise the members' side does (`Athlete.squads` sorts before `Squad.athletes`).
    static func clubs(ownerHolds: Bool) -> (model: ManagedObjectModel, owner: String, member: String, relationship: String) {
        let (owner, member, relationship, inverse) = ownerHolds ? ("Club", "Person", "members", "clubs") : ("Squad", "Athlete", "athletes", "squads")
        let model = try! ManagedObjectModel {
            Entity(owner) {
                Attribute("name", .string)
                Relationship(relationship, to: member, inverse: inverse, toMany: true, optional: false, minCount: 1)
            }
            Entity(member) {
                Attribute("name", .string)
                Relationship(inverse, to: owner, inverse: relationship, toMany: true)
            }
        }
        return (model, owner, member, relationship)
    }

    @Test("Many-to-many minimum counts: two deletes valid alone, not together; each replica restores the newest-deleted member with its memberships, any order",
          arguments: Replica.Kind.allCases, [true, false])
    func manyToManyMinimumRepaired(kind: Replica.Kind, ownerHolds: Bool) throws {
        let (model, ownerEntity, memberEntity, relationship) = Self.clubs(ownerHolds: ownerHolds)
        let other: Replica.Kind = kind == .sqlite ? .memory : .sqlite
        let a = try Replica(model: model, kind: kind)
        let b = try Replica(model: model, kind: other)
        let chess = try a.context.make(ownerEntity, ["name": "Chess"])
        let ann = try a.context.make(memberEntity, ["name": "Ann"])
        let bob = try a.context.make(memberEntity, ["name": "Bob"])
        try chess.mutableSetValue(forKey: relationship).insert(ann)
        try chess.mutableSetValue(forKey: relationship).insert(bob)
        try a.context.save()
        let chessURI = chess.objectID.uriString, annURI = ann.objectID.uriString, bobURI = bob.objectID.uriString
        // Two more replicas, to take the deletes in each order.
        let c = try Replica(model: model, kind: kind), d = try Replica(model: model, kind: other)
        for replica in [b, c, d] { try replica.pull(from: a) }
        // Each replica deletes a different member: each save leaves the club one.
        a.context.delete(ann)
        try a.context.save()
        b.context.delete(try b.context.existingObject(withURI: bobURI))
        try b.context.save()
        func clock(of replica: Replica) throws -> (Int64, String) {
            let line = try JSONValue.parse(try #require(try replica.store.changeSetLines().last))
            return (try #require(line["hlc"]?.integerValue), try #require(line["origin"]?.stringValue))
        }
        let (kept, lost, keptURI) = try clock(of: b) > clock(of: a) ? ("Bob", "Ann", bobURI) : ("Ann", "Bob", annURI)
        try c.pull(from: a)
        try c.pull(from: b)
        try d.pull(from: b)
        try d.pull(from: a)
        try a.pull(from: b)
        try b.pull(from: a)
        _ = try Replica.exchangeUntilSettled([a, b, c, d])
        let dump = try a.dump()
        for replica in [b, c, d] { #expect(try replica.dump() == dump) }
        #expect(dump.count == 2 && dump.contains { $0.contains("\"name\":\"\(kept)\"") } && !dump.contains { $0.contains("\"name\":\"\(lost)\"") },
                "\(dump)")
        for replica in [a, b, c, d] {
            replica.context.reset()
            let members = try replica.context.existingObject(withURI: chessURI).mutableSetValue(forKey: relationship).objects
            #expect(try members.map { try $0.value(forKey: "name") as? String } == [kept], "the club keeps the member brought back")
            #expect(try replica.store.quarantinedChangeSets().isEmpty, "valid on its own: not quarantined")
            #expect(try replica.store.changeSetsLeftInvalid().isEmpty, "repaired, not left invalid")
        }
        #expect(try [a, b].allSatisfy { try $0.store.changeSetLines().contains { $0.contains("\"op\":\"restore\"") && $0.contains(keptURI) } },
                "each of the two deleting replicas records the member's restore")
        // The deletes carried the memberships (format 2): the reason any replica could tell.
        let annDelete = try #require(try a.store.changeSetLines().first { $0.contains("\"op\":\"delete\"") })
        #expect(annDelete.contains("\"format\":2") && annDelete.contains(chessURI), "\(annDelete)")
    }

    /// A team of at most two players (the players hold the fact, as a to-one), and a club of at most
    /// two tags (many-to-many, the club holds the facts).
    static let teams = try! ManagedObjectModel {
        Entity("Team") {
            Attribute("name", .string)
            Relationship("players", to: "Player", inverse: "team", toMany: true, maxCount: 2)
        }
        Entity("Player") {
            Attribute("name", .string)
            Relationship("team", to: "Team", inverse: "players")
        }
        Entity("Club") {
            Attribute("name", .string)
            Relationship("tags", to: "Tag", inverse: "clubs", toMany: true, maxCount: 2)
        }
        Entity("Tag") {
            Attribute("name", .string)
            Relationship("clubs", to: "Club", inverse: "tags", toMany: true)
        }
    }

    @Test("Members past a maximum count: every replica removes the newest memberships, records it, and all converge within the maximum",
          arguments: Replica.Kind.allCases)
    func trimPastMaximum(kind: Replica.Kind) throws {
        let replicas = try (0..<3).map { index in try Replica(model: Self.teams, kind: index % 2 == 0 ? kind : (kind == .sqlite ? .memory : .sqlite)) }
        let team = try replicas[0].context.make("Team", ["name": "Reds"])
        try replicas[0].context.make("Player", ["name": "Ann", "team": team])
        let club = try replicas[0].context.make("Club", ["name": "Chess"])
        try replicas[0].context.make("Tag", ["name": "seed"]).mutableSetValue(forKey: "clubs").insert(club)
        try replicas[0].context.save()
        for replica in replicas.dropFirst() { try replica.pull(from: replicas[0]) }
        // Each replica adds a player of its own (a new object) and tags the club with a tag of its own
        // (a membership written on the club): each save is within the maximum of two.
        for (index, replica) in replicas.enumerated() {
            let reds = try replica.context.existingObject(withURI: team.objectID.uriString)
            try replica.context.make("Player", ["name": "P\(index)", "team": reds])
            try replica.context.save()
            let chess = try replica.context.existingObject(withURI: club.objectID.uriString)
            let tag = try replica.context.make("Tag", ["name": "T\(index)"])
            try chess.mutableSetValue(forKey: "tags").insert(tag)
            try replica.context.save()
        }
        try replicas[1].pull(from: replicas[2])
        try replicas[0].pull(from: replicas[1])
        _ = try Replica.exchangeUntilSettled(replicas)
        let dump = try replicas[0].dump()
        for replica in replicas.dropFirst() { #expect(try replica.dump() == dump) }
        for replica in replicas {
            #expect(try replica.store.changeSetsLeftInvalid().isEmpty, "repaired, not left invalid")
            #expect(try replica.store.quarantinedChangeSets().isEmpty)
        }
        // Every player joined at its own insert (no clock): the two whose URIs sort first stay.
        let playerURIs = dump.filter { $0.contains("\"entity\":\"Player\"") }
            .map { $0.components(separatedBy: "\"uri\":\"")[1].components(separatedBy: "\"")[0] }
            .sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
        let teamLine = try #require(dump.first { $0.contains("\"entity\":\"Team\"") })
        #expect(playerURIs.count == 4)
        #expect(playerURIs.prefix(2).allSatisfy(teamLine.contains) && !playerURIs.suffix(2).contains(where: teamLine.contains), "\(teamLine)")
        let tags = try #require(dump.first { $0.contains("\"entity\":\"Club\"") })
        #expect(tags.components(separatedBy: "Tag/p").count - 1 == 2, "\(tags)")
        #expect(tags.contains(try #require(dump.first { $0.contains("\"name\":\"seed\"") })
                                  .components(separatedBy: "\"uri\":\"")[1].components(separatedBy: "\"")[0]),
                "the seed tag's membership is the oldest: it stays")
        #expect(try replicas[0].store.changeSetLines().contains { $0.contains("\"author\":\"ferry-replay\"") && $0.contains("\"removed\"") },
                "the repair is recorded as a change set")
    }

    @Test("A Deny restore brings back the restored object's many-to-many memberships, on both sides", arguments: Replica.Kind.allCases)
    func denyRestoresMemberships(kind: Replica.Kind) throws {
        let model = ConvergenceTests.departments
        let a = try Replica(model: model, kind: kind)
        let b = try Replica(model: model, kind: kind == .sqlite ? .memory : .sqlite)
        let sales = try a.context.make("Department", ["name": "Sales"])
        let apollo = try a.context.make("Project", ["name": "Apollo"])
        try sales.mutableSetValue(forKey: "projects").insert(apollo)
        try a.context.save()
        try b.pull(from: a)
        // A deletes Sales (no employees there); B gives it an employee at the same time.
        a.context.delete(sales)
        try a.context.save()
        let bSales = try b.context.existingObject(withURI: sales.objectID.uriString)
        try b.context.make("Employee", ["name": "Eve", "department": bSales])
        try b.context.save()
        try a.pull(from: b)
        try b.pull(from: a)
        try a.pull(from: b)
        let dump = try a.dump()
        #expect(dump == (try b.dump()))
        let department = try #require(dump.first { $0.contains("\"entity\":\"Department\"") })
        #expect(department.contains(apollo.objectID.uriString), "Sales is back in Apollo: \(department)")
        #expect(dump.first { $0.contains("\"entity\":\"Project\"") }?.contains(sales.objectID.uriString) == true)
    }
}

extension MergeRuleTests {
    /// A country must have a continent; `rule` is the delete rule of `Continent.countries`.
    static func requiredContinent(_ rule: DeleteRule) -> ManagedObjectModel {
        try! ManagedObjectModel {
            Entity("Continent") {
                Attribute("name", .string)
                Relationship("countries", to: "Country", inverse: "continent", toMany: true, deleteRule: rule)
            }
            Entity("Country") {
                Attribute("name", .string)
                Relationship("continent", to: "Continent", inverse: "countries", optional: false)
            }
        }
    }

    /// A delete of Europe on `a` (it has no countries there) concurrent with a new country in Europe on
    /// `b`, exchanged both ways; returns Europe's origin URI.
    func deleteConcurrentWithRequiredReference(_ a: Replica, _ b: Replica) throws -> String {
        let europe = try a.context.make("Continent", ["name": "Europe"])
        try a.context.save()
        try b.pull(from: a)
        a.context.delete(europe)
        try a.context.save()
        try b.context.make("Country", ["name": "France", "continent": try b.context.existingObject(withURI: europe.objectID.uriString)])
        try b.context.save()
        try a.pull(from: b)
        try b.pull(from: a)
        _ = try Replica.exchangeUntilSettled([a, b])
        return europe.objectID.uriString
    }

    @Test("Required references: a delete whose Nullify leaves a required to-one nil is refused like a local save on any replica meeting it; object restored",
          arguments: Replica.Kind.allCases)
    func requiredReferenceKeepsItsObject(kind: Replica.Kind) throws {
        let model = Self.requiredContinent(.nullify)
        let a = try Replica(model: model, kind: kind), b = try Replica(model: model, kind: kind == .sqlite ? .memory : .sqlite)
        let europeURI = try deleteConcurrentWithRequiredReference(a, b)
        let dump = try a.dump()
        #expect(try b.dump() == dump)
        #expect(dump.count == 2 && dump.contains { $0.contains("\"name\":\"France\"") && $0.contains("\"continent\":\"\(europeURI)\"") }, "\(dump)")
        for replica in [a, b] {
            #expect(try replica.store.changeSetsLeftInvalid().isEmpty, "repaired, not left invalid")
            #expect(try replica.store.quarantinedChangeSets().isEmpty)
            #expect(try replica.store.changeSetLines().contains { $0.contains("\"op\":\"restore\"") && $0.contains(europeURI) },
                    "each replica records Europe's restore: A on meeting France, B on refusing the delete")
        }
    }

    @Test("Validation against concurrency: a required to-one No Action leaves nil applies everywhere, in any order, and is listed by the object's origin URI",
          arguments: Replica.Kind.allCases)
    func invalidTogether(kind: Replica.Kind) throws {
        let model = Self.requiredContinent(.noAction)
        let a = try Replica(model: model, kind: kind), b = try Replica(model: model, kind: kind == .sqlite ? .memory : .sqlite)
        _ = try deleteConcurrentWithRequiredReference(a, b)
        let dump = try a.dump()
        #expect(try b.dump() == dump)
        #expect(dump.count == 1 && dump[0].contains("\"continent\":null"), "France, without its continent: \(dump)")
        let franceURI = try #require(try JSONValue.parse(dump[0])["uri"]?.stringValue)
        var reasons: [String] = []
        for replica in [a, b] {
            #expect(try replica.store.quarantinedChangeSets().isEmpty, "valid on its own: not quarantined")
            let listed = try replica.store.changeSetsLeftInvalid()
            #expect(listed.count == 1)
            reasons += listed.map(\.reason)
            #expect(try replica.store.backlog() == Backlog(waiting: 0, quarantined: 0, leftInvalid: 1), "counted for status")
        }
        #expect(reasons.count == 2 && reasons[0] == reasons[1] && reasons[0].contains("Country.continent of \(franceURI)"), "\(reasons)")
    }

    /// A booking must not end before it starts: a rule of the application, not of the model.
    static let bookings = try! ManagedObjectModel {
        Entity("Booking") {
            Attribute("start", .integer64)
            Attribute("end", .integer64)
        }
    }

    @Test("Validation against concurrency: a custom validator refusing values last-writer-wins picked from two saves applies everywhere and is listed",
          arguments: Replica.Kind.allCases)
    func customValidatorLeftInvalid(kind: Replica.Kind) throws {
        struct EndsBeforeStart: Error, CustomStringConvertible { var description: String { "a booking ends after it starts" } }
        let validator = EntityValidator(entityName: "Booking", phases: [.insert, .update]) { object, _ in
            if let start = try object.value(forKey: "start") as? Int64, let end = try object.value(forKey: "end") as? Int64, end < start {
                throw EndsBeforeStart()
            }
        }
        let a = try Replica(model: Self.bookings, kind: kind, validators: [validator])
        let b = try Replica(model: Self.bookings, kind: kind == .sqlite ? .memory : .sqlite, validators: [validator])
        let booking = try a.context.make("Booking", ["start": Int64(1), "end": Int64(5)])
        try a.context.save()
        try b.pull(from: a)
        try booking.setValue(Int64(4), forKey: "start")  // 4…5: valid
        try a.context.save()
        try b.context.existingObject(withURI: booking.objectID.uriString).setValue(Int64(3), forKey: "end")  // 1…3: valid
        try b.context.save()
        try a.pull(from: b)
        try b.pull(from: a)
        let dump = try a.dump()
        #expect(try b.dump() == dump)
        #expect(dump.count == 1 && dump[0].contains("\"end\":3") && dump[0].contains("\"start\":4"), "\(dump)")
        for replica in [a, b] {
            #expect(try replica.store.quarantinedChangeSets().isEmpty, "each valid on its own")
            let listed = try replica.store.changeSetsLeftInvalid()
            #expect(listed.count == 1 && listed.first?.reason.contains("a booking ends after it starts") == true, "\(listed.map(\.reason))")
        }
    }
}
