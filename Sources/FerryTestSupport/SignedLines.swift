import Foundation
import FerryStore
import FerrySigning

/// Change-set lines signed, unsigned and re-signed by hand, for tests of what a store does with
/// forgeries (the signature covers the line's bytes before `,"sig"`; docs/SYNC.md, "Signed change sets").
public enum SignedLines {
    /// `line` without its signature (as it is when unsigned).
    public static func unsigned(_ line: String) -> String {
        guard let range = line.range(of: #","sig":""#, options: .backwards) else { return line }
        return String(line[..<range.lowerBound]) + "}"
    }

    /// `line` (signed or not) signed with `key`: what its origin would have written with that key.
    public static func signed(_ line: String, with key: StoreSigningKey) throws -> String {
        let body = String(unsigned(line).dropLast())  // without the closing brace
        var bytes = Array(body.utf8)
        let signature = try bytes.withUnsafeMutableBufferPointer { try key.rawSignature(of: UnsafeBufferPointer($0)) }
        return body + #","sig":""# + signature.base64EncodedString() + #""}"#
    }

    /// `line` with `edit` made to its unsigned text, signed again with `key` (nil: left unsigned).
    public static func edited(_ line: String, resignedWith key: StoreSigningKey?, _ edit: (String) -> String) throws -> String {
        let changed = edit(unsigned(line))
        return try key.map { try signed(changed, with: $0) } ?? changed
    }
}
