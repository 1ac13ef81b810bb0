import Foundation

/// A public key a store holds for one origin — its own or another store's — and which of that
/// origin's change sets it checks: those from ``firstSequence`` up to the next key's first.
///
/// An origin's keys form a chain: its first key (pinned, or trusted on first use), then each
/// rotation's new key, endorsed by the key before it (``endorsement``). Change sets numbered below
/// the first key's ``firstSequence`` were recorded before the origin had a key: they carry no
/// signature (docs/SYNC.md, "Signed change sets").
public struct OriginKey: Sendable, Hashable {
    /// How the store came to hold the key.
    public enum Source: String, Sendable, Hashable, CaseIterable {
        /// The store's own key.
        case own
        /// Given in the daemon's configuration (`trust.keys`), or with `ferry trust add`.
        case pinned
        /// Taken from a configured peer's own state the first time it was seen.
        case firstUse = "first-use"
        /// Endorsed by the origin's previous key.
        case rotation
    }

    /// The store whose change sets the key signs.
    public var origin: UUID
    /// The Ed25519 public key, base64.
    public var publicKey: String
    /// The first of the origin's sequence numbers the key signs.
    public var firstSequence: Int64
    /// The previous key's signature (base64) over ``ChangeSetSignature/rotationMessage(origin:firstSequence:publicKey:)``;
    /// nil for an origin's first key.
    public var endorsement: String?
    /// How the key came here.
    public var source: Source
    /// Change sets signed with the key whose clock is at or after this time are refused; nil while the key is not revoked.
    public var revokedAfter: HybridTimestamp?

    /// A key.
    public init(origin: UUID, publicKey: String, firstSequence: Int64, endorsement: String? = nil, source: Source,
                revokedAfter: HybridTimestamp? = nil) {
        self.origin = origin
        self.publicKey = publicKey
        self.firstSequence = firstSequence
        self.endorsement = endorsement
        self.source = source
        self.revokedAfter = revokedAfter
    }
}

/// How a store signs the change sets it records.
public enum ChangeSetSigning: Sendable {
    /// It has no key of its own (made before keys existed, and no key found): change sets are
    /// recorded unsigned.
    case unsigned
    /// It signs with this key.
    case key(any ChangeSetSigner)
    /// It has a key registered but this process cannot use it: saves are refused with this reason
    /// rather than recording change sets no peer would accept.
    case unavailable(String)
}

/// A store's keys as published in its state (`GET /v1/state`, `keys`): every origin's chain it
/// holds, so peers can follow rotations (a rotation is accepted only when endorsed by a key the
/// peer already trusts).
public struct PublishedKey: Sendable, Hashable, Codable {
    /// The origin.
    public var origin: UUID
    /// The key, base64.
    public var key: String
    /// The first sequence number it signs.
    public var from: Int64
    /// The previous key's endorsement; nil for a first key.
    public var endorsement: String?

    /// A published key.
    public init(origin: UUID, key: String, from: Int64, endorsement: String? = nil) {
        self.origin = origin
        self.key = key
        self.from = from
        self.endorsement = endorsement
    }

    /// The key as published (without how the publisher came to hold it).
    public init(_ key: OriginKey) {
        self.init(origin: key.origin, key: key.publicKey, from: key.firstSequence, endorsement: key.endorsement)
    }
}
