import Foundation
import Testing
import FerryModel
import FerryStore
import FerrySQLite
import FerrySync
import FerryTestSupport

/// Replicas that run different versions of one model for a while, as a fleet upgraded one
/// server at a time does: what an earlier version made is translated and applied; what a
/// later version made waits on a replica not yet upgraded and applies once it is; nothing stays
/// held, and the replicas converge.
@Suite("Replicas on different model versions")
struct ModelVersionSyncTests {
    static let version1 = try! ManagedObjectModel {
        Entity("Note") { Attribute("text", .string); Attribute("stars", .integer16); Attribute("scratch", .string) }
    }
    /// A rename (Renaming ID), a removal, a widened type, an optional and a required-with-default attribute.
    static let version2 = try! ManagedObjectModel {
        Entity("Note") {
            Attribute("body", .string, renamedFrom: "text"); Attribute("stars", .integer64)
            Attribute("color", .string); Attribute("kind", .string, optional: false, default: .string("plain"))
        }
    }

    /// A replica that can be upgraded to another model version: a SQLite file reopened with it,
    /// or an in-memory store migrated (``InMemoryStore/migrated(to:)``).
    final class Peer {
        let directory = TemporaryDirectory()
        var store: any ReplicaStore
        var engine: ReplayEngine
        var context: ManagedObjectContext

        init(model: ManagedObjectModel = ModelVersionSyncTests.version1, kind: Replica.Kind = .sqlite) throws {
            store = switch kind {
            case .sqlite: try SQLiteStore(path: directory.file("peer.sqlite"), model: model)
            case .memory: InMemoryStore(model: model)
            }
            engine = try ReplayEngine(store: store)
            context = try PersistentContainer(store: store).newContext()
        }

        /// Upgrades to `model` (version 2 unless told), `earlier` known as the earlier version.
        func upgrade(to model: ManagedObjectModel = ModelVersionSyncTests.version2, from earlier: ManagedObjectModel = ModelVersionSyncTests.version1) throws {
            if let file = store as? SQLiteStore {
                store = try SQLiteStore(path: file.path, model: model, options: .init(earlierModels: [earlier]))
            } else {
                store = try #require(store as? InMemoryStore).migrated(to: model)
            }
            engine = try ReplayEngine(store: store)
            context = try PersistentContainer(store: store).newContext()
        }

        /// The SQLite file's path (SQLite peers only).
        var path: String {
            get throws { try #require(store as? SQLiteStore).path }
        }

        /// Takes in what `other` has that this replica lacks (the context then reads the store afresh).
        @discardableResult
        func pull(from other: Peer) throws -> ApplyReport {
            defer { context.reset() }
            return try engine.apply(lines: other.store.changeSetLines(after: store.historyState().vector, limit: nil))
        }

        func note(_ field: String, _ text: String, entity: String = "Note") throws -> ManagedObject {
            try #require(try context.fetch(FetchRequest(entityName: entity)).first { try $0.value(forKey: field) as? String == text })
        }

        func dump() throws -> [String] {
            var lines: [String] = []
            try StoreDump(store: store).write { lines.append($0) }
            return lines
        }
    }

    @Test("A rolling upgrade of two replicas with writes throughout: translated one way, waiting the other, converged with nothing held",
          arguments: Replica.Kind.allCases)
    func rollingUpgrade(kind: Replica.Kind) throws {
        let a = try Peer(kind: kind), b = try Peer(kind: kind)
        try a.context.make("Note", ["text": "a1", "stars": Int16(1), "scratch": "x"])
        try a.context.save()
        try b.context.make("Note", ["text": "b1", "stars": Int16(2)])
        try b.context.save()
        try a.pull(from: b)
        try b.pull(from: a)

        // B is upgraded first; both keep writing.
        try b.upgrade()
        try b.context.make("Note", ["body": "b2", "stars": Int64(5), "color": "red"])
        try b.note("body", "a1").setValue("a1, edited on b", forKey: "body")
        try b.context.save()
        try a.context.make("Note", ["text": "a2", "stars": Int16(3)])
        try a.note("text", "b1").setValue(Int16(7), forKey: "stars")
        try a.context.save()

        // A's version-1 change sets are read in version 2 on B and applied, not held.
        let onB = try b.pull(from: a)
        #expect(onB.applied == 1 && onB.waiting == 0, "\(onB)")
        #expect(try b.store.heldChangeSets().isEmpty)
        #expect(try b.note("body", "a2").value(forKey: "kind") as? String == "plain")
        #expect(try b.note("body", "b1").value(forKey: "stars") as? Int64 == 7)
        // B's version-2 change sets wait on A, saying why.
        let onA = try a.pull(from: b)
        #expect(onA.waiting == 1 && onA.applied == 0, "\(onA)")
        let held = try a.store.heldChangeSets()
        #expect(held.count == 1 && held[0].reason.contains("does not know that version"), "\(held.map(\.reason))")
        #expect(try a.store.backlog().waitingForModel == 1)

        // A is upgraded: what waited applies, and nothing stays held on either side.
        try a.upgrade()
        for _ in 0..<3 {
            try a.pull(from: b)
            try b.pull(from: a)
        }
        #expect(try a.store.heldChangeSets().isEmpty && b.store.heldChangeSets().isEmpty)
        #expect(try a.store.backlog().waitingForModel == 0)
        #expect(try a.note("body", "a1, edited on b").value(forKey: "kind") as? String == "plain")
        #expect(try a.note("body", "b2").value(forKey: "color") as? String == "red")
        let dump = try a.dump()
        #expect(dump.count == 4)
        #expect(try b.dump() == dump)
    }

    @Test("Last writer wins across a rename: the clocks of a renamed property move with it, so an older write made before the rename does not win",
          arguments: Replica.Kind.allCases)
    func clocksFollowRenames(kind: Replica.Kind) throws {
        let a = try Peer(kind: kind), b = try Peer(kind: kind)
        try a.context.make("Note", ["text": "base"])
        try a.context.save()
        try b.pull(from: a)
        try a.note("text", "base").setValue("from a", forKey: "text")
        try a.context.save()
        Thread.sleep(forTimeInterval: 0.005)  // (clocks count milliseconds: two stores' saves in one would tie, settled by origin)
        try b.note("text", "base").setValue("from b", forKey: "text")  // later: the winner
        try b.context.save()
        try b.upgrade()
        try b.pull(from: a)  // a's older write, translated to `body`
        try a.pull(from: b)
        try a.upgrade()
        for _ in 0..<2 {
            try a.pull(from: b)
            try b.pull(from: a)
        }
        let onB = try b.dump()
        #expect(onB.count == 1 && onB[0].contains(#""body":"from b""#), "the later write lost on the replica upgraded first: \(onB)")
        #expect(try a.dump() == b.dump())
    }

    @Test("After an upgrade the store's own history reads in the new version: earlier change sets come translated, none dropped")
    func historyReadsTranslated() throws {
        let a = try Peer()
        try a.context.make("Note", ["text": "one", "stars": Int16(2), "scratch": "x"])
        try a.context.save()
        try a.upgrade()
        try a.context.make("Note", ["body": "two"])
        try a.context.save()
        let sets = try #require(a.store as? SQLiteStore).changeSets()
        #expect(sets.count == 2 && sets.allSatisfy { $0.modelHash == Self.version2.versionHash })
        #expect(sets.first?.changes.first?.values["body"] == .attribute(.string("one")))
        #expect(sets.first?.changes.first?.values["scratch"] == nil)
    }

    static let cards1 = try! ManagedObjectModel {
        Entity("Card") { Attribute("title", .string); Relationship("deck", to: "Deck", inverse: "cards") }
        Entity("Deck") { Attribute("name", .string); Relationship("cards", to: "Card", inverse: "deck", toMany: true) }
    }
    /// `Card.deck` made to-many (many-to-many; Card's side writes the join table).
    static let cards2 = try! ManagedObjectModel {
        Entity("Card") { Attribute("title", .string); Relationship("decks", to: "Deck", inverse: "cards", toMany: true, renamedFrom: "deck") }
        Entity("Deck") { Attribute("name", .string); Relationship("cards", to: "Card", inverse: "decks", toMany: true) }
    }

    @Test("To-one made to-many: old-version to-one write replaces older members, even one an upgraded replica added concurrently, arriving later; newer stay",
          arguments: Replica.Kind.allCases)
    func toOneMadeToMany(kind: Replica.Kind) throws {
        let a = try Peer(model: Self.cards1, kind: kind), b = try Peer(model: Self.cards1, kind: kind), c = try Peer(model: Self.cards1, kind: kind)
        for name in ["X", "Y", "Z", "W"] { try a.context.make("Deck", ["name": name]) }
        let card = try a.context.make("Card", ["title": "card"])
        try card.setValue(try a.note("name", "X", entity: "Deck"), forKey: "deck")
        try a.context.save()
        try b.pull(from: a)
        try c.pull(from: a)
        try b.upgrade(to: Self.cards2, from: Self.cards1)
        try c.upgrade(to: Self.cards2, from: Self.cards1)
        // B (upgraded) adds deck Z; then A (not yet), knowing nothing of it, moves the card to Y; then C adds W.
        try b.note("title", "card", entity: "Card").mutableSetValue(forKey: "decks").insert(try b.note("name", "Z", entity: "Deck"))
        try b.context.save()
        // (Clocks count milliseconds: two stores' saves in one would tie, settled by origin.)
        Thread.sleep(forTimeInterval: 0.005)
        try a.note("title", "card", entity: "Card").setValue(try a.note("name", "Y", entity: "Deck"), forKey: "deck")
        try a.context.save()
        Thread.sleep(forTimeInterval: 0.005)
        try c.pull(from: a)  // C takes A's move first: X goes, Y comes
        try c.note("title", "card", entity: "Card").mutableSetValue(forKey: "decks").insert(try c.note("name", "W", entity: "Deck"))
        try c.context.save()
        // B takes A's move after its own add of Z (older than the move: Z goes too), C's W after.
        for peer in [b, c] {
            try peer.pull(from: a)
            try peer.pull(from: b)
            try peer.pull(from: c)
        }
        #expect(try a.pull(from: b).waiting > 0, "version-2 change sets wait on A")
        try a.upgrade(to: Self.cards2, from: Self.cards1)
        for _ in 0..<3 { for to in [a, b, c] { for from in [a, b, c] where from !== to { try to.pull(from: from) } } }
        for peer in [a, b, c] {
            #expect(try peer.store.heldChangeSets().isEmpty && peer.store.quarantinedChangeSets().isEmpty)
            let decks = try (peer.note("title", "card", entity: "Card").value(forKey: "decks") as? Set<ManagedObject> ?? [])
                .map { try $0.value(forKey: "name") as? String ?? "" }
            #expect(decks.sorted() == ["W", "Y"], "\(decks.sorted())")
        }
        #expect(try a.dump() == b.dump())
        #expect(try b.dump() == c.dump())
    }

    @Test("To-one writes of the earlier version older than a later version's add of the same member leave it (found by the randomised test)",
          arguments: Replica.Kind.allCases)
    func olderReplaceKeepsNewerMember(kind: Replica.Kind) throws {
        let a = try Peer(model: Self.cards1, kind: kind), b = try Peer(model: Self.cards1, kind: kind)
        for name in ["X", "Y"] { try a.context.make("Deck", ["name": name]) }
        try a.context.make("Card", ["title": "card"])
        try a.context.save()
        try b.pull(from: a)
        // b moves the card to Y, then out of any deck; both before a's add of Y, which a makes upgraded
        // and before it hears of them. Reading the first write must not make a's later fact of Y older.
        try b.note("title", "card", entity: "Card").setValue(try b.note("name", "Y", entity: "Deck"), forKey: "deck")
        try b.context.save()
        Thread.sleep(forTimeInterval: 0.003)
        try b.note("title", "card", entity: "Card").setValue(nil, forKey: "deck")
        try b.context.save()
        Thread.sleep(forTimeInterval: 0.003)
        try a.upgrade(to: Self.cards2, from: Self.cards1)
        try a.note("title", "card", entity: "Card").mutableSetValue(forKey: "decks").insert(try a.note("name", "Y", entity: "Deck"))
        try a.context.save()
        try a.pull(from: b)
        let decks = try (a.note("title", "card", entity: "Card").value(forKey: "decks") as? Set<ManagedObject> ?? [])
            .map { try $0.value(forKey: "name") as? String ?? "" }
        #expect(decks == ["Y"])
    }

    /// Seeds of the randomised rolling upgrade through a to-one made to-many: 12, `FERRY_TO_MANY_SOAK=N` runs N,
    /// `FERRY_TO_MANY_SEED=S` one (timing differs per run: clocks are wall time); `FERRY_DEBUG=1` prints each replica's change sets when they differ.
    static let toManySeeds: [UInt64] = ProcessInfo.processInfo.environment["FERRY_TO_MANY_SEED"].flatMap(UInt64.init).map { [$0] }
        ?? (1...UInt64(max(ProcessInfo.processInfo.environment["FERRY_TO_MANY_SOAK"].flatMap(Int.init) ?? 12, 1))).map { $0 }

    @Test("Random to-one writes of the earlier version, membership edits of the later one, upgrades and exchanges in any order converge",
          arguments: Replica.Kind.allCases)
    func toOneMadeToManyRandomised(kind: Replica.Kind) throws {
        for seed in Self.toManySeeds {
            var random = SeededGenerator(seed: seed)
            let peers = try (0..<3).map { _ in try Peer(model: Self.cards1, kind: kind) }
            var upgraded = [false, false, false]
            let decks = ["D0", "D1", "D2", "D3"], cards = ["K0", "K1", "K2"]
            for name in decks { try peers[0].context.make("Deck", ["name": name]) }
            for name in cards { try peers[0].context.make("Card", ["title": name]) }
            try peers[0].context.save()
            for peer in peers.dropFirst() { try peer.pull(from: peers[0]) }
            for _ in 0..<30 {
                let index = Int.random(in: 0..<3, using: &random)
                let peer = peers[index]
                switch Int.random(in: 0..<10, using: &random) {
                case 0 where !upgraded[index]:
                    try peer.upgrade(to: Self.cards2, from: Self.cards1)
                    upgraded[index] = true
                case 0...5:
                    let card = try peer.note("title", cards[Int.random(in: 0..<cards.count, using: &random)], entity: "Card")
                    let deck = try peer.note("name", decks[Int.random(in: 0..<decks.count, using: &random)], entity: "Deck")
                    if !upgraded[index] {
                        // The earlier version's to-one: moved to a deck, or out of any.
                        try card.setValue(Bool.random(using: &random) ? deck : nil, forKey: "deck")
                    } else if Bool.random(using: &random) {
                        try card.mutableSetValue(forKey: "decks").insert(deck)
                    } else {
                        try card.mutableSetValue(forKey: "decks").remove(deck)
                    }
                    try peer.context.save()
                default:
                    let other = (index + Int.random(in: 1..<3, using: &random)) % 3
                    try peer.pull(from: peers[other])
                }
            }
            for (index, peer) in peers.enumerated() where !upgraded[index] { try peer.upgrade(to: Self.cards2, from: Self.cards1) }
            for _ in 0..<4 { for to in peers { for from in peers where from !== to { try to.pull(from: from) } } }
            let dumps = try peers.map { try $0.dump() }
            if dumps[0] != dumps[1] || dumps[1] != dumps[2], ProcessInfo.processInfo.environment["FERRY_DEBUG"] != nil {
                for (index, peer) in peers.enumerated() {
                    print("DEBUG peer \(index) store \(peer.store.identifier.uuidString.prefix(4))")
                    for line in try peer.store.changeSetLines(after: [:], limit: nil) { print("DEBUG   " + line) }
                }
            }
            #expect(dumps[0] == dumps[1] && dumps[1] == dumps[2],
                    "seed \(seed) (\(kind)): the replicas differ\n\(dumps.map { $0.joined(separator: "\n") }.joined(separator: "\n--\n"))")
            for peer in peers {
                #expect(try peer.store.heldChangeSets().isEmpty && peer.store.quarantinedChangeSets().isEmpty, "seed \(seed)")
            }
        }
    }

    static let linked = try! ManagedObjectModel {
        Entity("Note") {
            Attribute("text", .string); Attribute("stars", .integer16); Attribute("scratch", .string)
            Relationship("parent", to: "Note", inverse: "children"); Relationship("children", to: "Note", inverse: "parent", toMany: true)
        }
    }
    static let linkedRenamed = try! ManagedObjectModel {
        Entity("Memo", renamedFrom: "Note") {
            Attribute("text", .string); Attribute("stars", .integer16); Attribute("scratch", .string)
            Relationship("parent", to: "Memo", inverse: "children"); Relationship("children", to: "Memo", inverse: "parent", toMany: true)
        }
    }

    @Test("A tombstone buried before an entity rename is still found by the object it names, under its new URI")
    func tombstonesAcrossEntityRename() throws {
        let a = try Peer(model: Self.linked)
        let parent = try a.context.make("Note", ["text": "parent"])
        let child = try a.context.make("Note", ["text": "child"])
        try child.setValue(parent, forKey: "parent")
        try a.context.save()
        a.context.delete(child)
        try a.context.save()
        let parentURI = parent.objectID.uriString.replacingOccurrences(of: "/Note/", with: "/Memo/")
        let childURI = child.objectID.uriString.replacingOccurrences(of: "/Note/", with: "/Memo/")
        let store = try SQLiteStore(path: try a.path, model: Self.linkedRenamed, options: .init(earlierModels: [Self.linked]))
        let found = try store.tombstones(referringTo: parentURI)
        #expect(Set(found.keys) == [childURI], "\(found)")
        #expect(found[childURI]?.entity == "Memo" && found[childURI]?.names(parentURI) == true)
    }

    @Test("An entity renamed between versions: URIs follow the rename on every replica; change sets translate both ways of the upgrade; replicas converge",
          arguments: Replica.Kind.allCases)
    func entityRename(kind: Replica.Kind) throws {
        let renamed = Self.linkedRenamed, withLinks = Self.linked
        let a = try Peer(model: withLinks, kind: kind), b = try Peer(model: withLinks, kind: kind)
        let root = try a.context.make("Note", ["text": "root"])
        try a.context.save()
        try b.pull(from: a)
        try b.note("text", "root").setValue("root, edited on b", forKey: "text")
        try b.context.save()
        try a.pull(from: b)
        func upgrade(_ peer: Peer) throws { try peer.upgrade(to: renamed, from: withLinks) }
        try upgrade(b)
        // B (renamed) links a new memo under A's root; A (not yet) adds a child of its own.
        let child = try b.context.make("Memo", ["text": "from b"])
        try child.setValue(try b.note("text", "root, edited on b", entity: "Memo"), forKey: "parent")
        try b.context.save()
        let late = try a.context.make("Note", ["text": "from a"])
        try late.setValue(try a.note("text", "root, edited on b"), forKey: "parent")
        try a.context.save()
        let onB = try b.pull(from: a)
        #expect(onB.applied == 1 && onB.waiting == 0, "\(onB)")
        #expect(try a.pull(from: b).waiting == 1)
        try upgrade(a)
        for _ in 0..<2 {
            try a.pull(from: b)
            try b.pull(from: a)
        }
        #expect(try a.store.heldChangeSets().isEmpty && b.store.heldChangeSets().isEmpty)
        let dump = try a.dump(), other = try b.dump()
        #expect(dump == other, "\(dump)\n\(other)")
        #expect(dump.count == 3 && dump.allSatisfy { $0.contains(#""entity":"Memo""#) && !$0.contains("/Note/") }, "\(dump)")
        let rootURI = root.objectID.uriString.replacingOccurrences(of: "/Note/", with: "/Memo/")
        #expect(dump.first { $0.contains(#""uri":"\#(rootURI)""#) }?.contains("children") == true)
        let children = try a.note("text", "root, edited on b", entity: "Memo").value(forKey: "children") as? Set<ManagedObject>
        #expect(children?.count == 2)
    }
}
