import Foundation
import Hummingbird
import Logging
import Prometheus
import FerryStore
import FerrySync

/// The HTTP API of a Ferry store (docs/PROTOCOL.md, docs/openapi.yaml):
///
/// - `GET /healthz`: liveness, no token needed (503 while the store cannot be
///   opened; why, only to admin tokens in `/v1/status`);
/// - `GET /v1/state`: store UUID, model hash, version vector;
/// - `POST /v1/changesets/pull` (`{"after":VECTOR,"limit":N}`, what peers use) and
///   `GET /v1/changesets?after=VECTOR&limit=N`: the change sets the caller
///   lacks, streamed as JSON lines (NDJSON), page by page so memory stays flat
///   (``PullRoute``);
/// - `GET /v1/snapshot`: a consistent snapshot of the store, streamed as a SQLite
///   file, for a new peer to start from (``SnapshotRoute``);
/// - `POST /v1/changesets`: JSON lines in, all checked before any is applied;
///   answers what was applied, duplicate, waiting and quarantined (``PushRoute``);
/// - `POST /v1/changesets/stream`: a standing push, batch after batch on one request, each
///   answered by a report line as it is applied (``PushStreamRoute``);
/// - `GET /v1/status`: the daemon's view of its peers and backlog (URLs, paths and
///   error texts only to admin tokens);
/// - `POST /v1/sync?peer=NAME` (admin token): a sync round now;
/// - `GET /metrics`: Prometheus metrics.
///
/// Every route but `/healthz` needs `Authorization: Bearer TOKEN` with a token
/// of the tokens file (``BearerAuthentication``): 401 without detail otherwise,
/// 403 when a peer token asks for an admin action. Errors are ``APIError``s,
/// answered as `{"error":{"message":…}}`. While the store is not open
/// (``StoreGate``), the store's routes answer 503 with the reason.
public struct FerryAPI: Sendable {
    let gate: StoreGate
    let tokens: AccessTokens
    let maxBodyBytes: Int
    let bodySlots: BodySlots
    let connections: ConnectionGauge?
    let control: (any SyncControl)?
    let metrics: PrometheusCollectorRegistry?

    /// An API over `endpoint`, accepting `tokens`, refusing bodies over
    /// `maxBodyBytes` with 413 and pushes past `maxConcurrentBodies` held at once with 503,
    /// serving `metrics` (the registry the process's `MetricsSystem` was bootstrapped with)
    /// at `/metrics`. `control` answers `/v1/status` and `/v1/sync` (without one, both answer 503).
    public init(endpoint: ReplicationEndpoint, tokens: AccessTokens, maxBodyBytes: Int, maxConcurrentBodies: Int = 4,
                control: (any SyncControl)? = nil, metrics: PrometheusCollectorRegistry? = nil) {
        self.init(gate: StoreGate(open: endpoint), tokens: tokens, maxBodyBytes: maxBodyBytes, maxConcurrentBodies: maxConcurrentBodies,
                  control: control, metrics: metrics)
    }

    /// An API over the store behind `gate`, which may open only later; otherwise as
    /// ``init(endpoint:tokens:maxBodyBytes:maxConcurrentBodies:control:metrics:)``.
    /// `connections`, when given, is the server's connection bound: near it, requests get 503.
    public init(gate: StoreGate, tokens: AccessTokens, maxBodyBytes: Int, maxConcurrentBodies: Int = 4, connections: ConnectionGauge? = nil,
                control: (any SyncControl)? = nil, metrics: PrometheusCollectorRegistry? = nil) {
        self.gate = gate
        self.connections = connections
        self.tokens = tokens
        self.maxBodyBytes = maxBodyBytes
        self.bodySlots = BodySlots(capacity: maxConcurrentBodies)
        self.control = control
        self.metrics = metrics
    }

    /// The routes.
    public func router() -> Router<FerryRequestContext> {
        let router = Router(context: FerryRequestContext.self)
        // Request counts and latency (http_server_request_duration_seconds), through swift-metrics.
        router.add(middleware: MetricsMiddleware())
        if let connections { router.add(middleware: ConnectionPressureMiddleware(gauge: connections)) }
        var allowed: [String: [HTTPRequest.Method]] = [
            "/healthz": [.get], "/v1/state": [.get], "/v1/changesets": [.get, .post], "/v1/changesets/pull": [.post],
            "/v1/changesets/stream": [.post], "/v1/snapshot": [.get], "/v1/status": [.get], "/v1/sync": [.post],
        ]
        if metrics != nil { allowed["/metrics"] = [.get] }
        router.add(middleware: MethodNotAllowedMiddleware(allowed: allowed))
        router.get("healthz") { _, _ in try await health() }
        if let metrics {
            router.group("metrics").add(middleware: BearerAuthentication(tokens: tokens)).get { _, _ in
                Response(status: .ok, headers: [.contentType: "text/plain; version=0.0.4"],
                         body: ResponseBody(byteBuffer: ByteBuffer(bytes: metrics.emitToBuffer())))
            }
        }
        let pull = PullRoute(gate: gate)
        let push = PushRoute(gate: gate, maxBodyBytes: maxBodyBytes, bodySlots: bodySlots)
        let stream = PushStreamRoute(push: push)
        let snapshot = SnapshotRoute(gate: gate)
        router.group("v1")
            .add(middleware: BearerAuthentication(tokens: tokens))
            .get("state") { _, _ in try await state() }
            .get("changesets") { request, context in
                try context.require(.pull)
                return try await pull.answer(request, logger: context.logger)
            }
            .post("changesets") { request, context in
                try context.require(.push)
                return try await push.answer(request, allowedOrigins: context.grant?.pushOrigins, logger: context.logger)
            }
            .post("changesets/stream") { request, context in
                try context.require(.push)
                return try await stream.answer(request, allowedOrigins: context.grant?.pushOrigins, logger: context.logger)
            }
            .post("changesets/pull") { request, context in
                try context.require(.pull)
                return try await pull.answerPost(request, logger: context.logger)
            }
            .get("snapshot") { _, context in
                try context.require(.pull)
                return try await snapshot.answer()
            }
            .get("status") { _, context in try await status(role: context.role) }
            .post("sync") { request, context in
                try context.require(.admin)
                return try await sync(peer: request.uri.queryParameters.get("peer"))
            }
        return router
    }

    // MARK: - Handlers

    private func health() async throws -> Response {
        // (No token is needed here, so the reason, which names paths, is left to the log and to admins' /v1/status.)
        guard case .unavailable(_, let since, let view) = await gate.state else { return Self.json(#"{"status":"ok"}"#) }
        let body = JSONValue.sortedObject([
            "status": .string("store unavailable"),
            "reason": .string("the store is not open; the daemon's log and /v1/status (admin token) say why"),
            "since": .string(ISO8601DateFormatter().string(from: since)), "read_only_view": .bool(view != nil),
        ])
        return Self.json(body.text, status: .serviceUnavailable)
    }

    private func state() async throws -> Response {
        let endpoint = try await gate.readableEndpointOrUnavailable()
        do {
            return Self.json(try await endpoint.state().json)
        } catch {
            throw APIError.unavailable("the store cannot be read now: \(error)")
        }
    }

    private func status(role: AccessTokens.Role?) async throws -> Response {
        guard let control else { throw APIError.unavailable("this server runs no sync loop") }
        let document = await control.status()
        return Self.json(role == .admin ? document.json : document.forPeers.json)
    }

    private func sync(peer: String?) async throws -> Response {
        guard let control else { throw APIError.unavailable("this server runs no sync loop") }
        switch await control.sync(peer: peer) {
        case .ran(let answer):
            return Self.json(WireJSON.encode(answer), status: answer.succeeded ? .ok : .badGateway)
        case .unknownPeer(let name):
            throw APIError.notFound("no peer named '\(name)' in the configuration")
        case .unavailable(let reason):
            throw APIError.unavailable(reason)
        }
    }

    package static func json(_ text: String, status: HTTPResponse.Status = .ok) -> Response {
        Response(status: status, headers: [.contentType: "application/json"], body: ResponseBody(byteBuffer: ByteBuffer(string: text)))
    }
}

extension StoreGate {
    /// The store's endpoint for writes, or ``APIError/unavailable(_:)`` with the reason while it is not open.
    func endpointOrUnavailable() async throws(APIError) -> ReplicationEndpoint {
        do { return try endpoint() } catch { throw .unavailable(error.description) }
    }

    /// An endpoint to read from (the store, or its read-only view), or ``APIError/unavailable(_:)``.
    func readableEndpointOrUnavailable() async throws(APIError) -> ReplicationEndpoint {
        do { return try readableEndpoint() } catch { throw .unavailable(error.description) }
    }
}
