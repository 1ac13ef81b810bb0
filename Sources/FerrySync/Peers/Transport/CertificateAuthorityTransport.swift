import Foundation
import AsyncHTTPClient
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL

/// Requests through AsyncHTTPClient, checking the peer's certificate against a
/// private CA (a peer's `ca_file`) instead of the system trust store — which
/// URLSession on Linux cannot do. Timeouts and gzip as ``URLSessionTransport``.
final class CertificateAuthorityTransport: PeerTransport {
    private let client: HTTPClient
    private let authority: CertificateAuthority
    private let timeout: TimeInterval

    /// The most a peer's answer may hold, decompressed (a pull page is far smaller).
    static let maximumAnswerBytes = 1 << 30

    init(authority: CertificateAuthority, timeout: TimeInterval) {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.trustRoots = .certificates(authority.certificates)
        tls.minimumTLSVersion = .tlsv12
        let seconds = TimeAmount.milliseconds(Int64(timeout * 1000))
        var configuration = HTTPClient.Configuration(
            tlsConfiguration: tls,
            redirectConfiguration: .disallow,
            timeout: .init(connect: min(seconds, .seconds(30)), read: seconds),
            decompression: .enabled(limit: .size(Self.maximumAnswerBytes))
        )
        // A refused connection or certificate fails the request at once, as with URLSession:
        // the peer's session retries with its own backoff (and a bad certificate would fail
        // again for the whole connect timeout).
        configuration.connectionPool.retryConnectionEstablishment = false
        client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        self.authority = authority
        self.timeout = timeout
    }

    deinit {
        // Does not block: the client keeps itself alive until its connections are closed.
        client.shutdown { _ in }
    }

    func send(_ request: PeerRequest) async throws(PeerError) -> PeerResponse {
        var http = HTTPClientRequest(url: request.url.absoluteString)
        http.method = HTTPMethod(rawValue: request.method)
        http.headers.add(name: "Accept-Encoding", value: "gzip")
        for header in request.headers { http.headers.add(name: header.name, value: header.value) }
        if let body = request.body { http.body = .bytes(ByteBuffer(bytes: body)) }
        let place = "\(request.method) \(request.url.path)"
        do {
            let response = try await client.execute(http, timeout: .milliseconds(Int64(timeout * 4000)))
            let body = try await response.body.collect(upTo: Self.maximumAnswerBytes)
            return PeerResponse(status: Int(response.status.code), body: Data(body.readableBytesView))
        } catch {
            throw Self.peerError(error, place: place, caFile: authority.file)
        }
    }

    /// The ``PeerError`` for a failed request: refused connections are `notListening`,
    /// certificate failures name the CA file, anything else is `unreachable`.
    static func peerError(_ error: any Error, place: String, caFile: String) -> PeerError {
        if isConnectionRefused(error) {
            return .notListening("\(place): connection refused")
        }
        let detail = "\(error)"
        if detail.contains("CERTIFICATE_VERIFY_FAILED") {
            return .unreachable("\(place): TLS handshake failed: the peer's certificate does not chain up to ca_file \(caFile) (CERTIFICATE_VERIFY_FAILED)")
        }
        if let error = error as? NIOSSLExtraError, error == .failedToValidateHostname {
            return .unreachable("\(place): TLS handshake failed: the peer's certificate is not for the host of its url (\(error))")
        }
        if error is NIOSSLError || error is BoringSSLError {
            return .unreachable("\(place): TLS handshake failed (checked against ca_file \(caFile)): \(detail)")
        }
        return .unreachable("\(place): \(error)")
    }

    private static func isConnectionRefused(_ error: any Error) -> Bool {
        if let error = error as? IOError { return error.errnoCode == ECONNREFUSED }
        if let error = error as? NIOConnectionError {
            return !error.connectionErrors.isEmpty && error.connectionErrors.allSatisfy { isConnectionRefused($0.error) }
        }
        return false
    }
}
