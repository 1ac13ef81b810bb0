import Foundation
import FerryStore
import FerrySigning
import Testing
import FerrySync
import FerryTestSupport

/// A store's signing key (issue 23, point 1): kept private, never overwritten, and what it signs
/// verifies against its public half only.
@Suite("Store signing keys")
struct StoreSigningKeyTests {
    @Test("A key written to a file only its owner reads loads back the same; it is never overwritten")
    func writeAndLoad() throws {
        let directory = TemporaryDirectory()
        let path = directory.file("store.sqlite.key")
        let key = StoreSigningKey()
        try key.write(to: path)
        let mode = try #require(try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int)
        #expect(mode == 0o600)
        #expect(try StoreSigningKey(contentsOf: path).publicKey == key.publicKey)
        #expect(key.publicKey.count == 44 && Data(base64Encoded: key.publicKey)?.count == 32)
        #expect(throws: SigningKeyError.self) { try StoreSigningKey().write(to: path) }
        #expect(try StoreSigningKey(contentsOf: path).publicKey == key.publicKey, "the first key is still there")
        // loadOrCreate: loads what is there, or makes one once.
        let (loaded, created) = try StoreSigningKey.loadOrCreate(at: path)
        #expect(!created && loaded.publicKey == key.publicKey)
        let other = directory.file("other.key")
        let (made, madeNow) = try StoreSigningKey.loadOrCreate(at: other)
        #expect(madeNow && made.publicKey != key.publicKey)
        #expect(try StoreSigningKey.loadOrCreate(at: other).key.publicKey == made.publicKey)
    }

    @Test("A key others may read, a missing one and a file that is no key are refused, saying what to do and never the key")
    func refused() throws {
        let directory = TemporaryDirectory()
        let path = directory.file("k")
        try StoreSigningKey().write(to: path)
        let secret = try String(contentsOfFile: path, encoding: .utf8).split(separator: " ").last.map(String.init) ?? ""
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: path)
        for (file, message) in [(path, "chmod 600"), (directory.file("missing"), "no signing key there")] {
            #expect {
                try StoreSigningKey(contentsOf: file)
            } throws: { error in
                "\(error)".contains(message) && !"\(error)".contains(secret.trimmingCharacters(in: .whitespacesAndNewlines))
            }
        }
        let notAKey = directory.file("not-a-key")
        try "peer 0123456789abcdef0123\n".write(toFile: notAKey, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: notAKey)
        #expect { try StoreSigningKey(contentsOf: notAKey) } throws: { "\($0)".contains("not a Ferry signing key") }
    }

    @Test("A signature verifies against its key's public half over the same bytes only")
    func signAndVerify() throws {
        let key = StoreSigningKey(), other = StoreSigningKey()
        let message = Data(#"{"origin":"A","seq":1}"#.utf8)
        let signature = try key.signature(of: message)
        #expect(StoreSigningKey.isValid(signature: signature, of: message, publicKey: key.publicKey))
        #expect(!StoreSigningKey.isValid(signature: signature, of: Data(#"{"origin":"A","seq":2}"#.utf8), publicKey: key.publicKey))
        #expect(!StoreSigningKey.isValid(signature: signature, of: message, publicKey: other.publicKey))
        #expect(!StoreSigningKey.isValid(signature: "not base64!", of: message, publicKey: key.publicKey))
        #expect(!StoreSigningKey.isValid(signature: signature, of: message, publicKey: "short"))
    }
}
