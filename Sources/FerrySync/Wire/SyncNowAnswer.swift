import Foundation
import FerryStore

/// The answer of `POST /v1/sync` (a round the daemon ran when asked, by
/// `ferry sync-now`): one report per peer, `{"peers":[…]}`. The daemon answers
/// 200 when every peer's round succeeded, 502 otherwise.
public struct SyncNowAnswer: Codable, Sendable, Equatable {
    /// What one peer's round did.
    public struct Peer: Codable, Sendable, Equatable {
        /// Counts of change sets (the vector is left out: it is the store's, not the round's).
        public struct Counts: Codable, Sendable, Equatable {
            public var applied: Int
            public var duplicate: Int
            public var waiting: Int
            public var quarantined: Int

            /// The counts of `report`.
            public init(_ report: ApplyReport) {
                applied = report.applied
                duplicate = report.duplicate
                waiting = report.waiting
                quarantined = report.quarantined
            }

            /// "N applied, N duplicate, N waiting, N quarantined".
            public var summary: String {
                "\(applied) applied, \(duplicate) duplicate, \(waiting) waiting, \(quarantined) quarantined"
            }
        }

        /// The peer's name in the configuration.
        public var peer: String
        /// Whether the round succeeded.
        public var ok: Bool
        /// Why it failed (null when it did not).
        public var error: String?
        /// What this store did with what it pulled.
        public var pulled: Counts
        /// What the peer did with what was pushed.
        public var pushed: Counts

        /// The report of `result`.
        public init(_ result: PeerSyncResult) {
            peer = result.peer
            ok = result.error == nil
            error = result.error?.description
            pulled = Counts(result.pulled)
            pushed = Counts(result.pushed)
        }

        /// One line for a person: counts, or the error.
        public var summary: String {
            let counts = "pulled \(pulled.summary); pushed \(pushed.summary)"
            return error.map { "\(peer): FAILED (\($0)); \(counts)" } ?? "\(peer): ok; \(counts)"
        }

        enum CodingKeys: String, CodingKey {
            case peer, ok, error, pulled, pushed
        }

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            peer = try container.decode(String.self, forKey: .peer)
            ok = try container.decode(Bool.self, forKey: .ok)
            error = try container.decodeIfPresent(String.self, forKey: .error)
            pulled = try container.decode(Counts.self, forKey: .pulled)
            pushed = try container.decode(Counts.self, forKey: .pushed)
        }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(peer, forKey: .peer)
            try container.encode(ok, forKey: .ok)
            try container.encode(error, forKey: .error)  // null when the round succeeded
            try container.encode(pulled, forKey: .pulled)
            try container.encode(pushed, forKey: .pushed)
        }
    }

    /// One report per peer the round ran with.
    public var peers: [Peer]

    /// The answer for `results`.
    public init(_ results: [PeerSyncResult]) {
        peers = results.map(Peer.init)
    }

    /// Whether every peer's round succeeded.
    public var succeeded: Bool { peers.allSatisfy(\.ok) }
}
