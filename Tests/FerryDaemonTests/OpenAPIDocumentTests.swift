import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
import FerryTestTraits
import Yams
import FerryModel
import FerrySQLite
import FerryStore
import FerrySigning
import FerryTestSupport

/// docs/openapi.yaml against a real `ferry run`: every documented route and
/// status is produced by a request here, every request here is documented, and
/// JSON answers carry the properties their schema requires.
@Suite("OpenAPI document", .blocking, .serialized)
struct OpenAPIDocumentTests {
    struct Operation: Hashable, CustomStringConvertible {
        let method: String
        let path: String
        let status: Int
        var description: String { "\(method) \(path) \(status)" }
    }

    /// (operation, names of the response schemas it may match — one, or the `oneOf` list) from the document.
    func documented() throws -> (operations: Set<Operation>, schemas: [Operation: [String]], document: [String: Any]) {
        let text = try String(contentsOfFile: SampleModels.repositoryRoot + "/docs/openapi.yaml", encoding: .utf8)
        let document = try #require(try Yams.load(yaml: text) as? [String: Any])
        #expect(document["openapi"] as? String == "3.1.0")
        let paths = try #require(document["paths"] as? [String: Any])
        var operations = Set<Operation>()
        var schemas: [Operation: [String]] = [:]
        for (path, value) in paths {
            let methods = try #require(value as? [String: Any])
            for (method, operationValue) in methods {
                let responses = try #require((operationValue as? [String: Any])?["responses"] as? [String: Any])
                for (status, response) in responses {
                    let operation = Operation(method: method.uppercased(), path: path, status: try #require(Int(status)))
                    operations.insert(operation)
                    let content = (response as? [String: Any])?["content"] as? [String: Any]
                    let schema = (content?["application/json"] as? [String: Any])?["schema"] as? [String: Any]
                    let references = (schema?["oneOf"] as? [[String: Any]] ?? schema.map { [$0] } ?? []).compactMap { $0["$ref"] as? String }
                    if !references.isEmpty {
                        schemas[operation] = references.map { String($0.split(separator: "/").last ?? "") }
                    }
                }
            }
        }
        return (operations, schemas, document)
    }

    func send(_ peer: DaemonPeer, _ method: String, _ path: String, token: String?, body: Data? = nil,
              headers: [String: String] = [:]) async throws -> (Int, Data) {
        var request = URLRequest(url: try #require(URL(string: peer.url + path)))
        request.httpMethod = method
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        request.httpBody = body
        if let token { request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
        let (data, response) = try await URLSession.shared.data(for: request)
        return ((response as? HTTPURLResponse)?.statusCode ?? 0, data)
    }

    @Test("Every documented route and status, and nothing undocumented")
    func conformance() async throws {
        let (documentedOperations, schemas, document) = try documented()
        let components = try #require((document["components"] as? [String: Any])?["schemas"] as? [String: Any])

        // A daemon with two peers: one up, one down.
        let up = try DaemonPeer(name: "up", model: ReplicationTests.model, pullInterval: 3600)
        let down = try DaemonPeer(name: "down", model: ReplicationTests.model, pullInterval: 3600)
        let server = try DaemonPeer(name: "server", model: ReplicationTests.model, pullInterval: 3600)
        try server.connect(to: up)
        try server.connect(to: down)
        // `up` has no peers of its own, so it pins the server's key to take its pushes; the server pins
        // a key of a store it never talks to (`stranger`, below).
        #expect(try server.ferry(["init"]).status == 0)
        try up.pin(server)
        let stranger = UUID()
        let strangerKey = StoreSigningKey()
        try server.pin(origin: stranger.uuidString, key: strangerKey.publicKey)
        try up.start()
        try server.start()
        try server.put("[\(ReplicationTests.person("ann", 1, "Ann"))]")
        let peer = server.peerToken
        let admin = server.adminToken

        var exercised: [Operation: [Data]] = [:]
        func check(_ method: String, _ template: String, _ path: String, token: String?, body: Data? = nil,
                   headers: [String: String] = [:], expect status: Int) async throws {
            let (actual, data) = try await send(server, method, path, token: token, body: body, headers: headers)
            #expect(actual == status, "\(method) \(path): \(actual) \(String(decoding: data, as: UTF8.self))")
            exercised[Operation(method: method, path: template, status: status), default: []].append(data)
        }
        try await check("GET", "/healthz", "/healthz", token: nil, expect: 200)
        try await check("GET", "/v1/state", "/v1/state", token: peer, expect: 200)
        try await check("GET", "/v1/state", "/v1/state", token: nil, expect: 401)
        try await check("GET", "/v1/changesets", "/v1/changesets?limit=10", token: peer, expect: 200)
        try await check("GET", "/v1/changesets", "/v1/changesets?limit=0", token: peer, expect: 400)
        try await check("GET", "/v1/changesets", "/v1/changesets", token: "nope-nope-nope-nope", expect: 401)
        try await check("POST", "/v1/changesets/pull", "/v1/changesets/pull", token: peer, body: Data(#"{"after":{},"limit":10}"#.utf8), expect: 200)
        try await check("POST", "/v1/changesets/pull", "/v1/changesets/pull", token: peer, body: Data(#"{"limit":0}"#.utf8), expect: 400)
        try await check("POST", "/v1/changesets/pull", "/v1/changesets/pull", token: peer, body: Data("not json".utf8), expect: 400)
        try await check("POST", "/v1/changesets/pull", "/v1/changesets/pull", token: nil, body: Data("{}".utf8), expect: 401)
        try await check("POST", "/v1/changesets/pull", "/v1/changesets/pull", token: peer, body: Data(count: (1 << 20) + 1), expect: 413)
        // The server's own change set sent back: a duplicate, 200 with the report.
        let ownChangeSet = try #require(try server.history().first)
        try await check("POST", "/v1/changesets", "/v1/changesets", token: peer, body: Data((ownChangeSet + "\n").utf8), expect: 200)
        try await check("POST", "/v1/changesets", "/v1/changesets", token: peer, body: Data(), expect: 400)
        try await check("POST", "/v1/changesets", "/v1/changesets", token: peer, body: Data("{}\n".utf8), expect: 400)
        try await check("POST", "/v1/changesets", "/v1/changesets", token: nil, body: Data(), expect: 401)
        try await check("POST", "/v1/changesets", "/v1/changesets", token: peer, body: Data(count: (64 << 20) + 1), expect: 413)
        try await check("POST", "/v1/changesets", "/v1/changesets", token: peer, body: Data("x".utf8), headers: ["Content-Encoding": "br"], expect: 415)
        let stream = "/v1/changesets/stream"
        try await check("POST", stream, stream, token: peer, body: Data((ownChangeSet + "\n\n").utf8), expect: 200)
        try await check("POST", stream, stream, token: peer, body: Data(), expect: 400)
        try await check("POST", stream, stream, token: nil, body: Data(), expect: 401)
        try await check("POST", stream, stream, token: server.pullToken, body: Data((ownChangeSet + "\n\n").utf8), expect: 403)
        try await check("GET", "/v1/status", "/v1/status", token: peer, expect: 200)
        try await check("GET", "/v1/status", "/v1/status", token: nil, expect: 401)
        try await check("POST", "/v1/sync", "/v1/sync?peer=up", token: admin, expect: 200)
        try await check("POST", "/v1/sync", "/v1/sync?peer=down", token: admin, expect: 502)
        try await check("POST", "/v1/sync", "/v1/sync?peer=nobody", token: admin, expect: 404)
        try await check("POST", "/v1/sync", "/v1/sync", token: peer, expect: 403)
        try await check("POST", "/v1/sync", "/v1/sync", token: nil, expect: 401)
        try await check("GET", "/v1/snapshot", "/v1/snapshot", token: peer, expect: 200)
        try await check("GET", "/v1/snapshot", "/v1/snapshot", token: nil, expect: 401)
        // A token beyond its role: a push-only token pulling, a pull-only one pushing.
        try await check("GET", "/v1/snapshot", "/v1/snapshot", token: server.pushToken, expect: 403)
        try await check("GET", "/v1/changesets", "/v1/changesets?limit=10", token: server.pushToken, expect: 403)
        try await check("POST", "/v1/changesets/pull", "/v1/changesets/pull", token: server.pushToken, body: Data("{}".utf8), expect: 403)
        try await check("POST", "/v1/changesets", "/v1/changesets", token: server.pullToken, body: Data((ownChangeSet + "\n").utf8), expect: 403)
        let snapshot = try #require(exercised[Operation(method: "GET", path: "/v1/snapshot", status: 200)]?.first)
        #expect(snapshot.starts(with: Data("SQLite format 3\u{0}".utf8)), "a SQLite file")
        try await check("GET", "/metrics", "/metrics", token: peer, expect: 200)
        try await check("GET", "/metrics", "/metrics", token: nil, expect: 401)
        // 410: the history a caller needs was purged (every listed peer had it).
        let store = try SQLiteStore(path: server.store, model: try XcodeModelReader.read(at: ReplicationTests.model))
        #expect(try store.purgeChangeSets(acknowledgedBy: [store.historyState().vector]) == 1)
        try await check("GET", "/v1/changesets", "/v1/changesets", token: peer, expect: 410)
        try await check("POST", "/v1/changesets/pull", "/v1/changesets/pull", token: peer, body: Data("{}".utf8), expect: 410)
        // 410 on a push: the store forgot deletes made before its horizon (here: everything so far), and the
        // change set sent knows none of them (its origin never saw the server's change set 1).
        #expect(try store.purgeHistory(PurgePolicy(acknowledged: [], tombstonesMadeBefore: .wall(Date().addingTimeInterval(60)))).tombstones == 0)
        let unaware = try SignedLines.signed(ChangeSetCodec.encode(ChangeSet(origin: stranger, sequence: 1, timestamp: .wall(Date()),
                                                                             modelHash: store.modelVersionHash, changes: [
            ObjectChange(kind: .insert, uri: "x-coredata://\(stranger.uuidString)/Person/p1", entity: "Person", values: ["id": .attribute(.integer(9))]),
        ])), with: strangerKey)
        try await check("POST", "/v1/changesets", "/v1/changesets", token: peer, body: Data((unaware + "\n").utf8), expect: 410)
        // 422: the same change set signed with another key than the one pinned for its origin.
        let forged = try SignedLines.signed(unaware, with: StoreSigningKey())
        try await check("POST", "/v1/changesets", "/v1/changesets", token: peer, body: Data((forged + "\n").utf8), expect: 422)
        let refusal = String(decoding: exercised[Operation(method: "POST", path: "/v1/changesets", status: 410)]?.first ?? Data(), as: UTF8.self)
        #expect(refusal.contains("tombstone horizon"), "\(refusal)")

        // A daemon whose store cannot be opened (a file where its folder should be): 503 on the store's routes.
        let blocked = TemporaryDirectory(prefix: "ferry-blocked")
        try Data().write(to: URL(fileURLWithPath: blocked.file("not-a-folder")))
        let waiting = try DaemonPeer(name: "waiting", model: ReplicationTests.model, pullInterval: 3600, storeFolder: blocked.file("not-a-folder"))
        try waiting.connect(to: up)
        try waiting.start()
        func checkWaiting(_ method: String, _ path: String, token: String?, body: Data? = nil, expect status: Int) async throws {
            let (actual, data) = try await send(waiting, method, path, token: token, body: body)
            #expect(actual == status, "waiting: \(method) \(path): \(actual) \(String(decoding: data, as: UTF8.self))")
            exercised[Operation(method: method, path: path, status: status), default: []].append(data)
        }
        try await checkWaiting("GET", "/healthz", token: nil, expect: 503)
        try await checkWaiting("GET", "/v1/state", token: waiting.peerToken, expect: 503)
        try await checkWaiting("GET", "/v1/changesets", token: waiting.peerToken, expect: 503)
        try await checkWaiting("POST", "/v1/changesets/pull", token: waiting.peerToken, body: Data("{}".utf8), expect: 503)
        try await checkWaiting("POST", "/v1/changesets", token: waiting.peerToken, body: Data((ownChangeSet + "\n").utf8), expect: 503)
        try await checkWaiting("POST", "/v1/changesets/stream", token: waiting.peerToken, body: Data((ownChangeSet + "\n\n").utf8), expect: 503)
        try await checkWaiting("GET", "/v1/snapshot", token: waiting.peerToken, expect: 503)
        try await checkWaiting("GET", "/v1/status", token: waiting.peerToken, expect: 200)
        try await checkWaiting("POST", "/v1/sync", token: waiting.adminToken, expect: 503)
        #expect(waiting.stop() == 0)

        let exercisedOperations = Set(exercised.keys)
        #expect(exercisedOperations.subtracting(documentedOperations).isEmpty, "undocumented: \(exercisedOperations.subtracting(documentedOperations))")
        let missing = documentedOperations.subtracting(exercisedOperations)
        #expect(missing.isEmpty, "documented but not produced: \(missing)")

        // JSON answers carry what their schema requires (one of them, for a `oneOf`).
        for (operation, answers) in exercised {
            guard let names = schemas[operation] else { continue }
            for data in answers {
                let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any], "\(operation)")
                let missing = names.map { name in
                    (name, ((components[name] as? [String: Any])?["required"] as? [String] ?? []).filter { object[$0] == nil })
                }
                #expect(missing.contains { $0.1.isEmpty }, "\(operation): \(missing.map { "missing \($0.1) required by \($0.0)" })")
            }
        }
        let metrics = String(decoding: exercised[Operation(method: "GET", path: "/metrics", status: 200)]?.first ?? Data(), as: UTF8.self)
        #expect(metrics.contains("ferry_sync_rounds_total"))
    }
}
