import Foundation
import FerryModel

/// Why a store cannot give the change sets asked for.
public enum HistoryError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The change sets were purged (every peer listed then had them); the asker
    /// must start from a snapshot of a store instead (docs/SYNC.md, "Snapshots").
    case purged(origin: UUID, needed: Int64, purgedThrough: Int64)
    /// An operation meant for other stores' origins was asked of this store's own.
    case ownOrigin(UUID)
    /// A change set (or a peer) that does not know everything made before the store's tombstone
    /// horizon: it could bring back an object whose delete the store has forgotten. `needed` is
    /// the change set of `origin` it would have to know of.
    case pastHorizon(origin: UUID, needed: Int64, horizon: HybridTimestamp)

    private static func date(_ timestamp: HybridTimestamp) -> String {
        timestamp.date.formatted(.iso8601)
    }

    public var description: String {
        switch self {
        case .purged(let origin, let needed, let through):
            "change sets \(needed)…\(through) of \(origin.uuidString) were purged from this store's history after every listed peer "
                + "acknowledged them; a peer that still lacks them must start from a snapshot of a store "
                + "(ferry init --from-peer, or the daemon's sync.bootstrap; docs/SYNC.md, \"Snapshots\")"
        case .pastHorizon(let origin, let needed, let horizon):
            "this store forgot the deletes made before \(Self.date(horizon)) (its tombstone horizon), and this comes from a store "
                + "that has not taken in change set \(needed) of \(origin.uuidString), made before then: it could bring back objects "
                + "deleted since. That store must start again from a snapshot of a store "
                + "(ferry init --from-peer, or the daemon's sync.bootstrap; docs/SYNC.md, \"Snapshots\")"
        case .ownOrigin(let origin):
            "\(origin.uuidString) is this store's own origin; its change sets are this store's saves and cannot be removed"
        }
    }
}

extension HistoryError: FerryError {
    /// The kinds of ``HistoryError``: its cases.
    public enum Code: String, Hashable, Sendable {
        /// ``HistoryError/purged(origin:needed:purgedThrough:)``
        case purged
        /// ``HistoryError/ownOrigin(_:)``
        case ownOrigin
        /// ``HistoryError/pastHorizon(origin:needed:horizon:)``
        case pastHorizon
    }

    public var code: Code {
        switch self {
        case .purged: .purged
        case .ownOrigin: .ownOrigin
        case .pastHorizon: .pastHorizon
        }
    }
}
