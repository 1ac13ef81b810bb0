import Foundation
import FerryStore
import FerrySigning

/// Checks that a change set's line was signed by its origin, with the keys a store trusts at one
/// moment (a value: ``OriginTrust`` hands out a copy, so lines are checked on any thread).
///
/// The rules (docs/SYNC.md, "Signed change sets"):
/// - an origin's key in force for sequence number *n* is its key with the greatest first sequence
///   number ≤ *n*; its signature must verify over the line's bytes before `"sig"`;
/// - a key revoked at time *t* signs nothing whose clock is at or after *t*;
/// - numbers below the origin's first key were recorded before it had a key: unsigned is accepted there;
/// - an origin with no key known is refused, unless the store takes unknown origins
///   (``OriginTrust/Policy/unknownOrigins``), as during a fleet's move to signatures.
public struct ChangeSetVerifier: Sendable {
    struct Entry: Sendable {
        var key: VerifyingKey
        var firstSequence: Int64
        var revokedAfter: HybridTimestamp?
    }

    /// Per origin, its keys by first sequence number.
    var chains: [UUID: [Entry]]
    /// Whether change sets of origins without a known key are taken as they are.
    var acceptsUnknownOrigins: Bool

    /// A verifier that knows no key and takes every origin (what a store without trust settings does).
    public static let acceptingAll = ChangeSetVerifier(chains: [:], acceptsUnknownOrigins: true)

    /// Whether the verifier checks nothing (no key known, unknown origins taken).
    var checksNothing: Bool { chains.isEmpty && acceptsUnknownOrigins }

    /// Whether `line`, a change set of `origin` numbered `sequence` at `timestamp`, may be applied:
    /// nil when it may, the refusal otherwise.
    public func check(_ line: String, origin: UUID, sequence: Int64, timestamp: HybridTimestamp) -> TrustRefusal? {
        guard let chain = chains[origin], let first = chain.first else {
            if acceptsUnknownOrigins { return nil }
            return TrustRefusal(.unknownOrigin, origin: origin, sequence: sequence, detail:
                "no key of that origin is known here; pin its public key (trust.keys in the configuration, or `ferry trust add`), "
                + "or list its daemon among the peers so that its key is trusted on first use")
        }
        var text = line
        return text.withUTF8 { bytes -> TrustRefusal? in
            let split = ChangeSetSignature.split(bytes)
            let entry = chain.last(where: { $0.firstSequence <= sequence })
            guard let split else {
                if entry == nil { return nil }  // recorded before the origin had a key
                let why = ChangeSetSignature.mentionsSignature(line)
                    ? "its \"sig\" is not where a signed line has it (last, before the closing brace)"
                    : "it carries no signature, and its origin signs every change set from \(first.firstSequence) on"
                return TrustRefusal(.unsigned, origin: origin, sequence: sequence, detail: why)
            }
            let signer = entry ?? first
            let signed = UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: bytes[..<split.signedLength]))
            guard signer.key.isValid(signature: split.signature, of: signed) else {
                return TrustRefusal(.badSignature, origin: origin, sequence: sequence, detail:
                    "its signature does not verify with the origin's key \(signer.key.base64) (the key of its change sets from \(signer.firstSequence) on): "
                    + "the line was changed after it was signed (body, origin or sequence number), or signed with another key")
            }
            if let revoked = signer.revokedAfter, timestamp >= revoked {
                return TrustRefusal(.revokedKey, origin: origin, sequence: sequence, detail:
                    "it is signed with key \(signer.key.base64), revoked from \(revoked.date.formatted(.iso8601)) on, "
                    + "and made at \(timestamp.date.formatted(.iso8601))")
            }
            return nil
        }
    }
}
