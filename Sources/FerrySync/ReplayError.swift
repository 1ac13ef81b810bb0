import Foundation
import FerryStore

/// Why a batch of change sets was refused before anything was applied.
public enum ReplayError: Error, Sendable, CustomStringConvertible {
    /// A line is not a valid change set for this model.
    case malformed(line: Int, ChangeSetError)
    /// A line's change set does not prove it comes from its origin (docs/SYNC.md, "Signed change sets").
    case untrusted(line: Int, TrustRefusal)
    /// Other writers kept changing the same objects; nothing of this change set was applied.
    case busy(origin: UUID, sequence: Int64)
    /// Replay needs a store that keeps history and merge metadata (a ``ReplicaStore``).
    case notReplicaStore

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
