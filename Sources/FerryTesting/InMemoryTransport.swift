import Foundation
import Hummingbird
import Logging
import NIOCore
import NIOEmbedded
import Synchronization
import FerryServer
import FerrySync

/// A ``PeerTransport`` without sockets: each request goes straight to the router
/// of an in-process server (a ``FerryAPI`` over any replica store), and its answer
/// comes back as the peer client would read it off the network. Requests to a host
/// with no router, or while the link is cut, fail as an unreachable peer does.
///
/// With it a test runs whole sync rounds (``PeerSync``, `SyncCoordinator`) between
/// stores in one process, on the real routes, without ports or `ferry run`
/// (``ReplicationFleet`` builds such a fleet).
public final class InMemoryTransport: PeerTransport {
    private struct State {
        var routers: [String: RouterResponder<FerryRequestContext>] = [:]
        var cut: Set<String> = []
        var refused: [String: Int] = [:]
        var requests = 0
        /// Requests wait here while ``holdRequests()`` holds them.
        var holding = false
        var held: [CheckedContinuation<Void, Never>] = []
    }

    private let state = Mutex(State())
    private let logger = Logger(label: "ferry.in-memory-transport")

    public init() {}

    /// Serves `router` at `http://<host>` (no port).
    public func serve(_ router: Router<FerryRequestContext>, at host: String) {
        let responder = router.buildResponder()
        state.withLock { $0.routers[host] = responder }
    }

    /// The base URL of a host served here.
    public static func url(of host: String) -> URL {
        URL(string: "http://\(host)") ?? URL(fileURLWithPath: "/")
    }

    /// Cuts the link to `host` (its requests fail as unreachable) or heals it.
    public func setCut(_ cut: Bool, host: String) {
        state.withLock { state in
            if cut { state.cut.insert(host) } else { state.cut.remove(host) }
        }
    }

    /// Whether the link to `host` is cut.
    public func isCut(host: String) -> Bool {
        state.withLock { $0.cut.contains(host) }
    }

    /// Answers every `method` request to `path` (on any host) with `status` and an error body,
    /// without reaching the router (nil: let them through again).
    public func refuse(_ method: String, _ path: String, with status: Int?) {
        state.withLock { $0.refused[method + " " + path] = status }
    }

    /// How many requests reached a router so far.
    public var requestCount: Int { state.withLock { $0.requests } }

    /// Makes every request from now on wait before it reaches its router, until ``releaseRequests()``.
    public func holdRequests() {
        state.withLock { $0.holding = true }
    }

    /// Lets the held requests, and those to come, through.
    public func releaseRequests() {
        let held = state.withLock { state in
            state.holding = false
            defer { state.held = [] }
            return state.held
        }
        for request in held { request.resume() }
    }

    /// How many requests are waiting for ``releaseRequests()``.
    public var heldCount: Int { state.withLock { $0.held.count } }

    public func send(_ request: PeerRequest) async throws(PeerError) -> PeerResponse {
        await withCheckedContinuation { continuation in
            let waits = state.withLock { state in
                if state.holding { state.held.append(continuation) }
                return state.holding
            }
            if !waits { continuation.resume() }
        }
        let host = request.url.host ?? ""
        let responder = state.withLock { state -> RouterResponder<FerryRequestContext>? in
            guard !state.cut.contains(host), let responder = state.routers[host] else { return nil }
            state.requests += 1
            return responder
        }
        guard let responder else { throw PeerError.unreachable("\(host): no in-memory route to it") }
        if let status = state.withLock({ $0.refused[request.method + " " + request.url.path] }) {
            return PeerResponse(status: status, body: Data(#"{"error":{"message":"refused by the test"}}"#.utf8))
        }
        var path = request.url.path.isEmpty ? "/" : request.url.path
        if let query = request.url.query { path += "?" + query }
        var fields = HTTPFields()
        for (name, value) in request.headers {
            // (`HTTPFields.Element` is HTTPTypes' `HTTPField`, which Hummingbird does not export by name.)
            if let field = HTTPFields.Element.Name(name) { fields.append(HTTPFields.Element(name: field, value: value)) }
        }
        let body = request.body.map { ByteBuffer(bytes: $0) } ?? ByteBuffer()
        fields[.contentLength] = String(body.readableBytes)
        let head = HTTPRequest(method: HTTPRequest.Method(request.method) ?? .get, scheme: "http", authority: host, path: path, headerFields: fields)
        let context = FerryRequestContext(source: .init(channel: NIOAsyncTestingChannel(), logger: logger))
        do {
            let response = try await responder.respond(to: Request(head: head, body: RequestBody(buffer: body)), context: context)
            let collector = BodyCollector()
            try await response.body.write(collector)
            return PeerResponse(status: Int(response.status.code), body: Data(buffer: collector.collected))
        } catch let error as any HTTPResponseError {
            // As the server would answer it.
            let response = try? error.response(from: Request(head: head, body: RequestBody(buffer: ByteBuffer())), context: context)
            var data = Data()
            if let response {
                let collector = BodyCollector()
                try? await response.body.write(collector)
                data = Data(buffer: collector.collected)
            }
            return PeerResponse(status: Int(error.status.code), body: data)
        } catch {
            throw PeerError.unreachable("\(host): \(error)", cause: error)
        }
    }
}

/// Collects a response body written by a route.
private final class BodyCollector: ResponseBodyWriter {
    private let buffer = Mutex(ByteBuffer())

    var collected: ByteBuffer { buffer.withLock { $0 } }

    func write(_ part: ByteBuffer) async throws {
        buffer.withLock { _ = $0.writeImmutableBuffer(part) }
    }

    func finish(_ trailingHeaders: HTTPFields?) async throws {}
}
