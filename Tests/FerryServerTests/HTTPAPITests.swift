import Foundation
import Testing
import CompressNIO
import Hummingbird
import HummingbirdTesting
import NIOCore
import FerryModel
import FerryStore
@testable import FerrySQLite
import FerrySync
import FerryTestSupport
@testable import FerryServer

/// The HTTP API's routes as a peer or an operator meets them: authentication, pull
/// limits and bounds, pushes refused whole, methods, body limits, encodings. In
/// process, through Hummingbird's router test client, over a SQLite store with two
/// change sets of history. (They ran against a `ferry run` process before; that the
/// daemon serves this API is checked by `InProcessDaemonTests` and the process-level
/// replication tests.)
@Suite("HTTP API")
struct HTTPAPITests {
    static let peerToken = "peer-token-0123456789abcdef"
    static let adminToken = "admin-token-0123456789abcdef"
    static let model = try! SampleModels.load("OrgChart")

    let directory = TemporaryDirectory()
    let store: SQLiteStore
    let app: Application<RouterResponder<FerryRequestContext>>

    init() throws {
        store = try SQLiteStore(path: directory.file("served.sqlite"), model: Self.model)
        let context = try PersistentContainer(store: store).newContext()
        let ann = try context.make("Person", ["id": Int64(1), "name": "Ann"])
        try context.make("Person", ["id": Int64(2), "name": "Bob", "manager": ann])
        try context.save()
        try context.make("Person", ["id": Int64(3), "name": "Cid"])
        try context.save()
        let document = StatusDocument(store: store.identifier, model: store.modelVersionHash, peers: [])
        let api = FerryAPI(endpoint: try ReplicationEndpoint(store: store),
                           tokens: AccessTokens([(Self.peerToken, .peer), (Self.adminToken, .admin)]),
                           maxBodyBytes: 64 << 20, control: NoPeers(document: document))
        app = Application(router: api.router())
    }

    /// A daemon without peers: its status document, and empty sync rounds.
    struct NoPeers: DaemonControl {
        let document: StatusDocument
        func status() async -> StatusDocument { document }
        func sync(peer: String?) async -> SyncNowOutcome {
            if let peer { return .unknownPeer(peer) }
            return .ran(SyncNowAnswer([]))
        }
    }

    struct Answer {
        let status: Int
        let body: String
        let headers: HTTPFields
        let bytes: ByteBuffer
    }

    func request(_ method: HTTPRequest.Method, _ path: String, token: String? = nil, body: ByteBuffer? = nil,
                 headers: HTTPFields = [:]) async throws -> Answer {
        var authorized = headers
        if let token { authorized[.authorization] = "Bearer \(token)" }
        let fields = authorized
        let response = try await app.test(.router) { client in
            try await client.execute(uri: path, method: method, headers: fields, body: body)
        }
        return Answer(status: Int(response.status.code), body: String(buffer: response.body), headers: response.headers, bytes: response.body)
    }

    func dump() throws -> [String] {
        var lines: [String] = []
        try StoreDump(store: store).write { lines.append($0) }
        return lines
    }

    @Test("healthz needs no token; every /v1 route needs a known one: 401 without detail")
    func authentication() async throws {
        #expect(try await request(.get, "/healthz").status == 200)
        for (method, path) in [(HTTPRequest.Method.get, "/v1/state"), (.get, "/v1/changesets"), (.post, "/v1/changesets"), (.get, "/v1/status"),
                               (.post, "/v1/sync")] {
            for token in [nil, "wrong-token-0123456789", Self.peerToken + "x", String(Self.peerToken.dropLast())] {
                let answer = try await request(method, path, token: token)
                #expect(answer.status == 401, "\(method) \(path)")
                #expect(answer.body == #"{"error":{"message":"unauthorized"}}"#)
            }
        }
        #expect(try await request(.get, "/v1/state", token: Self.peerToken).status == 200)
    }

    @Test("A peer token cannot trigger a sync round: 403; an admin token can")
    func adminOnly() async throws {
        let refused = try await request(.post, "/v1/sync", token: Self.peerToken)
        #expect(refused.status == 403 && refused.body.contains("admin token"))
        let accepted = try await request(.post, "/v1/sync", token: Self.adminToken)
        #expect(accepted.status == 200 && accepted.body == #"{"peers":[]}"#)
        #expect(try await request(.get, "/v1/state", token: Self.adminToken).status == 200)
    }

    @Test("Pull streams the change sets the caller lacks, as JSON lines, up to the limit")
    func pull() async throws {
        let all = try await request(.get, "/v1/changesets", token: Self.peerToken)
        #expect(all.status == 200)
        #expect(all.headers[.contentType] == "application/x-ndjson")
        #expect(all.body.split(separator: "\n").count == 2)
        let limited = try await request(.get, "/v1/changesets?limit=1", token: Self.peerToken)
        #expect(limited.body.split(separator: "\n").count == 1)
        let after = #"{"\#(store.identifier.uuidString)":1}"#.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""
        let rest = try await request(.get, "/v1/changesets?after=\(after)", token: Self.peerToken)
        #expect(rest.body.split(separator: "\n").count == 1 && rest.body.contains(#""seq":2"#))
        for bad in ["/v1/changesets?limit=0", "/v1/changesets?limit=many", "/v1/changesets?after=%7Bnope", "/v1/changesets?limit=10001"] {
            let answer = try await request(.get, bad, token: Self.peerToken)
            #expect(answer.status == 400 && answer.body.contains(#""message""#), "\(bad): \(answer.body)")
        }
        // The same by POST, with the vector in the body (how peers pull).
        let posted = try await request(.post, "/v1/changesets/pull", token: Self.peerToken,
                                       body: ByteBuffer(string: #"{"after":{"\#(store.identifier.uuidString)":1},"limit":5}"#))
        #expect(posted.status == 200 && posted.body == rest.body)
        #expect(try await request(.post, "/v1/changesets/pull", token: Self.peerToken, body: ByteBuffer(string: "{}")).body == all.body)
        for bad in [#"{"limit":null}"#, #"{"after":null}"#, #"{"limit":0}"#, #"{"after":{"nope":1}}"#, "[]", "not json"] {
            let answer = try await request(.post, "/v1/changesets/pull", token: Self.peerToken, body: ByteBuffer(string: bad))
            #expect(answer.status == 400 && answer.body.contains(#""message""#), "\(bad): \(answer.body)")
        }
    }

    @Test("An answer ends near 1 MiB whatever the limit; asking again after the new vector brings the rest, each change set once")
    func pullAnswersAreBounded() async throws {
        // Sixteen change sets of 1,200 objects (≈ 170 KB each) after the two small ones, then twenty small ones.
        let context = try PersistentContainer(store: store).newContext()
        for save in 0..<16 {
            for index in 0..<1200 { try context.make("Person", ["id": Int64(save * 10_000 + index), "name": "Person \(save)-\(index)"]) }
            try context.save()
        }
        for save in 0..<20 {
            try context.make("Person", ["id": Int64(100_000 + save), "name": "Small \(save)"])
            try context.save()
        }
        func sequences(_ body: String) -> [Int] {
            body.split(separator: "\n").compactMap { line in
                (try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])?["seq"] as? Int
            }
        }
        var seen: [Int] = []
        var answers: [(lines: Int, bytes: Int)] = []
        while true {
            let after = #"{"\#(store.identifier.uuidString)":\#(seen.max() ?? 0)}"#.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""
            let answer = try await request(.get, "/v1/changesets?limit=10000&after=\(after)", token: Self.peerToken)
            #expect(answer.status == 200)
            let got = sequences(answer.body)
            if got.isEmpty { break }
            answers.append((got.count, answer.body.utf8.count))
            seen += got
            try #require(answers.count < 30, "no end to the answers: \(answers)")
        }
        #expect(seen == Array(1...38), "\(seen)")
        // The big change sets take several answers, each past 1 MiB by less than a chunk of them.
        #expect(answers.count >= 3, "\(answers)")
        #expect(answers.dropLast().allSatisfy { $0.bytes >= 1 << 20 } && answers.allSatisfy { $0.bytes < 2 << 20 }, "\(answers)")
    }

    @Test("A change set larger than an answer goes alone: the answers before and after it hold the others")
    func largeChangeSetGoesAlone() async throws {
        let context = try PersistentContainer(store: store).newContext()
        for index in 0..<16_000 { try context.make("Person", ["id": Int64(10_000 + index), "name": "Large \(index)"]) }
        try context.save()  // change set 3, over 2 MiB
        try context.make("Person", ["id": Int64(99), "name": "After"])
        try context.save()  // change set 4
        var answers: [[Int]] = []
        var sizes: [Int] = []
        var seen = 0
        while answers.count < 10 {
            let after = #"{"\#(store.identifier.uuidString)":\#(seen)}"#
            let answer = try await request(.post, "/v1/changesets/pull", token: Self.peerToken, body: ByteBuffer(string: #"{"after":\#(after),"limit":10000}"#))
            let sequences = answer.body.split(separator: "\n").compactMap { line in
                (try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])?["seq"] as? Int
            }
            if sequences.isEmpty { break }
            answers.append(sequences)
            sizes.append(answer.bytes.readableBytes)
            seen = sequences.max() ?? seen
        }
        #expect(answers == [[1, 2], [3], [4]], "\(answers) (\(sizes) bytes)")
        #expect(sizes[1] > 2 << 20, "\(sizes)")
        // The large one is sent a piece at a time (the store gives it so); the answer is its line, byte for byte, gzip or not.
        let page = try store.changeSetPage(after: [:], cursor: 0, limit: 10)
        #expect(page.lines.count == 4 && page.lines[2].text == nil, "the large change set was held whole")
        let large = try store.changeSetLines()[2] + "\n"
        let alone = #"{"after":{"\#(store.identifier.uuidString)":2},"limit":10000}"#
        let plain = try await request(.post, "/v1/changesets/pull", token: Self.peerToken, body: ByteBuffer(string: alone))
        #expect(plain.body == large, "\(plain.body.utf8.count) bytes against \(large.utf8.count)")
        let compressed = try await request(.post, "/v1/changesets/pull", token: Self.peerToken, body: ByteBuffer(string: alone),
                                           headers: [.acceptEncoding: "gzip"])
        var packed = compressed.bytes
        let unpacked = String(buffer: try packed.decompress(with: .gzip()))
        #expect(compressed.headers[.contentEncoding] == "gzip" && unpacked == large)
    }

    @Test("A large change set damaged in the store ends its pull answer short with an error; the next request is answered")
    func damagedLargeChangeSet() async throws {
        let context = try PersistentContainer(store: store).newContext()
        for index in 0..<16_000 { try context.make("Person", ["id": Int64(10_000 + index), "name": "Large \(index)"]) }
        try context.save()  // change set 3, over 2 MiB
        try store.write { db in
            try db.execute(sql: "UPDATE Z_FERRY_CHANGESET SET Z_BODY = substr(Z_BODY, 1, length(Z_BODY) / 2) WHERE Z_SEQ = 3")
        }
        let after = #"{"after":{"\#(store.identifier.uuidString)":2},"limit":10000}"#
        // The head went before the damage was met: the answer's body fails (a cut connection, to a
        // peer), with the cause; no whole line of it arrives.
        do {
            let answer = try await request(.post, "/v1/changesets/pull", token: Self.peerToken, body: ByteBuffer(string: after))
            Issue.record("a pull of a damaged change set was answered whole: \(answer.status), \(answer.body.utf8.count) bytes")
        } catch {
            #expect("\(error)".contains("its compressed form ends after") && "\(error)".contains("the store file is damaged"), "\(error)")
        }
        let health = try await request(.get, "/healthz")
        #expect(health.status == 200)
    }

    @Test("A malformed push is refused whole with 400, and nothing of it is applied")
    func malformedPush() async throws {
        let origin = UUID().uuidString
        let valid = #"{"changes":[{"entity":"Person","op":"insert","uri":"x-coredata://\#(origin)/Person/p1","values":{"name":"Eve"}}],"# +
            #""format":1,"hlc":113000000000000001,"model":"\#(store.modelVersionHash)","origin":"\#(origin)","seq":1}"#
        let before = try dump()
        let answer = try await request(.post, "/v1/changesets", token: Self.peerToken, body: ByteBuffer(string: valid + "\n{\"format\":1,\n"))
        #expect(answer.status == 400 && answer.body.contains("line 2"), "\(answer.body)")
        #expect(try dump() == before)
        let wrongType = try await request(.post, "/v1/changesets", token: Self.peerToken,
                                          body: ByteBuffer(string: valid.replacingOccurrences(of: #""name":"Eve""#, with: #""name":7"#)))
        #expect(wrongType.status == 400 && wrongType.body.contains("name"), "\(wrongType.body)")
        #expect(try dump() == before)
        // The valid line alone applies, once; sent again it is a duplicate.
        let applied = try await request(.post, "/v1/changesets", token: Self.peerToken, body: ByteBuffer(string: valid))
        #expect(applied.status == 200 && applied.body.contains(#""applied":1"#), "\(applied.body)")
        let again = try await request(.post, "/v1/changesets", token: Self.peerToken, body: ByteBuffer(string: valid))
        #expect(again.body.contains(#""applied":0"#) && again.body.contains(#""duplicate":1"#))
    }

    @Test("An error answer quotes at most a short excerpt of what was sent, however large")
    func errorAnswersAreShort() async throws {
        let origin = UUID().uuidString
        let huge = String(repeating: "9", count: 4 << 20)
        for line in [#"{"changes":[],"format":1,"hlc":\#(huge),"model":"m","origin":"\#(origin)","seq":1}"#,
                     #"{"changes":[{"entity":"\#(huge)","op":"insert","uri":"x-coredata://\#(origin)/P/p1","values":{}}],"# +
                         #""format":1,"hlc":1,"model":"\#(store.modelVersionHash)","origin":"\#(origin)","seq":1}"#] {
            let answer = try await request(.post, "/v1/changesets", token: Self.peerToken, body: ByteBuffer(string: line))
            #expect(answer.status == 400)
            #expect(answer.bytes.readableBytes < 2_000, "a \(line.utf8.count)-byte push got a \(answer.bytes.readableBytes)-byte answer")
            #expect(answer.body.contains("line 1"), "\(answer.body.prefix(200))")
        }
    }

    @Test("A known path with a method it does not take gets 405 and the methods it takes; an empty push gets 400")
    func methodNotAllowed() async throws {
        let answer = try await request(.delete, "/v1/changesets", token: Self.peerToken)
        #expect(answer.status == 405 && answer.body.contains("takes GET, POST"), "\(answer.status) \(answer.body)")
        #expect(answer.headers[.allow] == "GET, POST", "\(answer.headers)")
        #expect(try await request(.put, "/v1/sync", token: Self.adminToken).status == 405)
        #expect(try await request(.get, "/v1/nothing-here", token: Self.peerToken).status == 404)
        let empty = try await request(.post, "/v1/changesets", token: Self.peerToken, body: ByteBuffer(string: "\n\n"))
        #expect(empty.status == 400 && empty.body.contains("no change sets"), "\(empty.body)")
    }

    @Test("A body over server.max_body_bytes gets 413")
    func tooLarge() async throws {
        let answer = try await request(.post, "/v1/changesets", token: Self.peerToken,
                                       body: ByteBuffer(repeating: UInt8(ascii: " "), count: (64 << 20) + 1))
        #expect(answer.status == 413 && answer.body.contains("max_body_bytes"))
    }

    @Test("Status reports the store, its backlog and its peers")
    func status() async throws {
        let answer = try await request(.get, "/v1/status", token: Self.peerToken)
        #expect(answer.status == 200)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(answer.body.utf8)) as? [String: Any])
        #expect(object["store"] as? String == store.identifier.uuidString)
        #expect((object["peers"] as? [Any])?.isEmpty == true)
    }

    @Test("Pulls are gzip-compressed for callers that take gzip; pushes may be gzip; other encodings get 415")
    func gzip() async throws {
        let compressed = try await request(.get, "/v1/changesets", token: Self.peerToken, headers: [.acceptEncoding: "gzip"])
        #expect(compressed.status == 200)
        #expect(compressed.headers[.contentEncoding] == "gzip")
        var packed = compressed.bytes
        let unpacked = String(buffer: try packed.decompress(with: .gzip()))
        #expect(unpacked.split(separator: "\n").count == 2, "\(unpacked.prefix(80))")
        let plain = try await request(.get, "/v1/changesets", token: Self.peerToken, headers: [.acceptEncoding: "identity"])
        #expect(plain.headers[.contentEncoding] == nil && plain.body == unpacked)

        let before = try dump()
        let garbage = try await request(.post, "/v1/changesets", token: Self.peerToken, body: ByteBuffer(string: "not gzip"),
                                        headers: [.contentEncoding: "gzip"])
        #expect(garbage.status == 400 && garbage.body.contains("not valid gzip"))
        let brotli = try await request(.post, "/v1/changesets", token: Self.peerToken, body: ByteBuffer(string: "x"), headers: [.contentEncoding: "br"])
        #expect(brotli.status == 415)
        // A small body that unpacks past server.max_body_bytes is refused, not unpacked.
        var spaces = ByteBuffer(repeating: UInt8(ascii: " "), count: (64 << 20) + 1)
        let bomb = try spaces.compress(with: .gzip())
        #expect(bomb.readableBytes < 200_000)
        let refused = try await request(.post, "/v1/changesets", token: Self.peerToken, body: bomb, headers: [.contentEncoding: "gzip"])
        #expect(refused.status == 413, "\(refused.body)")
        #expect(try dump() == before)
    }
}
