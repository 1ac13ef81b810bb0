import Foundation

/// Where a change set's signature sits in its line, and which bytes it covers.
///
/// A signed line is the canonical unsigned line with `,"sig":"BASE64"` before its closing brace
/// (`sig` sorts after `seq`, the envelope's last key, so the line stays canonical). The signature
/// (Ed25519 over the SHA-256 digest of the bytes it covers) covers every byte before `,"sig"`:
/// the unsigned line without its closing brace — origin,
/// sequence, clock, model, dependencies, author, context and every change. A line is forwarded
/// exactly as it was received, so the signature travels with it through any number of stores.
public enum ChangeSetSignature {
    /// `,"sig":"`
    static let marker: [UInt8] = Array(",\"sig\":\"".utf8)
    /// An Ed25519 signature (64 bytes) in base64, with its padding.
    static let encodedLength = 88
    /// `,"sig":"` + the signature + `"}`.
    static let suffixLength = marker.count + encodedLength + 2

    /// The signed part and the signature of a line that ends with its signature member; nil when the
    /// line has no signature there (unsigned, or a signature elsewhere, which no signer writes).
    package static func split(_ line: UnsafeBufferPointer<UInt8>) -> (signedLength: Int, signature: Data)? {
        let count = line.count
        guard count > suffixLength, line[count - 1] == UInt8(ascii: "}"), line[count - 2] == UInt8(ascii: "\"") else { return nil }
        let start = count - suffixLength
        for (offset, byte) in marker.enumerated() where line[start + offset] != byte { return nil }
        let encoded = UnsafeBufferPointer(rebasing: line[(start + marker.count)..<(count - 2)])
        guard let signature = Data(base64Encoded: Data(encoded)), signature.count == 64 else { return nil }
        return (start, signature)
    }

    /// Whether `line` has a `"sig"` member anywhere (a cheap check for the refusal's wording).
    package static func mentionsSignature(_ line: String) -> Bool {
        line.utf8.count > marker.count && line.contains("\"sig\":")
    }

    /// The message a store's previous key signs to hand its change sets over to a new key
    /// (``OriginKey/endorsement``): `ferry-key-rotation` and the origin, the first sequence number
    /// the new key signs, and the new key, one per line.
    public static func rotationMessage(origin: UUID, firstSequence: Int64, publicKey: String) -> Data {
        Data("ferry-key-rotation\n\(origin.uuidString)\n\(firstSequence)\n\(publicKey)".utf8)
    }
}
