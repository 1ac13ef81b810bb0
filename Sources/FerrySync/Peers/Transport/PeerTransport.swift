import Foundation

/// One HTTP request to a peer, as ``PeerClient`` builds it.
struct PeerRequest: Sendable {
    var method: String
    var url: URL
    var headers: [(name: String, value: String)]
    var body: Data?
}

/// A peer's answer: its status and its body, already decompressed.
struct PeerResponse: Sendable {
    var status: Int
    var body: Data
}

/// Carries ``PeerRequest``s to a peer. Failures to reach it are thrown as
/// ``PeerError/notListening(_:)`` or ``PeerError/unreachable(_:)``; any HTTP
/// status is an answer, not an error.
protocol PeerTransport: Sendable {
    func send(_ request: PeerRequest) async throws(PeerError) -> PeerResponse
}

/// How a client checks a peer's HTTPS certificate.
public enum PeerTrust: Sendable {
    /// Against the system trust store.
    case systemStore
    /// Against these certificate authorities only (a peer's `ca_file`).
    case certificateAuthority(CertificateAuthority)
}
