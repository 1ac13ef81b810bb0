import Foundation

/// What signs the change sets a store records: its Ed25519 key (`FerrySigning.StoreSigningKey`).
/// FerryStore only names it, so that it needs no cryptography library of its own.
public protocol ChangeSetSigner: Sendable {
    /// The public key, base64: what peers check the signatures with.
    var publicKey: String { get }
    /// The raw 64-byte signature of `message`.
    func rawSignature(of message: UnsafeBufferPointer<UInt8>) throws(SigningKeyError) -> Data
}

/// A signing key that cannot be used: what happened and what to do (never the key itself).
public struct SigningKeyError: Error, CustomStringConvertible, Sendable {
    public let description: String
    public init(_ description: String) { self.description = description }
}
