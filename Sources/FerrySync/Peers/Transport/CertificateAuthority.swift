import Foundation
import FerryModel
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
            throw .notPEM(file: file, detail: "\(error)", cause: error)
        }
        guard !certificates.isEmpty else { throw .notPEM(file: file, detail: "no BEGIN CERTIFICATE block") }
        self.file = file
        self.certificates = certificates
    }
}

/// Why a CA file cannot be used.
///
/// Errors are equal when they are the same case with the same file and detail (their causes are not compared).
public enum CertificateAuthorityError: FerryError, Sendable, CustomStringConvertible, Equatable {
    /// The file does not exist or cannot be read by this user.
    case unreadable(file: String)
    /// The file holds no PEM certificate; `cause` is the TLS library's error, when it gave one.
    case notPEM(file: String, detail: String, cause: (any Error)? = nil)

    /// The kinds of ``CertificateAuthorityError``, one per case.
    public enum Code: String, Hashable, Sendable {
        /// The file does not exist or cannot be read (``CertificateAuthorityError/unreadable(file:)``).
        case unreadable
        /// The file holds no PEM certificate (``CertificateAuthorityError/notPEM(file:detail:cause:)``).
        case notPEM
    }

    /// The kind of fault.
    public var code: Code {
        switch self {
        case .unreadable: .unreadable
        case .notPEM: .notPEM
        }
    }

    /// The TLS library's error that ``notPEM(file:detail:cause:)`` keeps, if any.
    public var cause: (any Error)? {
        switch self {
        case .unreadable: nil
        case .notPEM(_, _, let cause): cause
        }
    }

    public var description: String {
        switch self {
        case .unreadable(let file):
            "cannot read the CA file \(file) (missing, or not readable by this user)"
        case .notPEM(let file, let detail, _):
            "the CA file \(file) holds no PEM certificate (\(detail)); it needs the CA's certificate as -----BEGIN CERTIFICATE----- … blocks"
        }
    }

    /// The same case with the same file and detail; causes are not compared.
    public static func == (lhs: CertificateAuthorityError, rhs: CertificateAuthorityError) -> Bool {
        switch (lhs, rhs) {
        case (.unreadable(let left), .unreadable(let right)): left == right
        case (.notPEM(let leftFile, let leftDetail, _), .notPEM(let rightFile, let rightDetail, _)):
            leftFile == rightFile && leftDetail == rightDetail
        case (.unreadable, _), (.notPEM, _): false
        }
    }
}
