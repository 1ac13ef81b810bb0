import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
import Yams
import FerryModel
import FerrySQLite
import FerryTestSupport

/// docs/openapi.yaml against a real `ferry run`: every documented route and
/// status is produced by a request here, every request here is documented, and
/// JSON answers carry the properties their schema requires.
@Suite("OpenAPI document", .serialized)
struct OpenAPIDocumentTests {
    struct Operation: Hashable, CustomStringConvertible {
        let method: String
        let path: String
        let status: Int
        var description: String { "\(method) \(path) \(status)" }
    }

    /// (operation, response schema name or nil) from the document.
    func documented() throws -> (operations: Set<Operation>, schemas: [Operation: String], document: [String: Any]) {
        let text = try String(contentsOfFile: SampleModels.repositoryRoot + "/docs/openapi.yaml", encoding: .utf8)
        let document = try #require(try Yams.load(yaml: text) as? [String: Any])
        #expect(document["openapi"] as? String == "3.1.0")
        let paths = try #require(document["paths"] as? [String: Any])
        var operations = Set<Operation>()
        var schemas: [Operation: String] = [:]
        for (path, value) in paths {
            let methods = try #require(value as? [String: Any])
            for (method, operationValue) in methods {
                let responses = try #require((operationValue as? [String: Any])?["responses"] as? [String: Any])
                for (status, response) in responses {
                    let operation = Operation(method: method.uppercased(), path: path, status: try #require(Int(status)))
                    operations.insert(operation)
                    let content = (response as? [String: Any])?["content"] as? [String: Any]
                    if let schema = ((content?["application/json"] as? [String: Any])?["schema"] as? [String: Any])?["$ref"] as? String {
                        schemas[operation] = String(schema.split(separator: "/").last ?? "")
                    }
                }
            }
        }
        return (operations, schemas, document)
    }

    /// Statuses documented that no test request can produce on demand, with why.
    static let notProducible: [Operation: String] = [
        Operation(method: "POST", path: "/v1/changesets", status: 503): "needs another writer to conflict with a change set eight times in a row",
    ]

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
        try up.start()
        try server.start()
        try server.put("[\(ReplicationTests.person("ann", 1, "Ann"))]")
        let peer = server.peerToken
        let admin = server.adminToken

        var exercised: [Operation: Data] = [:]
        func check(_ method: String, _ template: String, _ path: String, token: String?, body: Data? = nil,
                   headers: [String: String] = [:], expect status: Int) async throws {
            let (actual, data) = try await send(server, method, path, token: token, body: body, headers: headers)
            #expect(actual == status, "\(method) \(path): \(actual) \(String(decoding: data, as: UTF8.self))")
            exercised[Operation(method: method, path: template, status: status)] = data
        }
        try await check("GET", "/healthz", "/healthz", token: nil, expect: 200)
        try await check("GET", "/v1/state", "/v1/state", token: peer, expect: 200)
        try await check("GET", "/v1/state", "/v1/state", token: nil, expect: 401)
        try await check("GET", "/v1/changesets", "/v1/changesets?limit=10", token: peer, expect: 200)
        try await check("GET", "/v1/changesets", "/v1/changesets?limit=0", token: peer, expect: 400)
        try await check("GET", "/v1/changesets", "/v1/changesets", token: "nope-nope-nope-nope", expect: 401)
        // The server's own change set sent back: a duplicate, 200 with the report.
        let ownChangeSet = try #require(try server.history().first)
        try await check("POST", "/v1/changesets", "/v1/changesets", token: peer, body: Data((ownChangeSet + "\n").utf8), expect: 200)
        try await check("POST", "/v1/changesets", "/v1/changesets", token: peer, body: Data(), expect: 400)
        try await check("POST", "/v1/changesets", "/v1/changesets", token: peer, body: Data("{}\n".utf8), expect: 400)
        try await check("POST", "/v1/changesets", "/v1/changesets", token: nil, body: Data(), expect: 401)
        try await check("POST", "/v1/changesets", "/v1/changesets", token: peer, body: Data(count: (64 << 20) + 1), expect: 413)
        try await check("POST", "/v1/changesets", "/v1/changesets", token: peer, body: Data("x".utf8), headers: ["Content-Encoding": "br"], expect: 415)
        try await check("GET", "/v1/status", "/v1/status", token: peer, expect: 200)
        try await check("GET", "/v1/status", "/v1/status", token: nil, expect: 401)
        try await check("POST", "/v1/sync", "/v1/sync?peer=up", token: admin, expect: 200)
        try await check("POST", "/v1/sync", "/v1/sync?peer=down", token: admin, expect: 502)
        try await check("POST", "/v1/sync", "/v1/sync?peer=nobody", token: admin, expect: 404)
        try await check("POST", "/v1/sync", "/v1/sync", token: peer, expect: 403)
        try await check("POST", "/v1/sync", "/v1/sync", token: nil, expect: 401)
        try await check("GET", "/metrics", "/metrics", token: peer, expect: 200)
        try await check("GET", "/metrics", "/metrics", token: nil, expect: 401)
        // 410: the history a caller needs was purged (every listed peer had it).
        let store = try SQLiteStore(path: server.store, model: try XcodeModelReader.read(at: ReplicationTests.model))
        #expect(try store.purgeChangeSets(acknowledgedBy: [store.historyState().vector]) == 1)
        try await check("GET", "/v1/changesets", "/v1/changesets", token: peer, expect: 410)

        let exercisedOperations = Set(exercised.keys)
        #expect(exercisedOperations.subtracting(documentedOperations).isEmpty, "undocumented: \(exercisedOperations.subtracting(documentedOperations))")
        let missing = documentedOperations.subtracting(exercisedOperations).subtracting(Self.notProducible.keys)
        #expect(missing.isEmpty, "documented but not produced: \(missing)")

        // JSON answers carry what their schema requires.
        for (operation, data) in exercised {
            guard let schemaName = schemas[operation], let schema = components[schemaName] as? [String: Any] else { continue }
            let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any], "\(operation)")
            for key in schema["required"] as? [String] ?? [] {
                #expect(object[key] != nil, "\(operation): missing '\(key)' required by \(schemaName)")
            }
        }
        #expect(String(decoding: exercised[Operation(method: "GET", path: "/metrics", status: 200)] ?? Data(), as: UTF8.self)
            .contains("ferry_sync_rounds_total"))
    }
}
