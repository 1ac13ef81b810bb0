import Foundation
import Testing
import FerryModel
import FerryStore
import FerrySync
import FerryTestSupport

/// A bound on origins and a way to remove bogus ones (issue 19, finding 2).
@Suite("Origin bound")
struct OriginBoundTests {
    static let model = try! SampleModels.load("OrgChart")

    func changeSet(_ origin: UUID, _ sequence: Int64 = 1) -> ChangeSet {
        ChangeSet(origin: origin, sequence: sequence, timestamp: HybridTimestamp(rawValue: Int64(Date().timeIntervalSince1970 * 1000) << 16),
                  modelHash: Self.model.versionHash, changes: [])
    }

    @Test("Past the bound a new origin's change sets are held with why; known origins go on; removing one frees a place", arguments: Replica.Kind.allCases)
    func boundAndRemoval(kind: Replica.Kind) throws {
        let replica = try Replica(model: Self.model, kind: kind)
        replica.engine.maximumOrigins = 3
        let origins = (0..<4).map { _ in UUID() }
        #expect(try replica.engine.apply(origins.prefix(3).map { changeSet($0) }).applied == 3)
        let report = try replica.engine.apply([changeSet(origins[3]), changeSet(origins[0], 2)])
        #expect(report.applied == 1 && report.waiting == 1, "\(report)")
        #expect(try replica.store.heldChangeSets().first?.reason.contains("sync.max_origins") == true)
        #expect(try replica.store.backlog() == Backlog(waiting: 1, quarantined: 0))
        // The operator removes a bogus origin: its history and place go, and the held one gets in.
        #expect(try replica.store.removeOrigin(origins[1]) == 1)
        #expect(try replica.store.historyState().vector[origins[1]] == nil)
        #expect(try replica.engine.apply(lines: []).vector[origins[3]] == 1)
        // A store's own origin cannot be removed.
        #expect(throws: HistoryError.ownOrigin(replica.store.identifier)) { try replica.store.removeOrigin(replica.store.identifier) }
    }
}
