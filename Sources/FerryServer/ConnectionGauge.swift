import Hummingbird
import HummingbirdCore
import Synchronization

/// Counts the server's open connections and bounds them (`server.max_connections`): past
/// ``maximum`` the server stops accepting (new connections wait in the kernel's queue, so
/// idle ones cannot use up the process's descriptors), and a request that arrives on one of
/// the last ``reserve`` connections before the bound is answered 503 with `Retry-After` and
/// its connection closed (``ConnectionPressureMiddleware``), so a client near the bound
/// hears that the daemon is busy instead of waiting.
public final class ConnectionGauge: AvailableConnectionsDelegate {
    /// The most connections open at once.
    public let maximum: Int
    /// Connections kept for the 503 answers.
    public var reserve: Int { max(1, maximum / 8) }
    private let open = Atomic<Int>(0)

    public init(maximum: Int) {
        self.maximum = max(2, maximum)
    }

    /// The connections open now.
    public var count: Int { open.load(ordering: .relaxed) }

    /// Whether a request on a connection opened now should be turned away.
    var isUnderPressure: Bool { count > maximum - reserve }

    public func connectionOpened() { open.add(1, ordering: .relaxed) }
    public func connectionClosed() { open.subtract(1, ordering: .relaxed) }
    public func isAcceptingNewConnections() -> Bool { count < maximum }
}

/// Answers 503 with `Retry-After: 1` and closes the connection while the server is within
/// ``ConnectionGauge/reserve`` connections of its bound (`/healthz` is still answered).
struct ConnectionPressureMiddleware<Context: RequestContext>: RouterMiddleware {
    let gauge: ConnectionGauge

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard gauge.isUnderPressure, request.uri.path != "/healthz" else { return try await next(request, context) }
        var response = try APIError.busy("this daemon has \(gauge.count) connections open (server.max_connections is \(gauge.maximum)); try again shortly")
            .response(from: request, context: context)
        response.headers[.connection] = "close"
        return response
    }
}
