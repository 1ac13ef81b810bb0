import Foundation
import Testing
import Hummingbird
import HummingbirdTesting
import FerryModel
import FerryStore
import FerrySQLite
import FerrySync
import FerryTestSupport
@testable import FerryServer

/// The HTTP API in process, through Hummingbird's router test client: no `ferry run`
/// process, no socket. (Process-level behaviour — TLS, limits under load, stopping —
/// stays in FerryDaemonTests and FerryReliabilityTests.)
@Suite("HTTP API in process")
struct FerryAPITests {
    static let peerToken = "peer-token-0123456789abcdef"
    static let adminToken = "admin-token-0123456789abcdef"
    static let pullToken = "pull-token-0123456789abcdef"
    static let pushToken = "push-token-0123456789abcdef"
    /// A peer token that may push change sets of one origin only: the pushing store's.
    static let ownOriginToken = "own-origin-token-0123456789abcdef"
    /// A peer token that may push change sets of another store only.
    static let strangerToken = "stranger-token-0123456789abcdef"

    /// A store with an API over it, and a second store that writes change sets to push.
    struct Fixture {
        let directory = TemporaryDirectory()
        let store: SQLiteStore
        let other: SQLiteStore
        let app: Application<RouterResponder<FerryRequestContext>>
        let api: FerryAPI

        init(control: (any DaemonControl)? = nil) throws {
            let model = try SampleModels.load("OrgChart")
            store = try SQLiteStore(path: directory.file("served.sqlite"), model: model)
            other = try SQLiteStore(path: directory.file("other.sqlite"), model: model)
            let grants: [(token: String, grant: AccessTokens.Grant)] = [
                (FerryAPITests.peerToken, .init(role: .peer)), (FerryAPITests.adminToken, .init(role: .admin)),
                (FerryAPITests.pullToken, .init(role: .pull)), (FerryAPITests.pushToken, .init(role: .push)),
                (FerryAPITests.ownOriginToken, .init(role: .peer, pushOrigins: [other.identifier])),
                (FerryAPITests.strangerToken, .init(role: .push, pushOrigins: [UUID()])),
            ]
            api = FerryAPI(endpoint: try ReplicationEndpoint(store: store), tokens: AccessTokens(grants: grants),
                           maxBodyBytes: 1 << 20, control: control)
            app = Application(router: api.router())
        }

        /// One change set of `other`, saving a person called `name`.
        func changeSet(_ name: String) throws -> String {
            let before = try other.historyState().vector
            let context = try PersistentContainer(store: other).newContext()
            try context.make("Person", ["name": name])
            try context.save()
            return try #require(try other.changeSetLines(after: before, limit: nil).first)
        }
    }

    static func bearer(_ token: String) -> HTTPFields { [.authorization: "Bearer \(token)"] }

    @Test("Every route but healthz needs a known token: 401 with WWW-Authenticate and no detail")
    func authentication() async throws {
        let fixture = try Fixture()
        try await fixture.app.test(.router) { client in
            #expect(try await client.execute(uri: "/healthz", method: .get).status == .ok)
            for (method, path) in [(HTTPRequest.Method.get, "/v1/state"), (.get, "/v1/changesets"), (.post, "/v1/changesets"),
                                   (.get, "/v1/status"), (.post, "/v1/sync")] {
                for headers in [HTTPFields(), Self.bearer("wrong"), [.authorization: "Basic \(Self.peerToken)"]] {
                    let answer = try await client.execute(uri: path, method: method, headers: headers)
                    #expect(answer.status == .unauthorized, "\(method) \(path)")
                    #expect(answer.headers[.wwwAuthenticate] == "Bearer")
                    #expect(String(buffer: answer.body) == #"{"error":{"message":"unauthorized"}}"#)
                }
            }
            let state = try await client.execute(uri: "/v1/state", method: .get, headers: Self.bearer(Self.peerToken))
            #expect(state.status == .ok)
            let decoded = try WireJSON.decode(HistoryState.self, from: Data(buffer: state.body))
            #expect(decoded.store == fixture.store.identifier)
        }
    }

    @Test("A peer token may not ask for a sync round (403); an admin token reaches the control, or 503 without one")
    func adminRole() async throws {
        let fixture = try Fixture()
        try await fixture.app.test(.router) { client in
            let refused = try await client.execute(uri: "/v1/sync", method: .post, headers: Self.bearer(Self.peerToken))
            #expect(refused.status == .forbidden && String(buffer: refused.body).contains("admin token"))
            let noLoop = try await client.execute(uri: "/v1/sync", method: .post, headers: Self.bearer(Self.adminToken))
            #expect(noLoop.status == .serviceUnavailable && String(buffer: noLoop.body).contains("no sync loop"))
        }
    }

    /// A control that answers from fixed values.
    struct FixedControl: DaemonControl {
        let document: StatusDocument
        let peers: [String]

        func status() async -> StatusDocument { document }

        func sync(peer: String?) async -> SyncNowOutcome {
            if let peer, !peers.contains(peer) { return .unknownPeer(peer) }
            var failed = PeerSyncResult(peer: "b")
            failed.error = .notListening("connection refused")
            return .ran(SyncNowAnswer([failed]))
        }
    }

    @Test("Status and sync go through DaemonControl: its document, 404 for an unknown peer, 502 when a peer failed")
    func syncControl() async throws {
        let document = StatusDocument(store: UUID(), model: "m", peers: [])
        let fixture = try Fixture(control: FixedControl(document: document, peers: ["b"]))
        try await fixture.app.test(.router) { client in
            let status = try await client.execute(uri: "/v1/status", method: .get, headers: Self.bearer(Self.peerToken))
            #expect(try WireJSON.decode(StatusDocument.self, from: Data(buffer: status.body)) == document)
            let unknown = try await client.execute(uri: "/v1/sync?peer=zz", method: .post, headers: Self.bearer(Self.adminToken))
            #expect(unknown.status == .notFound && String(buffer: unknown.body).contains("no peer named 'zz'"))
            let failed = try await client.execute(uri: "/v1/sync?peer=b", method: .post, headers: Self.bearer(Self.adminToken))
            #expect(failed.status == .badGateway)
            let answer = try WireJSON.decode(SyncNowAnswer.self, from: Data(buffer: failed.body))
            #expect(answer.peers.map(\.peer) == ["b"] && !answer.succeeded)
        }
    }

    @Test("A peer token's status shows no peer URLs, paths or error texts; an admin token's shows them all")
    func statusDetailsForAdminsOnly() async throws {
        var peer = StatusDocument.Peer(name: "b", url: "https://internal-b.example:8443", state: "backing_off")
        peer.lastError = "not listening: connection refused"
        peer.consecutiveFailures = 1
        var made = StatusDocument(store: UUID(), model: "m", peers: [peer])
        made.storeError = StatusDocument.StoreProblem(message: "store.path /srv/ferry/secret/store.sqlite: read-only file system",
                                                      since: Date(timeIntervalSince1970: 0), readOnlyView: true)
        let document = made
        let fixture = try Fixture(control: FixedControl(document: document, peers: ["b"]))
        try await fixture.app.test(.router) { client in
            let asPeer = try await client.execute(uri: "/v1/status", method: .get, headers: Self.bearer(Self.peerToken))
            let shown = String(buffer: asPeer.body)
            #expect(!shown.contains("internal-b") && !shown.contains("/srv/ferry") && !shown.contains("connection refused"), "\(shown)")
            #expect(try WireJSON.decode(StatusDocument.self, from: Data(buffer: asPeer.body)).peers.first?.state == "backing_off")
            let asAdmin = try await client.execute(uri: "/v1/status", method: .get, headers: Self.bearer(Self.adminToken))
            let full = try WireJSON.decode(StatusDocument.self, from: Data(buffer: asAdmin.body))
            #expect(full.peers.first?.url == "https://internal-b.example:8443" && full.peers.first?.lastError == "not listening: connection refused", "\(full)")
            #expect(full.storeError == document.storeError)
        }
    }

    @Test("Past the push bodies it may hold at once, a push gets 503 with Retry-After and applies nothing; with a slot free it applies")
    func bodySlots() async throws {
        let fixture = try Fixture()
        let line = try fixture.changeSet("Ann")
        let api = fixture.api
        #expect(api.bodySlots.capacity == 4)
        for _ in 0..<4 { #expect(api.bodySlots.take()) }
        #expect(!api.bodySlots.take())
        try await fixture.app.test(.router) { client in
            let busy = try await client.execute(uri: "/v1/changesets", method: .post, headers: Self.bearer(Self.peerToken), body: ByteBuffer(string: line))
            #expect(busy.status == .serviceUnavailable && busy.headers[.retryAfter] == "1" && String(buffer: busy.body).contains("max_concurrent_bodies"))
            #expect(try fixture.store.historyState().vector.isEmpty)
            api.bodySlots.give()
            let applied = try await client.execute(uri: "/v1/changesets", method: .post, headers: Self.bearer(Self.peerToken), body: ByteBuffer(string: line))
            #expect(applied.status == .ok)
        }
        // The push gave its slot back: one is free beside the three the test still holds.
        #expect(api.bodySlots.take() && !api.bodySlots.take())
    }

    @Test("A pull-only token may pull and read state but not push; a push-only token may push but not pull; nothing is applied by a refused push")
    func pullAndPushTokens() async throws {
        let fixture = try Fixture()
        let line = try fixture.changeSet("Ann")
        try await fixture.app.test(.router) { client in
            let refused = try await client.execute(uri: "/v1/changesets", method: .post, headers: Self.bearer(Self.pullToken),
                                                   body: ByteBuffer(string: line + "\n"))
            #expect(refused.status == .forbidden && String(buffer: refused.body).contains("may not push change sets"), "\(String(buffer: refused.body))")
            #expect(try fixture.store.historyState().vector.isEmpty, "the refused push applied nothing")
            for (method, path) in [(HTTPRequest.Method.get, "/v1/state"), (.get, "/v1/changesets?after=%7B%7D"), (.get, "/v1/snapshot")] {
                #expect(try await client.execute(uri: path, method: method, headers: Self.bearer(Self.pullToken)).status == .ok, "\(path)")
            }
            for (method, path) in [(HTTPRequest.Method.get, "/v1/changesets?after=%7B%7D"), (.get, "/v1/snapshot"), (.post, "/v1/changesets/pull")] {
                let answer = try await client.execute(uri: path, method: method, headers: Self.bearer(Self.pushToken), body: ByteBuffer(string: "{}"))
                #expect(answer.status == .forbidden && String(buffer: answer.body).contains("may not pull"), "\(path): \(answer.status)")
            }
            #expect(try await client.execute(uri: "/v1/sync", method: .post, headers: Self.bearer(Self.pushToken)).status == .forbidden)
            let pushed = try await client.execute(uri: "/v1/changesets", method: .post, headers: Self.bearer(Self.pushToken),
                                                  body: ByteBuffer(string: line + "\n"))
            #expect(try pushed.status == .ok && WireJSON.decode(ApplyReport.self, from: Data(buffer: pushed.body)).applied == 1)
        }
    }

    @Test("A token limited to some origins may push only their change sets: a push with another origin's is refused whole; the genuine one applies afterwards")
    func originLimitedTokens() async throws {
        let fixture = try Fixture()
        let first = try fixture.changeSet("Ann"), second = try fixture.changeSet("Bob")
        try await fixture.app.test(.router) { client in
            let refused = try await client.execute(uri: "/v1/changesets", method: .post, headers: Self.bearer(Self.strangerToken),
                                                   body: ByteBuffer(string: first + "\n" + second + "\n"))
            let message = String(buffer: refused.body)
            #expect(refused.status == .forbidden && message.contains("line 1 is a change set of origin \(fixture.other.identifier.uuidString)"), "\(message)")
            #expect(try fixture.store.historyState().vector.isEmpty, "nothing applied")
            let pushed = try await client.execute(uri: "/v1/changesets", method: .post, headers: Self.bearer(Self.ownOriginToken),
                                                  body: ByteBuffer(string: first + "\n" + second + "\n"))
            #expect(try pushed.status == .ok && WireJSON.decode(ApplyReport.self, from: Data(buffer: pushed.body)).applied == 2)
            #expect(try fixture.store.historyState().vector[fixture.other.identifier] == 2)
        }
    }

    @Test("A pushed change set is applied once, then served back to a puller that lacks it")
    func pushThenPull() async throws {
        let fixture = try Fixture()
        let line = try fixture.changeSet("Ann")
        try await fixture.app.test(.router) { client in
            let pushed = try await client.execute(uri: "/v1/changesets", method: .post, headers: Self.bearer(Self.peerToken),
                                                  body: ByteBuffer(string: line + "\n"))
            let report = try WireJSON.decode(ApplyReport.self, from: Data(buffer: pushed.body))
            #expect(pushed.status == .ok && report.applied == 1 && report.vector[fixture.other.identifier] == 1)
            let again = try await client.execute(uri: "/v1/changesets", method: .post, headers: Self.bearer(Self.peerToken),
                                                 body: ByteBuffer(string: line + "\n"))
            #expect(try WireJSON.decode(ApplyReport.self, from: Data(buffer: again.body)).duplicate == 1)
            let pulled = try await client.execute(uri: "/v1/changesets?after=%7B%7D&limit=10", method: .get, headers: Self.bearer(Self.peerToken))
            #expect(pulled.status == .ok && pulled.headers[.contentType] == "application/x-ndjson")
            #expect(String(buffer: pulled.body) == line + "\n")
            let covered = "%7B%22\(fixture.other.identifier.uuidString)%22%3A1%7D"
            let nothing = try await client.execute(uri: "/v1/changesets?after=\(covered)", method: .get, headers: Self.bearer(Self.peerToken))
            #expect(nothing.status == .ok && nothing.body.readableBytes == 0)
        }
    }

    @Test("Bad requests are refused with what to do, and apply nothing")
    func badRequests() async throws {
        let fixture = try Fixture()
        try await fixture.app.test(.router) { client in
            let empty = try await client.execute(uri: "/v1/changesets", method: .post, headers: Self.bearer(Self.peerToken), body: ByteBuffer())
            #expect(empty.status == .badRequest && String(buffer: empty.body).contains("no change sets"))
            let garbage = try await client.execute(uri: "/v1/changesets", method: .post, headers: Self.bearer(Self.peerToken),
                                                   body: ByteBuffer(string: "{\"not\":\"a change set\"}\n"))
            #expect(garbage.status == .badRequest && String(buffer: garbage.body).contains("nothing was applied"))
            var headers = Self.bearer(Self.peerToken)
            headers[.contentEncoding] = "br"
            let encoding = try await client.execute(uri: "/v1/changesets", method: .post, headers: headers, body: ByteBuffer(string: "x"))
            #expect(encoding.status == .unsupportedMediaType)
            let limit = try await client.execute(uri: "/v1/changesets?limit=0", method: .get, headers: Self.bearer(Self.peerToken))
            #expect(limit.status == .badRequest && String(buffer: limit.body).contains("'limit'"))
            let method = try await client.execute(uri: "/v1/state", method: .delete, headers: Self.bearer(Self.peerToken))
            #expect(method.status == .methodNotAllowed && method.headers[.allow] == "GET")
        }
        #expect(try fixture.store.historyState().vector.isEmpty, "a refused request applied something")
    }
}
