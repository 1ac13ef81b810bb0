import Foundation
import FerryModel
import FerryStore

/// Why a batch of change sets was refused before anything was applied.
public enum ReplayError: FerryError, Sendable, CustomStringConvertible {
    /// A line is not a valid change set for this model.
    case malformed(line: Int, ChangeSetError)
    /// A line's change set does not prove it comes from its origin (docs/SYNC.md, "Signed change sets").
    case untrusted(line: Int, TrustRefusal)
    /// Other writers kept changing the same objects; nothing of this change set was applied.
    case busy(origin: UUID, sequence: Int64)
    /// Replay needs a store that keeps history and merge metadata (a ``ReplicaStore``).
    case notReplicaStore

    /// The kinds of ``ReplayError``.
    public enum Code: String, Hashable, Sendable {
        /// A line is not a valid change set for this model (``ReplayError/malformed(line:_:)``).
        case malformed
        /// A line's change set does not prove it comes from its origin (``ReplayError/untrusted(line:_:)``).
        case untrusted
        /// Other writers kept changing the same objects (``ReplayError/busy(origin:sequence:)``).
        case busy
        /// The store keeps no history or merge metadata (``ReplayError/notReplicaStore``).
        case notReplicaStore
    }

    /// The kind of fault.
    public var code: Code {
        switch self {
        case .malformed: .malformed
        case .untrusted: .untrusted
        case .busy: .busy
        case .notReplicaStore: .notReplicaStore
        }
    }

    /// The line's own error: why it is malformed (a ``ChangeSetError``) or not trusted (a ``TrustRefusal``).
    public var cause: (any Error)? {
        switch self {
        case .malformed(_, let error): error
        case .untrusted(_, let refusal): refusal
        case .busy, .notReplicaStore: nil
        }
    }

    /// Whether sending the batch again may succeed: after write conflicts (``busy(origin:sequence:)``) only.
    public var isRetryable: Bool {
        if case .busy = self { return true }
        return false
    }

    public var description: String {
        switch self {
        case .malformed(let line, let error): "line \(line): \(error.description); nothing was applied"
        case .untrusted(let line, let refusal): "line \(line): \(refusal.description); nothing was applied"
        case .notReplicaStore:
            "change sets can only be applied to a store that keeps history and merge metadata (a ReplicaStore, such as SQLiteStore)"
        case .busy(let origin, let sequence):
            "change set \(sequence) of \(origin.uuidString) kept meeting write conflicts with other writers; it was not applied and can be sent again"
        }
    }
}
