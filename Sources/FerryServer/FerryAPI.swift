import Foundation
import Hummingbird
import Logging
import Metrics
import Prometheus
import CompressNIO
import FerryStore
import FerrySQLite
import FerrySync

/// The HTTP API of a Ferry store (docs/PROTOCOL.md, docs/openapi.yaml):
///
/// - `GET /healthz`: liveness, no token needed (503 with the reason while the
///   store cannot be opened);
/// - `GET /v1/state`: store UUID, model hash, version vector;
/// - `GET /v1/changesets?after=VECTOR&limit=N`: the change sets the caller
///   lacks, streamed as JSON lines (NDJSON), page by page so memory stays flat;
/// - `POST /v1/changesets`: JSON lines in, all checked before any is applied;
///   answers what was applied, duplicate, waiting and quarantined;
/// - `GET /v1/status`: the daemon's view of its peers and backlog;
/// - `POST /v1/sync?peer=NAME` (admin token): a sync round now.
///
/// Every `/v1` route needs `Authorization: Bearer TOKEN` with a token of the
/// tokens file: 401 without detail otherwise, 403 when a peer token asks for
/// an admin action. Errors are `{"error":{"message":…}}`. While the store is
/// not open (``StoreGate``), the store's routes answer 503 with the reason.
public struct FerryAPI: Sendable {
    /// Most change sets one pull request may ask for.
    public static let maximumLimit = 10_000
    /// Most change sets read from the store per streamed chunk.
    static let pageSize = 16
    /// Change sets in an answer's first chunk; later chunks are sized from the bytes
    /// per change set seen so far, so that an answer of large change sets ends near
    /// ``answerBytes`` instead of a whole chunk past it.
    static let firstPageSize = 4
    /// A pull answer stops after the chunk that reaches this many bytes, so one answer
    /// stays a bounded size whatever the limit; the caller asks again. Small, because
    /// the caller checks the next answer while it applies this one: only the first
    /// answer of a catch-up is waited for, so the smaller it is the sooner replay starts
    /// (at 4 MiB, a third of W3's catch-up of 100,000 objects went to waiting for it).
    public static let answerBytes = 1 << 20

    /// zlib's fastest level for pull answers: change sets (long runs of repeated URIs) still
    /// shrink about 15× (17× at the default level), in half the CPU time (0.11 s instead of
    /// 0.21 s per 22 MB), which on a catch-up is time the serving peer's store work could use.
    static let answerCompression = ZlibConfiguration(compressionLevel: .fastestCompression)

    let gate: StoreGate
    let tokens: AccessTokens
    let maxBodyBytes: Int
    let control: (any SyncControl)?
    let metrics: PrometheusCollectorRegistry?

    /// An API over `endpoint`, accepting `tokens`, refusing bodies over
    /// `maxBodyBytes` with 413, serving `metrics` (the registry the process's
    /// `MetricsSystem` was bootstrapped with) at `/metrics`. `control` answers
    /// `/v1/status` and `/v1/sync` (without one, both answer 503).
    public init(endpoint: ReplicationEndpoint, tokens: AccessTokens, maxBodyBytes: Int, control: (any SyncControl)? = nil,
                metrics: PrometheusCollectorRegistry? = nil) {
        self.init(gate: StoreGate(open: endpoint), tokens: tokens, maxBodyBytes: maxBodyBytes, control: control, metrics: metrics)
    }

    /// An API over the store behind `gate`, which may open only later; otherwise as
    /// ``init(endpoint:tokens:maxBodyBytes:control:metrics:)``.
    public init(gate: StoreGate, tokens: AccessTokens, maxBodyBytes: Int, control: (any SyncControl)? = nil,
                metrics: PrometheusCollectorRegistry? = nil) {
        self.gate = gate
        self.tokens = tokens
        self.maxBodyBytes = maxBodyBytes
        self.control = control
        self.metrics = metrics
    }

    /// The routes.
    public func router() -> Router<BasicRequestContext> {
        let router = Router()
        // Request counts and latency (http_server_request_duration_seconds), through swift-metrics.
        router.add(middleware: MetricsMiddleware())
        var allowed: [String: [HTTPRequest.Method]] = [
            "/healthz": [.get], "/v1/state": [.get], "/v1/changesets": [.get, .post], "/v1/status": [.get], "/v1/sync": [.post],
        ]
        if metrics != nil { allowed["/metrics"] = [.get] }
        router.add(middleware: MethodNotAllowedMiddleware(allowed: allowed))
        if let metrics {
            router.get("metrics") { request, _ in
                try authorize(request, .peer)
                return Response(status: .ok, headers: [.contentType: "text/plain; version=0.0.4"],
                                body: ResponseBody(byteBuffer: ByteBuffer(bytes: metrics.emitToBuffer())))
            }
        }
        router.get("healthz") { _, _ in
            guard case .unavailable(let reason, let since, let view) = await gate.state else { return Self.json(#"{"status":"ok"}"#) }
            let body = JSONValue.sortedObject([
                "status": .string("store unavailable"), "reason": .string(reason),
                "since": .string(ISO8601DateFormatter().string(from: since)), "read_only_view": .bool(view != nil),
            ])
            return Self.json(body.text, status: .serviceUnavailable)
        }
        router.get("v1/state") { request, _ in
            try authorize(request, .peer)
            let endpoint = try await endpoint(readOnly: true)
            do {
                return Self.json(try await endpoint.state().json)
            } catch {
                throw HTTPError(.serviceUnavailable, message: "the store cannot be read now: \(error)")
            }
        }
        router.get("v1/changesets") { request, _ in
            try authorize(request, .peer)
            return try await pull(request)
        }
        router.post("v1/changesets") { request, context in
            try authorize(request, .peer)
            return try await push(request, logger: context.logger)
        }
        router.get("v1/status") { request, _ in
            try authorize(request, .peer)
            guard let control else { throw HTTPError(.serviceUnavailable, message: "this server runs no sync loop") }
            return Self.json(await control.status().json)
        }
        router.post("v1/sync") { request, _ in
            try authorize(request, .admin)
            guard let control else { throw HTTPError(.serviceUnavailable, message: "this server runs no sync loop") }
            switch await control.sync(peer: request.uri.queryParameters.get("peer")) {
            case .ran(let answer):
                return Self.json(WireJSON.encode(answer), status: answer.succeeded ? .ok : .badGateway)
            case .unknownPeer(let name):
                throw HTTPError(.notFound, message: "no peer named '\(name)' in the configuration")
            case .unavailable(let reason):
                throw HTTPError(.serviceUnavailable, message: reason)
            }
        }
        return router
    }

    // MARK: - Handlers

    private func pull(_ request: Request) async throws -> Response {
        let vector: VersionVector
        do {
            // A form-encoded query writes spaces as '+', which never occurs in a vector's JSON otherwise.
            let after = (request.uri.queryParameters.get("after") ?? "{}").replacingOccurrences(of: "+", with: " ")
            vector = try ChangeSetCodec.decodeVector(after)
        } catch {
            throw HTTPError(.badRequest, message: "'after' must be a version vector as JSON, e.g. {\"<store UUID>\":12}: \(error.description)")
        }
        let limitText = request.uri.queryParameters.get("limit") ?? "500"
        guard let limit = Int(limitText), (1...Self.maximumLimit).contains(limit) else {
            throw HTTPError(.badRequest, message: "'limit' must be a whole number from 1 to \(Self.maximumLimit); found '\(limitText)'")
        }
        let endpoint = try await endpoint(readOnly: true)
        // The first page is read before answering, so a purged history is a clean 410, not a cut stream.
        let first: (lines: [String], cursor: Int64)
        do {
            first = try await endpoint.page(after: vector, cursor: 0, limit: min(limit, Self.firstPageSize))
        } catch let error as HistoryError {
            throw HTTPError(.gone, message: "\(error)")
        } catch {
            throw HTTPError(.serviceUnavailable, message: "the store cannot be read now: \(error)")
        }
        let gzip = Self.acceptsGzip(request)
        let body = ResponseBody { writer in
            // Each chunk is compressed as it goes (a sync flush), so the answer still streams.
            let compressor = gzip ? CompressionAlgorithm.gzip(configuration: Self.answerCompression).compressor : nil
            try compressor?.startStream()
            var page = first
            var asked = min(limit, Self.firstPageSize)
            var sent = 0
            var bytes = 0
            while true {
                var buffer = ByteBuffer()
                for line in page.lines {
                    buffer.writeString(line)
                    buffer.writeInteger(UInt8(ascii: "\n"))
                }
                bytes += buffer.readableBytes
                if let compressor {
                    try await writer.write(try buffer.compressStream(with: compressor, flush: .sync))
                } else {
                    try await writer.write(buffer)
                }
                sent += page.lines.count
                guard sent < limit, page.lines.count == asked, bytes < Self.answerBytes else { break }
                let bytesPerChangeSet = max(1, bytes / sent)
                asked = min(limit - sent, Self.pageSize, (Self.answerBytes - bytes) / bytesPerChangeSet + 1)
                page = try await endpoint.page(after: vector, cursor: page.cursor, limit: asked)
                if page.lines.isEmpty { break }
            }
            if let compressor {
                var end = ByteBuffer()
                try await writer.write(try end.compressStream(with: compressor, flush: .finish))
                try compressor.finishStream()
            }
            try await writer.finish(nil)
        }
        var headers: HTTPFields = [.contentType: "application/x-ndjson"]
        if gzip { headers[.contentEncoding] = "gzip" }
        return Response(status: .ok, headers: headers, body: body)
    }

    private func push(_ request: Request, logger: Logger) async throws -> Response {
        var request = request
        let buffer: ByteBuffer
        do {
            buffer = try await request.collectBody(upTo: maxBodyBytes)
        } catch {
            throw HTTPError(.contentTooLarge, message: "the request body is larger than server.max_body_bytes (\(maxBodyBytes) bytes); send fewer change sets per request")
        }
        var body = buffer
        switch request.headers[.contentEncoding]?.lowercased() {
        case nil, "identity":
            break
        case "gzip":
            do {
                body = try body.decompress(with: .gzip(), maxSize: maxBodyBytes)
                // (The library may stop a little past maxSize; the limit is checked here too.)
                guard body.readableBytes <= maxBodyBytes else { throw CompressNIOError.bufferOverflow }
            } catch let error as CompressNIOError where error == .bufferOverflow {
                throw HTTPError(.contentTooLarge, message: "the request body unpacks to more than server.max_body_bytes (\(maxBodyBytes) bytes); send fewer change sets per request")
            } catch {
                throw HTTPError(.badRequest, message: "the body says Content-Encoding: gzip but is not valid gzip data")
            }
        case let other?:
            throw HTTPError(.unsupportedMediaType, message: "Content-Encoding '\(other)' is not supported; send the body as is or gzip")
        }
        let lines = body.withUnsafeReadableBytes { JSONLines.split($0) }
        guard !lines.isEmpty else {
            throw HTTPError(.badRequest, message: "the body holds no change sets; send one change set (a JSON object) per line")
        }
        let endpoint = try await endpoint()
        do {
            let report = try await endpoint.apply(lines: lines)
            ReceivedMetrics.record(report, via: "push")
            return Self.json(report.json)
        } catch let error as ReplayError {
            switch error {
            case .malformed: throw HTTPError(.badRequest, message: error.description)
            case .busy: throw HTTPError(.serviceUnavailable, message: error.description)
            case .notSQLite: throw HTTPError(.internalServerError, message: error.description)
            }
        } catch {
            // The store failed (disk full, read-only, I/O): what was not applied is not recorded,
            // and the sender keeps it and sends it again after its backoff.
            Counter(label: "ferry_store_errors_total", dimensions: [("operation", "push")]).increment()
            logger.error("could not apply pushed change sets: \(error)")
            throw HTTPError(.serviceUnavailable, message: "this store cannot take change sets now (\(error)); nothing more was applied; send them again later")
        }
    }

    // MARK: - Helpers

    /// The store's endpoint — or for `readOnly` work its read-only view — or 503 with the
    /// reason while the store is not open.
    private func endpoint(readOnly: Bool = false) async throws -> ReplicationEndpoint {
        do {
            return try await readOnly ? gate.readableEndpoint() : gate.endpoint()
        } catch {
            throw HTTPError(.serviceUnavailable, message: error.description)
        }
    }

    /// Whether the caller takes gzip (`Accept-Encoding: gzip`, not `gzip;q=0`).
    static func acceptsGzip(_ request: Request) -> Bool {
        let header = request.headers[.acceptEncoding] ?? ""
        return header.split(separator: ",").contains { part in
            let fields = part.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
            return fields.first == "gzip" && !fields.dropFirst().contains { $0.replacingOccurrences(of: " ", with: "") == "q=0" }
        }
    }

    private func authorize(_ request: Request, _ needed: AccessTokens.Role) throws {
        guard let header = request.headers[.authorization], header.hasPrefix("Bearer "),
              let role = tokens.role(of: String(header.dropFirst("Bearer ".count))) else {
            throw HTTPError(.unauthorized, headers: [.wwwAuthenticate: "Bearer"], message: "unauthorized")
        }
        guard role >= needed else {
            throw HTTPError(.forbidden, message: "this action needs an admin token")
        }
    }

    static func json(_ text: String, status: HTTPResponse.Status = .ok) -> Response {
        Response(status: status, headers: [.contentType: "application/json"], body: ResponseBody(byteBuffer: ByteBuffer(string: text)))
    }
}

/// Counts of change sets taken in, by how they came (`push` to this server,
/// `pull` by this daemon) and what became of them.
public enum ReceivedMetrics {
    /// Adds one apply's counts to `ferry_changesets_received_total`.
    public static func record(_ report: ApplyReport, via: String) {
        for (result, count) in [("applied", report.applied), ("duplicate", report.duplicate),
                                ("waiting", report.waiting), ("quarantined", report.quarantined)] where count > 0 {
            Counter(label: "ferry_changesets_received_total", dimensions: [("via", via), ("result", result)]).increment(by: count)
        }
    }
}
