import Foundation
import Testing
import FerryModel
import FerryStore
import FerryTestSupport

/// The in-memory store keeps no history, so it cannot take a replayed change set: it refuses
/// one instead of writing its rows and dropping what makes replicas converge (it used to).
@Suite("In-memory store and replays")
struct InMemoryReplayTests {
    @Test("A replaying save is refused with what to use instead, and writes nothing")
    func replayRefused() throws {
        let container = try PersistentContainer(store: InMemoryStore(model: try SampleModels.load("OrgChart")))
        let context = container.newContext()
        try context.make("Person", ["name": "Ann"])
        let changeSet = ChangeSet(origin: UUID(), sequence: 1, timestamp: HybridTimestamp(rawValue: 1),
                                  modelHash: "m", changes: [])
        do {
            try context.save(replaying: ReplayAnnotation(changeSet: changeSet, body: "{}"))
            Issue.record("the in-memory store took a replayed change set")
        } catch .storeFailed(let failure) {
            #expect(failure.message.contains("keeps no history") && failure.message.contains("SQLiteStore"), "\(failure)")
        } catch {
            Issue.record("expected a store failure, got \(error)")
        }
        #expect(try container.newContext().count(for: FetchRequest(entityName: "Person")) == 0)
        // An ordinary save still works.
        try context.save()
        #expect(try container.newContext().count(for: FetchRequest(entityName: "Person")) == 1)
    }
}
