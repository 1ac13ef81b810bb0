import Foundation
import Hummingbird
import Logging
import Prometheus

/// What serves the replication API of docs/PROTOCOL.md: a daemon's store (``FerryAPI``) or a
/// relay's database (FerryRelay). ``ReplicationAPI`` writes the routes, the tokens' roles, the
/// methods each path takes, metrics and the connection bound once; a backend answers each call.
///
/// Errors are ``APIError``s (their status and `{"error":{"message":…}}` body); anything else a
/// handler throws is a 500 from Hummingbird. A call a backend does not serve is left out of
/// ``optionalRoutes``: its path then answers 404, as on a server that never had it.
package protocol ReplicationBackend: Sendable {
    /// The optional calls this backend serves, besides state, pulls, pushes, snapshot downloads and status.
    var optionalRoutes: Set<ReplicationRoute> { get }

    /// `GET /healthz` (no token): `{"status":"ok"}`, or 503 with why not.
    func health() async -> Response
    /// `GET /v1/state`: the store's (or fleet's) UUID, model hash, version vector and keys.
    func state() async throws -> Response
    /// `POST /v1/changesets/pull` and `GET /v1/changesets`: the change sets the caller lacks.
    func pull(_ pull: PullRequest, request: Request, logger: Logger) async throws -> Response
    /// `POST /v1/changesets`: change sets in, each checked before any is kept. `allowedOrigins`: the
    /// origins the caller's token may push for (nil: any).
    func push(_ request: Request, allowedOrigins: Set<UUID>?, logger: Logger) async throws -> Response
    /// `GET /v1/snapshot`: a snapshot a new store starts from.
    func snapshot() async throws -> Response
    /// `GET /v1/status`: what the server holds and does; details (paths, URLs, error texts) to admins only.
    func status(admin: Bool) async throws -> Response

    /// `POST /v1/changesets/stream` (``ReplicationRoute/pushStream``): a standing push.
    func pushStream(_ request: Request, allowedOrigins: Set<UUID>?, logger: Logger) async throws -> Response
    /// `PUT /v1/snapshot` (``ReplicationRoute/snapshotUpload``): a daemon's snapshot for new stores.
    func takeSnapshot(_ request: Request, allowedOrigins: Set<UUID>?, logger: Logger) async throws -> Response
    /// `PUT /v1/keys` (``ReplicationRoute/keyOffer``): a daemon's keys, of which endorsed rotations are taken.
    func offerKeys(_ request: Request, logger: Logger) async throws -> Response
    /// `POST /v1/sync?peer=NAME` (``ReplicationRoute/syncNow``, admin): a sync round now.
    func sync(peer: String?) async throws -> Response
}

/// The calls of the replication API that not every backend serves.
package enum ReplicationRoute: Sendable, Hashable {
    /// `POST /v1/changesets/stream` (a daemon).
    case pushStream
    /// `PUT /v1/snapshot` (a relay).
    case snapshotUpload
    /// `PUT /v1/keys` (a relay).
    case keyOffer
    /// `POST /v1/sync` (a daemon).
    case syncNow
}

extension ReplicationBackend {
    package func pushStream(_ request: Request, allowedOrigins: Set<UUID>?, logger: Logger) async throws -> Response {
        throw APIError.notFound("this server takes no push stream")
    }

    package func takeSnapshot(_ request: Request, allowedOrigins: Set<UUID>?, logger: Logger) async throws -> Response {
        throw APIError.notFound("this server takes no snapshot uploads")
    }

    package func offerKeys(_ request: Request, logger: Logger) async throws -> Response {
        throw APIError.notFound("this server takes no key offers")
    }

    package func sync(peer: String?) async throws -> Response {
        throw APIError.notFound("this server runs no sync rounds")
    }
}

/// The replication API's routes over one ``ReplicationBackend``, as `ferry run` and `ferry relay` serve them.
///
/// Every route but `/healthz` needs `Authorization: Bearer TOKEN` with a token of the tokens file
/// (``BearerAuthentication``): 401 without detail otherwise, 403 when the token's role does not
/// allow the call (pulls need `pull`, pushes and uploads `push`, `/v1/sync` `admin`). A path asked
/// with a method it does not take is a 405 with `Allow`. Requests are counted and timed
/// (``MetricsMiddleware``); near the server's connection bound they get 503 (``ConnectionGauge``).
package struct ReplicationAPI<Backend: ReplicationBackend>: Sendable {
    let backend: Backend
    let tokens: AccessTokens
    let connections: ConnectionGauge?
    let metrics: PrometheusCollectorRegistry?

    /// The API of `backend` for `tokens`; `metrics` (the registry the process's `MetricsSystem` was
    /// bootstrapped with) is served at `/metrics`; `connections`, when given, is the server's connection bound.
    package init(backend: Backend, tokens: AccessTokens, connections: ConnectionGauge? = nil, metrics: PrometheusCollectorRegistry? = nil) {
        self.backend = backend
        self.tokens = tokens
        self.connections = connections
        self.metrics = metrics
    }

    /// The paths and the methods each takes, for this backend.
    var allowedMethods: [String: [HTTPRequest.Method]] {
        let routes = backend.optionalRoutes
        var allowed: [String: [HTTPRequest.Method]] = [
            "/healthz": [.get], "/v1/state": [.get], "/v1/changesets": [.get, .post], "/v1/changesets/pull": [.post],
            "/v1/snapshot": routes.contains(.snapshotUpload) ? [.get, .put] : [.get], "/v1/status": [.get],
        ]
        if routes.contains(.pushStream) { allowed["/v1/changesets/stream"] = [.post] }
        if routes.contains(.keyOffer) { allowed["/v1/keys"] = [.put] }
        if routes.contains(.syncNow) { allowed["/v1/sync"] = [.post] }
        if metrics != nil { allowed["/metrics"] = [.get] }
        return allowed
    }

    /// The routes.
    package func router() -> Router<FerryRequestContext> {
        let router = Router(context: FerryRequestContext.self)
        let backend = self.backend
        // Request counts and latency (http_server_request_duration_seconds), through swift-metrics.
        router.add(middleware: MetricsMiddleware())
        if let connections { router.add(middleware: ConnectionPressureMiddleware(gauge: connections)) }
        router.add(middleware: MethodNotAllowedMiddleware(allowed: allowedMethods))
        router.get("healthz") { _, _ in await backend.health() }
        if let metrics {
            router.group("metrics").add(middleware: BearerAuthentication(tokens: tokens)).get { _, _ in
                Response(status: .ok, headers: [.contentType: "text/plain; version=0.0.4"],
                         body: ResponseBody(byteBuffer: ByteBuffer(bytes: metrics.emitToBuffer())))
            }
        }
        let v1 = router.group("v1").add(middleware: BearerAuthentication(tokens: tokens))
        v1.get("state") { _, _ in try await backend.state() }
        v1.get("changesets") { request, context in
            try context.require(.pull)
            return try await backend.pull(try PullRequest.fromQuery(of: request), request: request, logger: context.logger)
        }
        v1.post("changesets/pull") { request, context in
            try context.require(.pull)
            return try await backend.pull(try await PullRequest.fromBody(of: request), request: request, logger: context.logger)
        }
        v1.post("changesets") { request, context in
            try context.require(.push)
            return try await backend.push(request, allowedOrigins: context.grant?.pushOrigins, logger: context.logger)
        }
        v1.get("snapshot") { _, context in
            try context.require(.pull)
            return try await backend.snapshot()
        }
        v1.get("status") { _, context in try await backend.status(admin: context.role == .admin) }
        let routes = backend.optionalRoutes
        if routes.contains(.pushStream) {
            v1.post("changesets/stream") { request, context in
                try context.require(.push)
                return try await backend.pushStream(request, allowedOrigins: context.grant?.pushOrigins, logger: context.logger)
            }
        }
        if routes.contains(.snapshotUpload) {
            v1.put("snapshot") { request, context in
                try context.require(.push)
                return try await backend.takeSnapshot(request, allowedOrigins: context.grant?.pushOrigins, logger: context.logger)
            }
        }
        if routes.contains(.keyOffer) {
            v1.put("keys") { request, context in
                try context.require(.push)
                return try await backend.offerKeys(request, logger: context.logger)
            }
        }
        if routes.contains(.syncNow) {
            v1.post("sync") { request, context in
                try context.require(.admin)
                return try await backend.sync(peer: request.uri.queryParameters.get("peer"))
            }
        }
        return router
    }
}

extension Response {
    /// A JSON answer of the replication API.
    package static func json(_ text: String, status: HTTPResponse.Status = .ok) -> Response {
        Response(status: status, headers: [.contentType: "application/json"], body: ResponseBody(byteBuffer: ByteBuffer(string: text)))
    }
}
