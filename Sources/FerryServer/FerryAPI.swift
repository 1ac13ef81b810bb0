import Foundation
import Hummingbird
import Logging
import Prometheus
import FerryStore
import FerrySync

/// The replication API of a daemon's store (docs/PROTOCOL.md, docs/openapi.yaml): the backend of
/// ``ReplicationAPI`` that answers from a store.
///
/// - `GET /healthz`: liveness (503 while the store cannot be opened; why, only to admin tokens
///   in `/v1/status`);
/// - `GET /v1/state`: store UUID, model hash, version vector;
/// - pulls (``PullRequest``): the change sets the caller lacks, streamed as JSON lines page by
///   page so memory stays flat (``PullRoute``);
/// - `GET /v1/snapshot`: a consistent snapshot of the store, streamed as a SQLite file, for a
///   new peer to start from (``SnapshotRoute``);
/// - `POST /v1/changesets`: JSON lines in, all checked before any is applied; answers what was
///   applied, duplicate, waiting and quarantined (``PushRoute``);
/// - `POST /v1/changesets/stream`: a standing push, batch after batch on one request, each
///   answered by a report line as it is applied (``PushStreamRoute``);
/// - `GET /v1/status`: the daemon's view of its peers and backlog (URLs, paths and error texts
///   only to admin tokens); `POST /v1/sync?peer=NAME` (admin): a sync round now;
/// - `GET /metrics`: Prometheus metrics.
///
/// While the store is not open (``StoreGate``), the store's routes answer 503 with the reason.
public struct FerryAPI: Sendable {
    let gate: StoreGate
    let tokens: AccessTokens
    let maxBodyBytes: Int
    let bodySlots: BodySlots
    let connections: ConnectionGauge?
    let control: (any DaemonControl)?
    let metrics: PrometheusCollectorRegistry?

    /// An API over `endpoint`, accepting `tokens`, refusing bodies over
    /// `maxBodyBytes` with 413 and pushes past `maxConcurrentBodies` held at once with 503,
    /// serving `metrics` (the registry the process's `MetricsSystem` was bootstrapped with)
    /// at `/metrics`. `control` answers `/v1/status` and `/v1/sync` (without one, both answer 503).
    public init(endpoint: ReplicationEndpoint, tokens: AccessTokens, maxBodyBytes: Int, maxConcurrentBodies: Int = 4,
                control: (any DaemonControl)? = nil, metrics: PrometheusCollectorRegistry? = nil) {
        self.init(gate: StoreGate(open: endpoint), tokens: tokens, maxBodyBytes: maxBodyBytes, maxConcurrentBodies: maxConcurrentBodies,
                  control: control, metrics: metrics)
    }

    /// An API over the store behind `gate`, which may open only later; otherwise as
    /// ``init(endpoint:tokens:maxBodyBytes:maxConcurrentBodies:control:metrics:)``.
    /// `connections`, when given, is the server's connection bound: near it, requests get 503.
    public init(gate: StoreGate, tokens: AccessTokens, maxBodyBytes: Int, maxConcurrentBodies: Int = 4, connections: ConnectionGauge? = nil,
                control: (any DaemonControl)? = nil, metrics: PrometheusCollectorRegistry? = nil) {
        self.gate = gate
        self.connections = connections
        self.tokens = tokens
        self.maxBodyBytes = maxBodyBytes
        self.bodySlots = BodySlots(capacity: maxConcurrentBodies)
        self.control = control
        self.metrics = metrics
    }

    /// The routes (``ReplicationAPI`` over this store).
    public func router() -> Router<FerryRequestContext> {
        ReplicationAPI(backend: self, tokens: tokens, connections: connections, metrics: metrics).router()
    }
}

/// The daemon's answers to the replication API's calls, from its store.
extension FerryAPI: ReplicationBackend {
    package var optionalRoutes: Set<ReplicationRoute> { [.pushStream, .syncNow] }

    package func health() async -> Response {
        // (No token is needed here, so the reason, which names paths, is left to the log and to admins' /v1/status.)
        guard case .unavailable(_, let since, let view) = await gate.state else { return Response.json(#"{"status":"ok"}"#) }
        let body = JSONValue.sortedObject([
            "status": .string("store unavailable"),
            "reason": .string("the store is not open; the daemon's log and /v1/status (admin token) say why"),
            "since": .string(ISO8601DateFormatter().string(from: since)), "read_only_view": .bool(view != nil),
        ])
        return Response.json(body.text, status: .serviceUnavailable)
    }

    package func state() async throws -> Response {
        let endpoint = try await gate.readableEndpointOrUnavailable()
        do {
            return Response.json(try await endpoint.state().json)
        } catch {
            throw APIError.unavailable("the store cannot be read now: \(error)", cause: error)
        }
    }

    package func pull(_ pull: PullRequest, request: Request, logger: Logger) async throws -> Response {
        try await PullRoute(gate: gate).answer(request, after: pull.after, limit: pull.limit, logger: logger)
    }

    package func push(_ request: Request, allowedOrigins: Set<UUID>?, logger: Logger) async throws -> Response {
        try await pushRoute.answer(request, allowedOrigins: allowedOrigins, logger: logger)
    }

    package func pushStream(_ request: Request, allowedOrigins: Set<UUID>?, logger: Logger) async throws -> Response {
        try await PushStreamRoute(push: pushRoute).answer(request, allowedOrigins: allowedOrigins, logger: logger)
    }

    package func snapshot() async throws -> Response {
        try await SnapshotRoute(gate: gate).answer()
    }

    package func status(admin: Bool) async throws -> Response {
        guard let control else { throw APIError.unavailable("this server runs no sync loop") }
        let document = await control.status()
        return Response.json(admin ? document.json : document.forPeers.json)
    }

    package func sync(peer: String?) async throws -> Response {
        guard let control else { throw APIError.unavailable("this server runs no sync loop") }
        switch await control.sync(peer: peer) {
        case .ran(let answer):
            return Response.json(WireJSON.encode(answer), status: answer.succeeded ? .ok : .badGateway)
        case .unknownPeer(let name):
            throw APIError.notFound("no peer named '\(name)' in the configuration")
        case .unavailable(let reason):
            throw APIError.unavailable(reason)
        }
    }

    private var pushRoute: PushRoute { PushRoute(gate: gate, maxBodyBytes: maxBodyBytes, bodySlots: bodySlots) }
}

extension StoreGate {
    /// The store's endpoint for writes, or ``APIError/unavailable(_:cause:)`` with the reason while it is not open.
    func endpointOrUnavailable() async throws(APIError) -> ReplicationEndpoint {
        do { return try endpoint() } catch { throw .unavailable(error.description, cause: error) }
    }

    /// An endpoint to read from (the store, or its read-only view), or ``APIError/unavailable(_:cause:)``.
    func readableEndpointOrUnavailable() async throws(APIError) -> ReplicationEndpoint {
        do { return try readableEndpoint() } catch { throw .unavailable(error.description, cause: error) }
    }
}
