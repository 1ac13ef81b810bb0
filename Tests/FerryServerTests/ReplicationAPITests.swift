import Foundation
import Testing
import Hummingbird
import HummingbirdTesting
import Logging
@testable import FerryServer

/// The replication API's routes, written once for every backend (``ReplicationAPI``): tokens and
/// roles, methods, the optional calls a backend serves, and what reaches the backend.
@Suite("Replication API over any backend")
struct ReplicationAPITests {
    /// A backend that answers each call with its name (and what it was given).
    struct NamingBackend: ReplicationBackend {
        var optionalRoutes: Set<ReplicationRoute>

        func health() async -> Response { .json(#"{"status":"ok"}"#) }
        func state() async throws -> Response { .json(#""state""#) }
        func pull(_ pull: PullRequest, request: Request, logger: Logger) async throws -> Response {
            .json(#""pull \#(pull.limit) \#(pull.waitMilliseconds)""#)
        }
        func push(_ request: Request, allowedOrigins: Set<UUID>?, logger: Logger) async throws -> Response { .json(#""push""#) }
        func snapshot() async throws -> Response { .json(#""snapshot""#) }
        func status(admin: Bool) async throws -> Response { .json(#""status \#(admin)""#) }
        func sync(peer: String?) async throws -> Response { .json(#""sync \#(peer ?? "all")""#) }
        func offerKeys(_ request: Request, logger: Logger) async throws -> Response { .json(#""keys""#) }
    }

    static let tokens = AccessTokens(grants: [
        ("admin-token-0123456789abcdef", .init(role: .admin)), ("pull-token-0123456789abcdef", .init(role: .pull)),
        ("push-token-0123456789abcdef", .init(role: .push)),
    ])

    static func bearer(_ role: String) -> HTTPFields { [.authorization: "Bearer \(role)-token-0123456789abcdef"] }

    static func body(_ response: TestResponse) -> String { String(buffer: response.body) }

    @Test("Every backend's common calls reach it with their roles checked; a pull reaches it read")
    func commonCalls() async throws {
        let app = Application(router: ReplicationAPI(backend: NamingBackend(optionalRoutes: []), tokens: Self.tokens).router())
        try await app.test(.router) { client in
            #expect(try await client.execute(uri: "/healthz", method: .get).status == .ok)
            #expect(try await client.execute(uri: "/v1/state", method: .get).status == .unauthorized)
            let pull = try await client.execute(uri: "/v1/changesets/pull", method: .post, headers: Self.bearer("pull"),
                                                body: ByteBuffer(string: #"{"limit":7,"wait_ms":30}"#))
            #expect(pull.status == .ok && Self.body(pull) == #""pull 7 30""#)
            let bad = try await client.execute(uri: "/v1/changesets/pull", method: .post, headers: Self.bearer("pull"),
                                               body: ByteBuffer(string: #"{"limit":0}"#))
            #expect(bad.status == .badRequest)
            #expect(try await client.execute(uri: "/v1/changesets?limit=3", method: .get, headers: Self.bearer("pull")).status == .ok)
            #expect(try await client.execute(uri: "/v1/changesets", method: .post, headers: Self.bearer("pull")).status == .forbidden)
            #expect(try await client.execute(uri: "/v1/changesets", method: .post, headers: Self.bearer("push")).status == .ok)
            #expect(try await client.execute(uri: "/v1/snapshot", method: .get, headers: Self.bearer("push")).status == .forbidden)
            let status = try await client.execute(uri: "/v1/status", method: .get, headers: Self.bearer("admin"))
            #expect(Self.body(status) == #""status true""#)
            #expect(Self.body(try await client.execute(uri: "/v1/status", method: .get, headers: Self.bearer("pull"))) == #""status false""#)
        }
    }

    @Test("A call a backend does not serve is a 404, as on a server that never had it; one it serves is routed with its role")
    func optionalCalls() async throws {
        let without = Application(router: ReplicationAPI(backend: NamingBackend(optionalRoutes: []), tokens: Self.tokens).router())
        try await without.test(.router) { client in
            #expect(try await client.execute(uri: "/v1/sync", method: .post, headers: Self.bearer("admin")).status == .notFound)
            #expect(try await client.execute(uri: "/v1/keys", method: .put, headers: Self.bearer("admin")).status == .notFound)
            let put = try await client.execute(uri: "/v1/snapshot", method: .put, headers: Self.bearer("admin"))
            #expect(put.status == .methodNotAllowed && put.headers[.allow] == "GET", "the path exists for GET")
        }
        let with = Application(router: ReplicationAPI(backend: NamingBackend(optionalRoutes: [.syncNow, .keyOffer]), tokens: Self.tokens).router())
        try await with.test(.router) { client in
            #expect(try await client.execute(uri: "/v1/sync?peer=b", method: .post, headers: Self.bearer("push")).status == .forbidden)
            let sync = try await client.execute(uri: "/v1/sync?peer=b", method: .post, headers: Self.bearer("admin"))
            #expect(sync.status == .ok && Self.body(sync) == #""sync b""#)
            #expect(try await client.execute(uri: "/v1/sync", method: .get, headers: Self.bearer("admin")).status == .methodNotAllowed)
            #expect(try await client.execute(uri: "/v1/keys", method: .put, headers: Self.bearer("push")).status == .ok)
        }
    }
}
