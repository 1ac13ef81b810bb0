import Foundation
import Crypto
import FerryStore

/// A store's Ed25519 signing key: what its change sets will be signed with, and
/// whose public half peers pin or trust on first use. Kept in a file of its own, readable
/// by its owner only (mode 0600), as one line `ed25519 BASE64` (the 32-byte private key).
public struct StoreSigningKey: ChangeSetSigner {
    private let privateKey: Curve25519.Signing.PrivateKey
    /// The public key, base64 (44 characters): what `ferry state` and `GET /v1/state` show.
    /// (Compared with the store's newest key at every save.)
    public let publicKey: String

    /// A new random key (not yet written anywhere).
    public init() {
        self.init(Curve25519.Signing.PrivateKey())
    }

    private init(_ privateKey: Curve25519.Signing.PrivateKey) {
        self.privateKey = privateKey
        self.publicKey = privateKey.publicKey.rawRepresentation.base64EncodedString()
    }

    /// Where a store's key is kept unless the configuration says otherwise: beside the store file.
    public static func defaultPath(forStore store: String) -> String { store + ".key" }

    /// Reads the key at `path`.
    /// - Throws: ``SigningKeyError`` when the file is missing, unreadable, not a key file, or
    ///   readable or writable by others than its owner (it is then not used).
    public init(contentsOf path: String) throws(SigningKeyError) {
        var info = stat()
        guard stat(path, &info) == 0 else {
            throw SigningKeyError("\(path): no signing key there (\(String(cString: strerror(errno)))); " +
                                  "`ferry init` makes one for a new store, and `ferry run` for a store made before stores had keys")
        }
        guard info.st_mode & 0o077 == 0 else {
            throw SigningKeyError("\(path): the signing key can be read or written by users other than its owner " +
                                  "(mode \(String(info.st_mode & 0o777, radix: 8))); " +
                                  "run chmod 600 \(path), and if others may have read it, make a new key and rotate to it")
        }
        let text: String
        do {
            text = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw SigningKeyError("\(path): cannot read the signing key (\(error.localizedDescription))", cause: error)
        }
        let parts = text.trimmingCharacters(in: .whitespacesAndNewlines).split(separator: " ")
        guard parts.count == 2, parts[0] == "ed25519", let raw = Data(base64Encoded: String(parts[1])),
              let key = try? Curve25519.Signing.PrivateKey(rawRepresentation: raw) else {
            throw SigningKeyError("\(path): not a Ferry signing key (expected one line 'ed25519 BASE64')")
        }
        self.init(key)
    }

    /// Writes the key to a new file at `path`, readable and writable by its owner only.
    /// - Throws: ``SigningKeyError`` when the file exists (a key is never overwritten) or cannot be written.
    public func write(to path: String) throws(SigningKeyError) {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL, 0o600)
        guard descriptor >= 0 else {
            let reason = errno == EEXIST ? "a file is there already; a signing key is never overwritten" : String(cString: strerror(errno))
            throw SigningKeyError("\(path): cannot write the signing key (\(reason))")
        }
        defer { close(descriptor) }
        let line = Array("ed25519 \(privateKey.rawRepresentation.base64EncodedString())\n".utf8)
        let written = line.withUnsafeBytes { Foundation.write(descriptor, $0.baseAddress, $0.count) }
        guard written == line.count, fsync(descriptor) == 0 else {
            unlink(path)
            throw SigningKeyError("\(path): cannot write the signing key (\(String(cString: strerror(errno))))")
        }
    }

    /// The key at `path`, made and written there first if there is none (a store made before
    /// stores had keys gets one the first time its daemon starts). `created` says which.
    public static func loadOrCreate(at path: String) throws(SigningKeyError) -> (key: StoreSigningKey, created: Bool) {
        if FileManager.default.fileExists(atPath: path) { return (try StoreSigningKey(contentsOf: path), false) }
        let key = StoreSigningKey()
        try key.write(to: path)
        return (key, true)
    }

    /// The signature of `message`, base64.
    public func signature(of message: some DataProtocol) throws(SigningKeyError) -> String {
        try Self.sign(Self.digest(message), with: privateKey).base64EncodedString()
    }

    /// The raw 64-byte signature of `message`.
    public func rawSignature(of message: UnsafeBufferPointer<UInt8>) throws(SigningKeyError) -> Data {
        try Self.sign(Self.digest(UnsafeRawBufferPointer(message)), with: privateKey)
    }

    public func beginSignature(over prefix: UnsafeBufferPointer<UInt8>) -> any PartialSignature {
        DigestInProgress(key: privateKey, prefix: prefix)
    }

    /// Whether `signature` (base64) is `publicKey`'s (base64) over `message`.
    public static func isValid(signature: String, of message: some DataProtocol, publicKey: String) -> Bool {
        VerifyingKey(base64: publicKey)?.isValid(signature: signature, of: message) ?? false
    }

    /// What Ferry's Ed25519 signatures sign: the SHA-256 digest of the message (32 bytes), not the
    /// message itself. Ed25519 hashes what it signs twice with SHA-512; a change set of a thousand
    /// inserts is some 225 KB, and hashing it once with SHA-256 (in hardware on most servers) costs
    /// a fifth of that, on the path of every save.
    static func digest(_ message: some DataProtocol) -> Data {
        Data(SHA256.hash(data: message))
    }

    /// The signature of `digest` (what every signing path ends in).
    static func sign(_ digest: Data, with key: Curve25519.Signing.PrivateKey) throws(SigningKeyError) -> Data {
        do {
            return try key.signature(for: digest)
        } catch {
            throw SigningKeyError("cannot sign: \(error)", cause: error)
        }
    }
}


/// A store's public key, parsed once, for checking many signatures.
public struct VerifyingKey: Sendable, Hashable {
    private let key: Curve25519.Signing.PublicKey
    /// The key, base64 (as ``StoreSigningKey/publicKey`` gives it).
    public let base64: String

    /// The key given as base64 of its 32 bytes; nil when it is not one.
    public init?(base64: String) {
        guard let raw = Data(base64Encoded: base64), raw.count == 32,
              let key = try? Curve25519.Signing.PublicKey(rawRepresentation: raw) else { return nil }
        self.key = key
        self.base64 = base64
    }

    /// Whether `signature` (raw bytes) is this key's over `message`.
    public func isValid(signature: Data, of message: UnsafeRawBufferPointer) -> Bool {
        key.isValidSignature(signature, for: StoreSigningKey.digest(message))
    }

    /// Whether `signature` (base64) is this key's over `message`.
    public func isValid(signature: String, of message: some DataProtocol) -> Bool {
        guard let bytes = Data(base64Encoded: signature) else { return false }
        return key.isValidSignature(bytes, for: StoreSigningKey.digest(message))
    }

    public static func == (lhs: VerifyingKey, rhs: VerifyingKey) -> Bool { lhs.base64 == rhs.base64 }
    public func hash(into hasher: inout Hasher) { hasher.combine(base64) }
}

/// A signature whose message's first bytes are hashed already (``StoreSigningKey/beginSignature(over:)``).
final class DigestInProgress: PartialSignature, @unchecked Sendable {
    // (@unchecked: made on the thread that writes a save's insert text and handed to the saving
    // thread through the semaphore of `InsertTextInAdvance`; never used by two threads at once.)
    private let key: Curve25519.Signing.PrivateKey
    private var hasher = SHA256()
    let prefixLength: Int

    init(key: Curve25519.Signing.PrivateKey, prefix: UnsafeBufferPointer<UInt8>) {
        self.key = key
        hasher.update(bufferPointer: UnsafeRawBufferPointer(prefix))
        prefixLength = prefix.count
    }

    func finish(_ message: UnsafeBufferPointer<UInt8>) throws(SigningKeyError) -> Data {
        hasher.update(bufferPointer: UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: message[prefixLength...])))
        return try StoreSigningKey.sign(Data(hasher.finalize()), with: key)
    }
}
