import Foundation

/// Why a store cannot give the change sets asked for.
public enum HistoryError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The change sets were purged (every peer listed then had them); the asker
    /// must be seeded from a copy of a store instead.
    case purged(origin: UUID, needed: Int64, purgedThrough: Int64)
    /// An operation meant for other stores' origins was asked of this store's own.
    case ownOrigin(UUID)

    public var description: String {
        switch self {
        case .purged(let origin, let needed, let through):
            "change sets \(needed)…\(through) of \(origin.uuidString) were purged from this store's history after every listed peer "
                + "acknowledged them; a peer that still lacks them must start from a copy of a store (see docs/SYNC.md)"
        case .ownOrigin(let origin):
            "\(origin.uuidString) is this store's own origin; its change sets are this store's saves and cannot be removed"
        }
    }
}
