import Foundation
import Testing
import Hummingbird
import Logging
import NIOCore
import FerryModel
import FerryStore
import FerrySQLite
import FerrySync
import FerryTestSupport

/// A pull checks the peer's next batch while the store applies this one: a bad
/// batch fetched ahead must still be refused whole, after the batch before it
/// was applied, with the error a bad batch always gets.
@Suite("Pulling: the next batch is checked ahead", .timeLimit(.minutes(2)))
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
        let router = Router()
        let originID = origin.identifier.uuidString
        router.get("v1/changesets") { request, _ -> Response in
            let after = request.uri.queryParameters.get("after") ?? "{}"
            let answer = after.contains(originID) ? [lines[2], #"{"format":1,"changes":"none"}"#] : Array(lines[0..<2])
            return Response(status: .ok, headers: [.contentType: "application/x-ndjson"],
                            body: .init(byteBuffer: ByteBuffer(string: answer.joined(separator: "\n") + "\n")))
        }
        let (ports, announce) = AsyncStream.makeStream(of: Int.self)
        var quiet = Logger(label: "stand-in-peer")
        quiet.logLevel = .critical  // (it logs its own cancellation at the end as an error)
        let app = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
                              onServerRunning: { announce.yield($0.localAddress?.port ?? 0) }, logger: quiet)

        let local = try SQLiteStore(path: directory.file("local.sqlite"), model: model)
        let endpoint = try ReplicationEndpoint(store: local)
        let result = try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await app.run() }
            defer { group.cancelAll() }
            var iterator = ports.makeAsyncIterator()
            let port = try #require(await iterator.next())
            let client = PeerClient(baseURL: try #require(URL(string: "http://127.0.0.1:\(port)/")), token: "unused", timeout: 10)
            return await PeerSync(name: "stand-in", endpoint: endpoint, client: client, batchSize: 2).run(push: false)
        }

        #expect(result.pulled.applied == 2)
        guard case .badAnswer(let message)? = result.error else {
            Issue.record("expected a refused batch, got \(String(describing: result.error))")
            return
        }
        #expect(message.contains("the change sets it sent were refused here") && message.contains("line 2"), "\(message)")
        // The first batch is in; nothing of the refused one (not even its good first line).
        #expect(try local.historyState().vector == [origin.identifier: 2])
        #expect(try local.changeSetLines() == Array(lines[0..<2]))
    }
}
