import Foundation
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Requests through URLSession (libcurl on Linux); HTTPS peers are checked
/// against the system trust store. The transport of every peer without a `ca_file`.
struct URLSessionTransport: PeerTransport {
    private let session: URLSession

    /// Each request may go `timeout` seconds without data, and take four times that in all.
    init(timeout: TimeInterval) {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = timeout
        configuration.timeoutIntervalForResource = timeout * 4
        // No URL cache: a peer's answers must never come from one, and with a cache this
        // toolchain's URLSession looks each request up on a background queue first, so a
        // request cancelled in that window (a sync round's timeout, a shutdown) can end the
        // process ("Trying to access a behaviour for a task that in not in the registry";
        // `URLSessionTransportTests`).
        configuration.urlCache = nil
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        configuration.httpAdditionalHeaders = ["Accept-Encoding": "gzip"]
        session = URLSession(configuration: configuration)
    }

    func send(_ request: PeerRequest) async throws(PeerError) -> PeerResponse {
        var urlRequest = URLRequest(url: request.url)
        urlRequest.httpMethod = request.method
        for header in request.headers { urlRequest.setValue(header.value, forHTTPHeaderField: header.name) }
        urlRequest.httpBody = request.body
        let place = "\(request.method) \(request.url.path)"
        let data: Data
        let response: URLResponse
        do {
            (data, response) = try await load(urlRequest)
        } catch let error as URLError where error.code == .cannotConnectToHost {
            throw .notListening("\(place): \(error.localizedDescription)")
        } catch {
            throw .unreachable("\(place): \(error.localizedDescription)")
        }
        guard let http = response as? HTTPURLResponse else { throw .badAnswer("\(place): not an HTTP response") }
        return PeerResponse(status: http.statusCode, body: data)
    }

    /// `URLSession.data(for:)`, but cancelled without blocking. On this toolchain that method
    /// cancels its task from inside the Swift task's cancellation (which holds the task's status
    /// lock) with a synchronous call onto the session's work queue; if the work queue is just
    /// then finishing the request, it waits for the same lock to resume the caller, and both
    /// threads hang (`URLSessionTransportTests` found it). Here the task is cancelled from
    /// another queue, after the cancellation handler has returned.
    private func load(_ request: URLRequest) async throws -> (Data, URLResponse) {
        let cancellation = Cancellation()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let task = session.dataTask(with: request) { data, response, error in
                    if let error {
                        continuation.resume(throwing: error)
                    } else if let response {
                        continuation.resume(returning: (data ?? Data(), response))
                    } else {
                        continuation.resume(throwing: URLError(.badServerResponse))
                    }
                }
                cancellation.started(task)
                task.resume()
            }
        } onCancel: {
            cancellation.cancel()
        }
    }
}

/// The data task of one request, cancelled once, off the canceller's thread.
private final class Cancellation: Sendable {
    private struct State {
        var task: URLSessionDataTask?
        var isCancelled = false
    }
    private let state = Mutex(State())

    /// Keeps `task`; cancels it at once if the request was cancelled before it started.
    func started(_ task: URLSessionDataTask) {
        let cancelNow = state.withLock { state in
            state.task = task
            return state.isCancelled
        }
        if cancelNow { Self.cancel(task) }
    }

    /// Cancels the task (now, if it started; when it starts, otherwise).
    func cancel() {
        let task = state.withLock { state in
            state.isCancelled = true
            return state.task
        }
        if let task { Self.cancel(task) }
    }

    private static func cancel(_ task: URLSessionDataTask) {
        DispatchQueue.global().async { task.cancel() }
    }
}
