import Foundation
import Testing
import FerryModel
import FerryStore
import FerrySQLite
import FerrySync
import FerryTestSupport

/// The store's replay write path (``ReplayWriter``), apart from the application's save: a replay is
/// recorded as the change set received, even with no row to write; an application's save records
/// a change set of the store's own, and an empty one records nothing.
@Suite("The replay write path")
struct ReplayWriterTests {
    static let model = try! SampleModels.load("OrgChart")

    @Test("A replay that writes no row is still recorded, under its origin; an empty application save records nothing",
          arguments: Replica.Kind.allCases)
    func rowlessReplay(kind: Replica.Kind) throws {
        let origin = try Replica(model: Self.model, kind: kind)
        try origin.context.make("Person", ["id": Int64(1), "name": "Ann"])
        try origin.context.save()
        let line = try #require(try origin.store.changeSetLines(after: [:], limit: nil).first)
        guard case .changeSet(let changeSet) = try ChangeSetCodec.decode(line, model: Self.model) else {
            Issue.record("not decodable")
            return
        }
        let replica = try Replica(model: Self.model, kind: kind)
        let before = try replica.store.historyState().vector

        // The application's path: nothing to write, nothing recorded.
        let empty = try replica.store.save(SaveRequest())
        #expect(empty.recordedSequence == nil && empty.permanentIDs.isEmpty)
        #expect(try replica.store.historyState().vector == before)

        // The replay's path: the change set is recorded as received (not as a change set of this
        // store), though no row was written.
        let result = try replica.store.saveReplay(SaveRequest(), recording: ReplayAnnotation(changeSet: changeSet, body: line))
        #expect(result.recordedSequence == nil, "a replay's record is not a change set of this store")
        let after = try replica.store.historyState().vector
        #expect(after[origin.store.identifier] == 1 && after[replica.store.identifier, default: 0] == before[replica.store.identifier, default: 0],
                "\(after)")
        #expect(try replica.store.changeSetLines(after: [:], limit: nil) == [line])
    }
}
