import Foundation
import FerryModel

/// What signs the change sets a store records: its Ed25519 key (`FerrySigning.StoreSigningKey`).
/// FerryStore only names it, so that it needs no cryptography library of its own.
public protocol ChangeSetSigner: Sendable {
    /// The public key, base64: what peers check the signatures with.
    var publicKey: String { get }
    /// The raw 64-byte signature of `message`.
    func rawSignature(of message: UnsafeBufferPointer<UInt8>) throws(SigningKeyError) -> Data
    /// A signature begun on `prefix`, the first bytes of a message whose rest is not written yet:
    /// a large save's inserts are read for it on the thread that writes their text, beside the
    /// rows' writes, so that the save's transaction reads only the rest.
    func beginSignature(over prefix: UnsafeBufferPointer<UInt8>) -> any PartialSignature
}

/// A signature begun on the first bytes of a message (``ChangeSetSigner/beginSignature(over:)``).
public protocol PartialSignature: Sendable {
    /// How many bytes of the message were read.
    var prefixLength: Int { get }
    /// The raw signature of `message`, whose first ``prefixLength`` bytes must be the prefix
    /// given at the start. Call once.
    func finish(_ message: UnsafeBufferPointer<UInt8>) throws(SigningKeyError) -> Data
}

/// A signing key that cannot be used: what happened and what to do (never the key itself).
public struct SigningKeyError: FerryError, Sendable {
    /// A signing key's fault has one kind; what went wrong is in the description and ``cause``.
    public enum Code: String, Hashable, Sendable {
        /// The key cannot be read, written or used.
        case signingKey
    }

    public let description: String
    /// The error met (a file's, the cryptography library's), when there was one.
    public let cause: (any Error)?
    public var code: Code { .signingKey }

    public init(_ description: String, cause: (any Error)? = nil) {
        self.description = description
        self.cause = cause
    }
}
