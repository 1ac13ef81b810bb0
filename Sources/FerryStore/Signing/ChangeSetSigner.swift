import Foundation

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
public struct SigningKeyError: Error, CustomStringConvertible, Sendable {
    public let description: String
    public init(_ description: String) { self.description = description }
}
