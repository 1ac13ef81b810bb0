import Foundation
import Testing
import FerryModel
import FerryStore
import FerrySync
import FerryTestSupport

/// A peer cannot move a store's clock (issue 19, finding 1): a change set whose clock is
/// more than `HybridTimestamp.maximumSkew` ahead waits, held with why, and no clock
/// arithmetic overflows, wherever the clock stands.
@Suite("Clock bounds")
struct ClockBoundTests {
    static let model = try! SampleModels.load("OrgChart")

    func changeSet(origin: UUID, sequence: Int64 = 1, timestamp: HybridTimestamp) -> ChangeSet {
        ChangeSet(origin: origin, sequence: sequence, timestamp: timestamp, modelHash: Self.model.versionHash, changes: [
            ObjectChange(kind: .insert, uri: "x-coredata://\(origin.uuidString)/Person/p\(sequence)", entity: "Person",
                         values: ["name": .attribute(.string("from the future"))]),
        ])
    }

    @Test("A change set at the largest clock waits, held with why; the store's own saves go on at the wall clock", arguments: Replica.Kind.allCases)
    func largestClockWaits(kind: Replica.Kind) throws {
        let replica = try Replica(model: Self.model, kind: kind)
        let origin = UUID()
        let report = try replica.engine.apply([changeSet(origin: origin, timestamp: HybridTimestamp(rawValue: Int64.max))])
        #expect(report.applied == 0 && report.waiting == 1 && report.quarantined == 0)
        let held = try replica.store.heldChangeSets()
        #expect(held.count == 1 && held.first?.reason.contains("ahead of this store's") == true, "\(held)")
        #expect(try replica.dump().isEmpty)
        // The next one from that origin waits behind it; nothing moved this store's clock.
        #expect(try replica.engine.apply([changeSet(origin: origin, sequence: 2, timestamp: HybridTimestamp.wall(Date()))]).waiting == 1)
        try replica.context.make("Person", ["name": "local"])
        try replica.context.save()
        let own = try #require(try replica.store.changeSets().last)
        #expect(own.origin == replica.store.identifier)
        #expect(own.timestamp <= HybridTimestamp.latestAccepted(), "the local clock stayed near the wall clock: \(own.timestamp)")
    }

    @Test("Within the allowed skew a change set applies; beyond it, it waits until the clock catches up, then applies")
    func skew() throws {
        let replica = try Replica(model: Self.model)
        let soon = HybridTimestamp.wall(Date().addingTimeInterval(HybridTimestamp.maximumSkew / 2))
        #expect(try replica.engine.apply([changeSet(origin: UUID(), timestamp: soon)]).applied == 1)
        let origin = UUID()
        let later = HybridTimestamp.wall(Date().addingTimeInterval(HybridTimestamp.maximumSkew + 600))
        #expect(try replica.engine.apply([changeSet(origin: origin, timestamp: later)]).waiting == 1)
        // Eleven minutes on, the clock has caught up: the held change set applies on the next apply.
        replica.engine.now = { Date().addingTimeInterval(660) }
        #expect(try replica.engine.apply(lines: []).vector[origin] == 1)
        #expect(try replica.store.heldChangeSets().isEmpty)
    }

    @Test("No clock arithmetic overflows: the next tick after the largest clock, a wall clock far off, taking in any clock")
    func noOverflow() {
        let largest = HybridTimestamp(rawValue: Int64.max)
        #expect(HybridTimestamp.next(after: largest) == largest)
        #expect(HybridTimestamp.next(after: .zero, now: Date.distantFuture).rawValue > 0)
        #expect(HybridTimestamp.next(after: .zero, now: Date(timeIntervalSince1970: -1e12)) == HybridTimestamp(rawValue: 1))
        let now = Date()
        #expect(HybridTimestamp.taking(in: largest, after: .zero, now: now) == HybridTimestamp.latestAccepted(at: now))
        #expect(!largest.description.isEmpty)
    }
}
