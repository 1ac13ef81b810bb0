import Foundation
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
            (data, response) = try await session.data(for: urlRequest)
        } catch let error as URLError where error.code == .cannotConnectToHost {
            throw .notListening("\(place): \(error.localizedDescription)")
        } catch {
            throw .unreachable("\(place): \(error.localizedDescription)")
        }
        guard let http = response as? HTTPURLResponse else { throw .badAnswer("\(place): not an HTTP response") }
        return PeerResponse(status: http.statusCode, body: data)
    }
}
