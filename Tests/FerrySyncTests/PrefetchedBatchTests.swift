import Foundation
import Testing
import FerryModel
import FerryStore
import FerrySQLite
import FerrySync
import FerryTestSupport

/// A pull checks the peer's next batch while the store applies this one: a bad
/// batch fetched ahead must still be refused whole, after the batch before it
/// was applied, with the error a bad batch always gets.
@Suite("Pulling: the next batch is checked ahead", .timeLimit(.minutes(5)))
struct PrefetchedBatchTests {
    @Test("A bad line in the batch fetched ahead refuses that batch whole; the one before stays applied")
    func badBatchFetchedAhead() async throws {
        let directory = TemporaryDirectory()
        let model = try SampleModels.load("OrgChart")
        let origin = try SQLiteStore(path: directory.file("origin.sqlite"), model: model)
        let context = try PersistentContainer(store: origin).newContext()
        for index in 0..<3 {
            try context.make("Person", ["id": Int64(index), "name": "P\(index)"])
            try context.save()
        }
        let lines = try origin.changeSetLines()
        #expect(lines.count == 3)
        // A stand-in peer: the first two sets, then (asked after them) the third and a line that is no change set.
        let originID = origin.identifier.uuidString
        let peer = try StandInPeer { _, _, body in
            let answer = body.contains(originID) ? [lines[2], #"{"format":1,"changes":"none"}"#] : Array(lines[0..<2])
            return .init(contentType: "application/x-ndjson", body: answer.joined(separator: "\n") + "\n")
        }
        defer { peer.stop() }

        let local = try SQLiteStore(path: directory.file("local.sqlite"), model: model)
        let endpoint = try ReplicationEndpoint(store: local)
        let client = PeerClient(baseURL: try #require(URL(string: peer.url)), token: "unused", timeout: 60)
        let result = await PeerSync(name: "stand-in", endpoint: endpoint, client: client, batchSize: 2).run(push: false)

        #expect(result.pulled.applied == 2)
        guard case .badAnswer(let message, let cause)? = result.error else {
            Issue.record("expected a refused batch, got \(String(describing: result.error))")
            return
        }
        #expect(message.contains("the change sets it sent were refused here") && message.contains("line 2"), "\(message)")
        // The replay's refusal is kept as the cause, and the codec's under it.
        guard case .malformed(line: 2, let codecError)? = cause as? ReplayError else {
            Issue.record("the cause is not the replay's refusal of line 2: \(String(describing: cause))")
            return
        }
        #expect(codecError.codeName == "malformed" || codecError.codeName == "wrongType", "\(codecError)")
        // The first batch is in; nothing of the refused one (not even its good first line).
        #expect(try local.historyState().vector == [origin.identifier: 2])
        #expect(try local.changeSetLines() == Array(lines[0..<2]))
    }
}
