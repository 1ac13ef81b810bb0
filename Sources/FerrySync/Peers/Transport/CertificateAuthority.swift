import Foundation
import NIOSSL

/// The certificates of a PEM file that a peer's HTTPS certificate must chain up to
/// (a peer's `ca_file`), read and checked once, when the configuration is read.
public struct CertificateAuthority: Sendable {
    /// The PEM file the certificates came from.
    public let file: String
    let certificates: [NIOSSLCertificate]

    /// Reads the PEM certificates of `file`.
    /// - Throws: ``CertificateAuthorityError`` when the file cannot be read or holds no certificate.
    public init(file: String) throws(CertificateAuthorityError) {
        guard let data = FileManager.default.contents(atPath: file) else {
            throw .unreadable(file: file)
        }
        let certificates: [NIOSSLCertificate]
        do {
            certificates = try NIOSSLCertificate.fromPEMBytes(Array(data))
        } catch {
            throw .notPEM(file: file, detail: "\(error)")
        }
        guard !certificates.isEmpty else { throw .notPEM(file: file, detail: "no BEGIN CERTIFICATE block") }
        self.file = file
        self.certificates = certificates
    }
}

/// Why a CA file cannot be used.
public enum CertificateAuthorityError: Error, Sendable, CustomStringConvertible, Equatable {
    /// The file does not exist or cannot be read by this user.
    case unreadable(file: String)
    /// The file holds no PEM certificate.
    case notPEM(file: String, detail: String)

    public var description: String {
        switch self {
        case .unreadable(let file):
            "cannot read the CA file \(file) (missing, or not readable by this user)"
        case .notPEM(let file, let detail):
            "the CA file \(file) holds no PEM certificate (\(detail)); it needs the CA's certificate as -----BEGIN CERTIFICATE----- … blocks"
        }
    }
}
