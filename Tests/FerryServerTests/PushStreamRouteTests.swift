import Foundation
import Testing
import Hummingbird
import HummingbirdTesting
import NIOCore
import FerryModel
import FerryStore
import FerrySQLite
import FerrySync
import FerryTestSupport
@testable import FerryServer

/// `POST /v1/changesets/stream` as a peer meets it (docs/PROTOCOL.md, "Push streams"): batches
/// applied in order and answered line by line, a refused batch answered by an error line that
/// ends the stream, the token's role and origins, the batch bound. Through Hummingbird's router
/// test client, which sends the whole body at once (the client's stream, batch after batch over
/// a live connection, is `PushStreamClientTests`).
@Suite("Push stream route")
struct PushStreamRouteTests {
    static let peerToken = "peer-token-0123456789abcdef"
    static let pullToken = "pull-token-0123456789abcdef"
    static let originToken = "origin-token-0123456789abcdef"
    static let model = try! SampleModels.load("OrgChart")
    static let allowedOrigin = UUID()

    let directory = TemporaryDirectory()
    let store: SQLiteStore
    let app: Application<RouterResponder<FerryRequestContext>>

    init() throws {
        store = try SQLiteStore(path: directory.file("served.sqlite"), model: Self.model)
        let tokens = AccessTokens(grants: [(Self.peerToken, .init(role: .peer)), (Self.pullToken, .init(role: .pull)),
                                           (Self.originToken, .init(role: .peer, pushOrigins: [Self.allowedOrigin]))])
        let api = FerryAPI(endpoint: try ReplicationEndpoint(store: store), tokens: tokens, maxBodyBytes: 4096)
        app = Application(router: api.router())
    }

    /// A change set of `origin` inserting one person, as a peer sends it.
    func line(_ origin: UUID, _ sequence: Int, name: String) -> String {
        let id = origin.uuidString
        return #"{"changes":[{"entity":"Person","op":"insert","uri":"x-coredata://\#(id)/Person/p\#(sequence)","values":{"name":"\#(name)"}}],"# +
            #""format":1,"hlc":\#(113000000000000000 + sequence),"model":"\#(store.modelVersionHash)","origin":"\#(id)","seq":\#(sequence)}"#
    }

    /// Each batch's lines, each batch ended by an empty line.
    func body(_ batches: [[String]]) -> ByteBuffer {
        ByteBuffer(string: batches.map { $0.map { $0 + "\n" }.joined() + "\n" }.joined())
    }

    func stream(_ body: ByteBuffer, token: String = Self.peerToken) async throws -> (status: Int, lines: [String]) {
        let response = try await app.test(.router) { client in
            try await client.execute(uri: "/v1/changesets/stream", method: .post,
                                     headers: [.authorization: "Bearer \(token)", .contentType: "application/x-ndjson"], body: body)
        }
        return (Int(response.status.code), String(buffer: response.body).split(separator: "\n").map(String.init))
    }

    func names() throws -> [String] {
        let container = try PersistentContainer(store: store)
        let context = container.newContext()
        let people = try context.fetch(FetchRequest(entityName: "Person"))
        return try people.compactMap { try $0.value(forKey: "name") as? String }.sorted()
    }

    @Test("Each batch is applied in order and answered by its own report line; a batch sent again is a duplicate")
    func batchesAnsweredInOrder() async throws {
        let origin = UUID()
        let answer = try await stream(body([[line(origin, 1, name: "Ann")], [line(origin, 2, name: "Bob"), line(origin, 3, name: "Cid")],
                                            [line(origin, 1, name: "Ann")]]))
        #expect(answer.status == 200)
        let reports = try answer.lines.map { try WireJSON.decode(ApplyReport.self, from: Data($0.utf8)) }
        #expect(reports.map(\.applied) == [1, 2, 0], "\(answer.lines)")
        #expect(reports.map(\.duplicate) == [0, 0, 1])
        #expect(reports.map { $0.vector[origin] } == [1, 3, 3])
        #expect(try names() == ["Ann", "Bob", "Cid"])
    }

    @Test("A refused batch gets one error line with the status a push would get, and nothing after it is read")
    func refusedBatchEndsTheStream() async throws {
        let origin = UUID()
        let answer = try await stream(body([[line(origin, 1, name: "Ann")], [#"{"format":1,"#], [line(origin, 2, name: "Bob")]]))
        #expect(answer.status == 200)
        #expect(answer.lines.count == 2, "\(answer.lines)")
        let refusal = try WireJSON.decode(ErrorMessage.self, from: Data(answer.lines[1].utf8))
        #expect(refusal.error.status == 400 && refusal.error.message.contains("line 1"), "\(refusal)")
        #expect(try names() == ["Ann"])
    }

    @Test("A batch without its empty line at the end of the body is not applied: its sender had no answer for it")
    func unfinishedBatchIsDropped() async throws {
        let origin = UUID()
        let whole = body([[line(origin, 1, name: "Ann")]])
        var cut = whole
        cut.writeString(line(origin, 2, name: "Bob") + "\n")
        let answer = try await stream(cut)
        #expect(answer.lines.count == 1 && answer.lines[0].contains(#""applied":1"#), "\(answer.lines)")
        #expect(try names() == ["Ann"])
    }

    @Test("The token's role and origins hold on a stream: a pull token is refused (403); another origin's batch gets a 403 line")
    func tokensHold() async throws {
        let refused = try await stream(body([[line(Self.allowedOrigin, 1, name: "Ann")]]), token: Self.pullToken)
        #expect(refused.status == 403)
        #expect(try await stream(body([[line(Self.allowedOrigin, 1, name: "Ann")]]), token: "not-a-token").status == 401)
        let answer = try await stream(body([[line(Self.allowedOrigin, 1, name: "Ann")], [line(UUID(), 1, name: "Eve")]]), token: Self.originToken)
        #expect(answer.lines.count == 2, "\(answer.lines)")
        let refusal = try WireJSON.decode(ErrorMessage.self, from: Data(answer.lines[1].utf8))
        #expect(refusal.error.status == 403, "\(refusal)")
        #expect(try names() == ["Ann"])
    }

    @Test("A batch over server.max_body_bytes gets a 413 line")
    func batchBound() async throws {
        let origin = UUID()
        var big = ByteBuffer(string: line(origin, 1, name: String(repeating: "a", count: 5000)))
        big.writeString("\n\n")
        let answer = try await stream(big)
        #expect(answer.status == 200)
        let refusal = try WireJSON.decode(ErrorMessage.self, from: Data(answer.lines.first?.utf8 ?? "".utf8))
        #expect(refusal.error.status == 413 && refusal.error.message.contains("max_body_bytes"), "\(refusal)")
        #expect(try names() == [])
    }

    @Test("A stream request without a body is refused with 400")
    func noBody() async throws {
        let response = try await app.test(.router) { client in
            try await client.execute(uri: "/v1/changesets/stream", method: .post, headers: [.authorization: "Bearer \(Self.peerToken)"])
        }
        #expect(response.status == .badRequest && String(buffer: response.body).contains("empty line"), "\(response.status)")
    }
}
