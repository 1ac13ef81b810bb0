import Foundation
import Testing
import FerryModel
import FerryStore
import FerrySync
import FerrySigning
import FerryTestSupport

/// An object URI names the store where the object was inserted (issue 19, finding 3):
/// a peer cannot insert under another store's namespace, cannot reach a row of the
/// receiver by its number when that row holds an object from elsewhere, and cannot
/// write under the receiver's own origin.
@Suite("Object URIs and origins")
struct NamespaceTests {
    static let model = try! SampleModels.load("OrgChart")

    func changeSet(_ origin: UUID, _ sequence: Int64 = 1, _ changes: [ObjectChange]) -> ChangeSet {
        ChangeSet(origin: origin, sequence: sequence, timestamp: HybridTimestamp(rawValue: Int64(Date().timeIntervalSince1970 * 1000) << 16),
                  modelHash: Self.model.versionHash, changes: changes)
    }

    @Test("An insert under another store's namespace is refused with the batch, nothing applied", arguments: Replica.Kind.allCases)
    func insertOutsideItsOrigin(kind: Replica.Kind) throws {
        let replica = try Replica(model: Self.model, kind: kind)
        let forger = UUID()
        let own = "x-coredata://\(replica.store.identifier.uuidString)/Person/p2"
        let line = ChangeSetCodec.encode(changeSet(forger, 1, [ObjectChange(kind: .insert, uri: own, entity: "Person",
                                                                            values: ["name": .attribute(.string("forged"))])]))
        #expect {
            try replica.engine.apply(lines: [line])
        } throws: { error in
            "\(error)".contains("an insert must name an object of its change set's origin") && "\(error)".contains("nothing was applied")
        }
        #expect(try replica.dump().isEmpty && replica.store.historyState().vector.isEmpty)
    }

    @Test("A URI in the receiver's namespace does not reach a row that holds an object from elsewhere", arguments: Replica.Kind.allCases)
    func ownNumberOfAForeignRow(kind: Replica.Kind) throws {
        let replica = try Replica(model: Self.model, kind: kind)
        // Row 1 of Person here holds an object born on store `third`.
        let third = UUID()
        let thirds = "x-coredata://\(third.uuidString)/Person/p7"
        #expect(try replica.engine.apply([changeSet(third, 1, [ObjectChange(kind: .insert, uri: thirds, entity: "Person",
                                                                            values: ["name": .attribute(.string("Thea"))])])]).applied == 1)
        // Another peer updates "this store's Person p1": no object of this store has that name.
        let own = "x-coredata://\(replica.store.identifier.uuidString)/Person/p1"
        let report = try replica.engine.apply([changeSet(UUID(), 1, [ObjectChange(kind: .update, uri: own, entity: "Person",
                                                                                  values: ["name": .attribute(.string("renamed"))])])])
        #expect(report.quarantined == 1 && report.applied == 0)
        #expect(try replica.store.quarantinedChangeSets().first?.reason.contains(own) == true)
        #expect(try replica.store.backlog() == Backlog(waiting: 0, quarantined: 1))
        let dump = try replica.dump()
        #expect(dump.contains { $0.contains(thirds) && $0.contains("Thea") }, "\(dump)")
        #expect(try replica.store.localObjectID(forOriginURI: own) == nil)
    }

    @Test("A change set under the receiver's own origin is held, never applied (refused when unsigned)", arguments: Replica.Kind.allCases)
    func ownOrigin(kind: Replica.Kind) throws {
        let replica = try Replica(model: Self.model, kind: kind)
        let me = replica.store.identifier
        let unsigned = ChangeSetCodec.encode(changeSet(me, 1, [ObjectChange(kind: .insert, uri: "x-coredata://\(me.uuidString)/Person/p1", entity: "Person",
                                                                             values: ["name": .attribute(.string("planted"))])]))
        // Unsigned: the store signs all it records, so this is no change set of its own.
        #expect(throws: ReplayError.self) { try replica.engine.apply(lines: [unsigned]) }
        // Signed with its own key (a store restored from a backup of itself, say): held.
        let line = try SignedLines.signed(unsigned, with: try #require(replica.signingKey))
        let report = try replica.engine.apply(lines: [line])
        #expect(report.applied == 0 && report.waiting == 1)
        #expect(try replica.store.heldChangeSets().first?.reason.contains("own origin") == true)
        #expect(try replica.dump().isEmpty && replica.store.historyState().vector.isEmpty)
        // The store's own next save is its sequence 1, and the planted one stays held.
        try replica.context.make("Person", ["name": "mine"])
        try replica.context.save()
        #expect(try replica.store.historyState().vector == [me: 1])
        #expect(try replica.dump().count == 1 && replica.dump()[0].contains("mine"))
    }
}
