import Foundation
import FerryModel
import FerryStore

/// Why a change set was refused before anything of its batch was applied: it does not prove it
/// comes from the origin it names (docs/SYNC.md, "Signed change sets").
public struct TrustRefusal: FerryError, Sendable, Hashable, CustomStringConvertible {
    /// What was wrong, as counted in `/metrics` (`ferry_changesets_refused_total{reason}`).
    public enum Reason: String, Sendable, Hashable, CaseIterable {
        /// No signature, from an origin that signs that sequence number.
        case unsigned
        /// A signature that does not verify with the origin's key for that sequence number: the
        /// line was altered (body, sequence number, origin) or signed by another key.
        case badSignature = "bad_signature"
        /// No key is known for the origin, and the store does not take unsigned change sets of unknown origins.
        case unknownOrigin = "unknown_origin"
        /// Signed with a key revoked before the change set's time.
        case revokedKey = "revoked_key"
    }

    /// The kinds of ``TrustRefusal``: its ``Reason`` (whose raw values are the `reason` labels of `/metrics`).
    public typealias Code = Reason

    /// What was wrong.
    public var reason: Reason
    /// The origin the change set names.
    public var origin: UUID
    /// The sequence number it claims.
    public var sequence: Int64
    /// Why, and what to do.
    public var detail: String

    public init(_ reason: Reason, origin: UUID, sequence: Int64, detail: String) {
        self.reason = reason
        self.origin = origin
        self.sequence = sequence
        self.detail = detail
    }

    /// The kind of fault: the ``reason``.
    public var code: Reason { reason }

    public var description: String {
        "change set \(sequence) of \(origin.uuidString) is not trusted (\(reason.rawValue)): \(detail)"
    }

    /// Whether asking the configured peers for their keys could make the change set acceptable
    /// (its origin's key, or a rotation, not known here yet).
    var mayBeLearned: Bool { reason == .unknownOrigin || reason == .badSignature }
}
