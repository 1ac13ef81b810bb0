import Foundation
import Testing
import FerryModel
import FerryStore
import FerrySQLite
import FerrySync
import FerrySigning
import FerryTestSupport

/// Signed change sets (issue 23, docs/SYNC.md "Signed change sets"), on both stores: what a store
/// records is signed by it, and a change set that does not prove its origin is refused before
/// anything of its batch applies — then the genuine change sets still apply and the replicas converge.
@Suite("Signed change sets")
struct SignedChangeSetTests {
    static let model = MergeRuleTests.orgChart

    /// A and B, each holding the other's key and taking no other origin.
    func pair(_ kind: Replica.Kind) throws -> (Replica, Replica) {
        let a = try Replica(model: Self.model, kind: kind)
        let b = try Replica(model: Self.model, kind: kind)
        try Replica.trustEachOther([a, b])
        return (a, b)
    }

    /// A saves Ann (its change set 1, which B takes in), then renames her (its change set 2, not sent yet).
    func annRenamed(_ a: Replica, _ b: Replica) throws -> (genuine: String, annURI: String) {
        let ann = try a.context.make("Person", ["id": Int64(1), "name": "Ann"])
        try a.context.save()
        try b.pull(from: a)
        try ann.setValue("Ann Smith", forKey: "name")
        try a.context.save()
        let lines = try a.store.changeSetLines(after: [:], limit: nil)
        #expect(lines.count == 2)
        return (try #require(lines.last), ann.objectID.uriString)
    }

    /// The refusal `body` ends in (nil when it applies).
    func refusal(_ body: () throws -> ApplyReport) -> TrustRefusal? {
        do {
            _ = try body()
            return nil
        } catch ReplayError.untrusted(_, let refusal) {
            return refusal
        } catch {
            Issue.record("not a trust refusal: \(error)")
            return nil
        }
    }

    /// What `store` publishes in its state (as `GET /v1/state` does).
    static func state(of store: any ReplicaStore) throws -> HistoryState {
        var state = try store.historyState()
        state.keys = try store.originKeys().map(PublishedKey.init)
        state.publicKey = try store.originKeys().last { $0.origin == store.identifier }?.publicKey
        return state
    }

    @Test("What a store records is signed over the line's bytes before the signature; the fast reader reads it, and encoding keeps it",
          arguments: Replica.Kind.allCases)
    func recordedLinesAreSigned(kind: Replica.Kind) throws {
        let (a, _) = try pair(kind)
        try a.context.make("Person", ["id": Int64(1), "name": "Ann"])
        try a.context.save()
        let line = try #require(try a.store.changeSetLines(after: [:], limit: nil).first)
        #expect(line.hasSuffix("\"}") && line.contains(#","seq":1,"sig":""#), "\(line)")
        let decoded = try #require(ChangeSetCodec.decodeCanonical(line, model: Self.model, versionHash: nil), "the canonical reader refused a signed line")
        guard case .changeSet(let changeSet) = decoded else { Issue.record("\(decoded)"); return }
        #expect(changeSet.signature != nil && ChangeSetCodec.encode(changeSet) == line)
        let publicKey = try #require(a.signingKey).publicKey
        let key = try #require(VerifyingKey(base64: publicKey))
        let cut = try #require(line.range(of: #","sig""#))
        let signed = String(line[..<cut.lowerBound])
        let signature = try #require(changeSet.signature)
        #expect(key.isValid(signature: signature, of: Data(signed.utf8)))
        #expect(!key.isValid(signature: signature, of: Data(signed.replacingOccurrences(of: "Ann", with: "Anne").utf8)))
    }

    @Test("A large save (its signature begun beside the rows' writes, on the inserts' text) is signed exactly as in one step")
    func largeSaveSignedInAdvance() throws {
        let a = try Replica(model: Self.model)
        for id in 0..<500 { try a.context.make("Person", ["id": Int64(id), "name": "P\(id)"]) }
        try a.context.save()
        let line = try #require(try a.store.changeSetLines(after: [:], limit: nil).first)
        #expect(line.utf8.count > 20_000)
        // Ed25519 signatures are deterministic: the same key over the same bytes gives the same line.
        #expect(try SignedLines.signed(line, with: try #require(a.signingKey)) == line)
        let b = try Replica(model: Self.model)
        try Replica.trustEachOther([a, b])
        #expect(try b.pull(from: a).applied == 1)
    }

    @Test("A change set naming A's origin and next sequence number, signed with another key, is refused; A's genuine one applies afterwards",
          arguments: Replica.Kind.allCases)
    func forgedOrigin(kind: Replica.Kind) throws {
        let (a, b) = try pair(kind)
        let (genuine, _) = try annRenamed(a, b)
        let before = try b.dump()
        let mallory = StoreSigningKey()
        let forged = try SignedLines.edited(genuine, resignedWith: mallory) { $0.replacingOccurrences(of: "Ann Smith", with: "Mallory") }
        let refused = refusal { try b.engine.apply(lines: [forged]) }
        #expect(refused?.reason == .badSignature && refused?.origin == a.store.identifier && refused?.sequence == 2, "\(String(describing: refused))")
        #expect(try b.dump() == before && b.store.historyState().vector[a.store.identifier] == 1, "the forgery applied or advanced the vector")
        #expect(try b.store.heldChangeSets().isEmpty && b.store.quarantinedChangeSets().isEmpty, "the forgery was kept")
        // The genuine change set 2 is not taken for a duplicate.
        #expect(try b.pull(from: a).applied == 1)
        #expect(try a.dump() == b.dump())
    }

    @Test("An altered body, the genuine change set under another sequence number, and one without its signature are refused", arguments: Replica.Kind.allCases)
    func alteredRenumberedUnsigned(kind: Replica.Kind) throws {
        let (a, b) = try pair(kind)
        let (genuine, _) = try annRenamed(a, b)
        let before = try b.dump()
        let altered = genuine.replacingOccurrences(of: "Ann Smith", with: "Ann Smyth")
        let renumbered = genuine.replacingOccurrences(of: #""seq":2,"#, with: #""seq":3,"#)
        #expect(altered != genuine && renumbered != genuine)
        #expect(refusal { try b.engine.apply(lines: [altered]) }?.reason == .badSignature)
        #expect(refusal { try b.engine.apply(lines: [renumbered]) }?.reason == .badSignature)
        #expect(refusal { try b.engine.apply(lines: [SignedLines.unsigned(genuine)]) }?.reason == .unsigned)
        // A bad line refuses its whole batch, the genuine change set with it.
        #expect(refusal { try b.engine.apply(lines: [genuine, renumbered]) }?.sequence == 3)
        #expect(try b.dump() == before && b.store.historyState().vector[a.store.identifier] == 1)
        #expect(try b.engine.apply(lines: [genuine]).applied == 1)
        #expect(try a.dump() == b.dump())
    }

    @Test("An origin whose key is not known is refused; a store that takes unknown origins applies it, and still checks known ones",
          arguments: Replica.Kind.allCases)
    func unknownOrigins(kind: Replica.Kind) throws {
        let (a, b) = try pair(kind)
        let stranger = try Replica(model: Self.model, kind: kind)
        try stranger.context.make("Person", ["id": Int64(7), "name": "Sam"])
        try stranger.context.save()
        let line = try #require(try stranger.store.changeSetLines(after: [:], limit: nil).first)
        let refused = refusal { try b.engine.apply(lines: [line]) }
        #expect(refused?.reason == .unknownOrigin && refused?.origin == stranger.store.identifier)
        // `trust.unknown_origins: accept` (a fleet moving to signatures).
        let lenient = try ReplayEngine(container: b.container, trust: OriginTrust(store: b.store, policy: .init(unknownOrigins: .accept)))
        #expect(try lenient.apply(lines: [line]).applied == 1)
        let (genuine, _) = try annRenamed(a, b)
        let tampered = genuine.replacingOccurrences(of: "Ann Smith", with: "Eve")
        #expect(refusal { try lenient.apply(lines: [tampered]) }?.reason == .badSignature)
    }

    @Test("A revoked key: change sets it signed at or after the revocation time are refused, earlier ones apply", arguments: Replica.Kind.allCases)
    func revokedKey(kind: Replica.Kind) throws {
        let (a, b) = try pair(kind)
        try a.context.make("Person", ["id": Int64(1), "name": "Before"])
        try a.context.save()
        usleep(5_000)  // (clocks count milliseconds)
        let revokedAt = HybridTimestamp.wall(Date())
        usleep(5_000)
        try a.context.make("Person", ["id": Int64(2), "name": "After"])
        try a.context.save()
        let key = try #require(a.signingKey).publicKey
        let policy = OriginTrust.Policy(revocations: [.init(origin: a.store.identifier, publicKey: key, after: revokedAt)],
                                        unknownOrigins: .refuse, trustsPeersOnFirstUse: false)
        let engine = try ReplayEngine(container: b.container, trust: OriginTrust(store: b.store, policy: policy))
        let lines = try a.store.changeSetLines(after: [:], limit: nil)
        #expect(try engine.apply(lines: [lines[0]]).applied == 1)
        let refused = refusal { try engine.apply(lines: [lines[1]]) }
        #expect(refused?.reason == .revokedKey && refused?.sequence == 2, "\(String(describing: refused))")
        #expect(try b.dump().count == 1)
        // Revoked in the store instead (`ferry trust revoke`): the same.
        var held = try #require(try b.store.originKeys().first { $0.origin == a.store.identifier })
        held.revokedAfter = revokedAt
        try b.store.recordOriginKey(held)
        try b.engine.trust.reload()
        #expect(refusal { try b.engine.apply(lines: [lines[1]]) }?.reason == .revokedKey)
    }

    @Test("First use takes a configured peer's own key from its state, never a key it presents for another store", arguments: Replica.Kind.allCases)
    func firstUse(kind: Replica.Kind) throws {
        let (a, b) = try pair(kind)
        let c = try Replica(model: Self.model, kind: kind)
        let trust = try OriginTrust(store: c.store, policy: .init())
        let events = try trust.learn(from: Self.state(of: b.store), peer: "b")
        #expect(events.count == 1, "\(events)")
        let held = try c.store.originKeys().filter { $0.origin != c.store.identifier }
        #expect(held.map(\.origin) == [b.store.identifier] && held.first?.source == .firstUse)
        // B's change sets now apply on C; A's (B publishes A's key) do not.
        try b.context.make("Person", ["id": Int64(2), "name": "Bea"])
        try b.context.save()
        try a.context.make("Person", ["id": Int64(1), "name": "Ann"])
        try a.context.save()
        let engine = try ReplayEngine(container: c.container, trust: trust)
        #expect(try engine.apply(lines: b.store.changeSetLines(after: [:], limit: nil)).applied == 1)
        #expect(refusal { try engine.apply(lines: a.store.changeSetLines(after: [:], limit: nil)) }?.reason == .unknownOrigin)
        // With first use off, nothing is learned.
        let d = try Replica(model: Self.model, kind: kind)
        #expect(try OriginTrust(store: d.store, policy: .init(trustsPeersOnFirstUse: false)).learn(from: Self.state(of: b.store), peer: "b").isEmpty)
    }

    @Test("Rotation: new key, endorsed by the old, is learned from the origin or any holder; checks change sets from its first number; unendorsed key refused")
    func rotation() throws {
        let directory = TemporaryDirectory()
        let path = directory.file("a.sqlite")
        let first = StoreSigningKey()
        var a: SQLiteStore? = try SQLiteStore(path: path, model: Self.model, options: .init(signingKey: first))
        let origin = try #require(a).identifier
        var context = try PersistentContainer(store: try #require(a)).newContext()
        try context.make("Person", ["id": Int64(1), "name": "One"])
        try context.save()
        // `ferry key rotate`: the new key signs from 2 on, endorsed by the first.
        let second = StoreSigningKey()
        let endorsement = try first.signature(of: ChangeSetSignature.rotationMessage(origin: origin, firstSequence: 2, publicKey: second.publicKey))
        try #require(a).recordOriginKey(OriginKey(origin: origin, publicKey: second.publicKey, firstSequence: 2, endorsement: endorsement, source: .own))
        // A process still holding the first key cannot save any more.
        try context.make("Person", ["id": Int64(9), "name": "Stale"])
        #expect(throws: (any Error).self) { try context.save() }
        context.rollback()
        a = nil
        let rotated = try SQLiteStore(path: path, model: Self.model, options: .init(signingKey: second))
        context = try PersistentContainer(store: rotated).newContext()
        try context.make("Person", ["id": Int64(2), "name": "Two"])
        try context.save()
        let lines = try rotated.changeSetLines(after: [:], limit: nil)
        #expect(lines.count == 2)

        // B trusted the first key (first use): change set 1 applies, 2 is refused until B learns the rotation.
        let b = try Replica(model: Self.model)
        try b.store.recordOriginKey(OriginKey(origin: origin, publicKey: first.publicKey, firstSequence: 1, source: .firstUse))
        let trust = try OriginTrust(store: b.store, policy: .init())
        let engine = try ReplayEngine(container: b.container, trust: trust)
        #expect(try engine.apply(lines: [lines[0]]).applied == 1)
        #expect(refusal { try engine.apply(lines: [lines[1]]) }?.reason == .badSignature)
        // A state carrying a key without a valid endorsement (an impostor) teaches nothing.
        var impostor = try Self.state(of: rotated)
        let fake = StoreSigningKey()
        impostor.keys = [PublishedKey(origin: origin, key: fake.publicKey, from: 2,
                                      endorsement: try fake.signature(of: ChangeSetSignature.rotationMessage(origin: origin, firstSequence: 2,
                                                                                                               publicKey: fake.publicKey)))]
        impostor.publicKey = fake.publicKey
        let conflict = try trust.learn(from: impostor, peer: "a")
        let conflicts = conflict.filter { event in
            if case .conflict = event { return true }
            return false
        }
        #expect(conflict.count == 1 && conflicts.count == 1, "\(conflict)")
        #expect(try b.store.originKeys().filter { $0.origin == origin }.count == 1)
        // The genuine state: the rotation is taken, and change set 2 applies.
        let learned = try trust.learn(from: Self.state(of: rotated), peer: "a")
        let newest = try b.store.originKeys().last { $0.origin == origin }
        #expect(learned.count == 1 && newest?.source == .rotation, "\(learned)")
        #expect(try engine.apply(lines: [lines[1]]).applied == 1)
        // The first key no longer signs numbers from 2 on.
        let oldKeyForgery = try SignedLines.edited(lines[1], resignedWith: first) { $0.replacingOccurrences(of: #""seq":2"#, with: #""seq":3"#) }
        #expect(refusal { try engine.apply(lines: [oldKeyForgery]) }?.reason == .badSignature)

        // C, which trusted A's first key but never talks to A, learns the rotation from B's state.
        let c = try Replica(model: Self.model)
        try c.store.recordOriginKey(OriginKey(origin: origin, publicKey: first.publicKey, firstSequence: 1, source: .pinned))
        let cTrust = try OriginTrust(store: c.store, policy: .init())
        let taught = try cTrust.learn(from: Self.state(of: b.store), peer: "b")
        #expect(taught.contains { event in
            if case .learned(let key, _) = event { return key.publicKey == second.publicKey }
            return false
        })
        #expect(try ReplayEngine(container: c.container, trust: cTrust).apply(lines: lines).applied == 2)
        #expect(try c.dump() == b.dump())
    }

    @Test("A store made before keys: its change sets from before its first key apply unsigned; from there on they must be signed")
    func storeMadeBeforeKeys() throws {
        let directory = TemporaryDirectory()
        let path = directory.file("old.sqlite")
        var old: SQLiteStore? = try SQLiteStore(path: path, model: Self.model)
        if case .unsigned = try #require(old).signing {} else { Issue.record("a store without a key file signs") }
        var context = try PersistentContainer(store: try #require(old)).newContext()
        for id in 1...2 {
            try context.make("Person", ["id": Int64(id), "name": "Old \(id)"])
            try context.save()
        }
        old = nil
        // Upgraded: the store gets its key (as `ferry run` makes one) and signs from its change set 3 on.
        let key = StoreSigningKey()
        let upgraded = try SQLiteStore(path: path, model: Self.model, options: .init(signingKey: key))
        #expect(try upgraded.originKeys().map(\.firstSequence) == [3])
        context = try PersistentContainer(store: upgraded).newContext()
        try context.make("Person", ["id": Int64(3), "name": "New"])
        try context.save()
        let lines = try upgraded.changeSetLines(after: [:], limit: nil)
        #expect(lines.map { $0.contains(#""sig":"#) } == [false, false, true])

        // A peer that learns its key (first use) takes all three, and refuses an unsigned fourth.
        let b = try Replica(model: Self.model)
        let trust = try OriginTrust(store: b.store, policy: .init())
        try trust.learn(from: Self.state(of: upgraded), peer: "old")
        let engine = try ReplayEngine(container: b.container, trust: trust)
        #expect(try engine.apply(lines: lines).applied == 3)
        let fourth = SignedLines.unsigned(lines[2]).replacingOccurrences(of: #""seq":3"#, with: #""seq":4"#)
        #expect(refusal { try engine.apply(lines: [fourth]) }?.reason == .unsigned)
        // And a process without the key cannot save on the upgraded store any more.
        let keyless = try SQLiteStore(path: path, model: Self.model)
        if case .unavailable(let reason) = keyless.signing {
            #expect(reason.contains(key.publicKey))
        } else {
            Issue.record("a store with a key opened without it signs or records unsigned")
        }
        let keylessContext = try PersistentContainer(store: keyless).newContext()
        try keylessContext.make("Person", ["id": Int64(5), "name": "Unsigned"])
        let refusal = #expect(throws: (any Error).self) { try keylessContext.save() }
        #expect("\(String(describing: refusal))".contains("nothing was saved") && "\(String(describing: refusal))".contains(key.publicKey))
    }

    @Test("A key other than the store's is refused at open; the store's own key opens it")
    func wrongKeyAtOpen() throws {
        let directory = TemporaryDirectory()
        let path = directory.file("a.sqlite")
        let key = StoreSigningKey()
        _ = try SQLiteStore(path: path, model: Self.model, options: .init(signingKey: key))
        #expect(throws: StoreError.self) { try SQLiteStore(path: path, model: Self.model, options: .init(signingKey: StoreSigningKey())) }
        _ = try SQLiteStore(path: path, model: Self.model, options: .init(signingKey: key))
    }
}
