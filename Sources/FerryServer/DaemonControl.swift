import Foundation
import FerrySync

/// What a daemon offers the HTTP API besides its store: its status document
/// (`GET /v1/status`) and a sync round on request (`POST /v1/sync`). The server
/// depends on this protocol; the daemon implements it.
public protocol DaemonControl: Sendable {
    /// The status document.
    func status() async -> StatusDocument
    /// Runs a round with `peer` (every peer when nil) and says how it went.
    func sync(peer: String?) async -> SyncNowOutcome
}

/// The outcome of asking a daemon for a sync round.
public enum SyncNowOutcome: Sendable, Equatable {
    /// The round ran; each peer's result (some may have failed).
    case ran(SyncNowAnswer)
    /// No peer of that name is configured.
    case unknownPeer(String)
    /// The daemon cannot sync now (its store is not open, say), for this reason.
    case unavailable(String)
}
