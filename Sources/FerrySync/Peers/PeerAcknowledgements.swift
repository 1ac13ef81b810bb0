import Foundation
import FerryStore

/// What the configured peers have taken in, as a purge may use it (docs/SYNC.md, "Bounded history").
///
/// Each successful round ends with the peer's vector: the change sets it holds. That is enough to
/// drop change sets (the peer has them), but not to forget a delete: a change set the peer made
/// before it took the delete in, or took in from a third store, may still be on its way here, and
/// would be refused for not knowing the forgotten delete. So an acknowledgement becomes **stable**
/// only once this store holds everything the peer held when it gave it; from then on, whatever the
/// peer sends was made knowing all of it. The horizon asks no change set to know more than every
/// peer's stable acknowledgement, and forgets no delete before every peer has one.
package struct PeerAcknowledgements: Sendable {
    private struct Entry: Sendable {
        /// The peer's vector at its last successful round.
        var latest: VersionVector?
        /// The last acknowledgement whose change sets this store has all taken in.
        var stable: VersionVector?
        /// An acknowledgement waiting for this store to take in what the peer held.
        var candidate: VersionVector?
    }

    private let peers: [String]
    private var entries: [String: Entry]

    /// No acknowledgement yet from any of `peers` (their names).
    package init(peers: [String]) {
        self.peers = peers
        self.entries = Dictionary(peers.map { ($0, Entry()) }, uniquingKeysWith: { first, _ in first })
    }

    /// Notes `vector`, what `peer` held at the end of a successful round, and `local`, what this store holds now.
    package mutating func record(_ vector: VersionVector, from peer: String, local: VersionVector) {
        guard var entry = entries[peer] else { return }
        entry.latest = vector
        if let candidate = entry.candidate, Self.covers(local, candidate) {
            entry.stable = candidate
            entry.candidate = nil
        }
        // The newest acknowledgement is stable at once when already covered; otherwise it waits its
        // turn behind one still pending.
        if Self.covers(local, vector) {
            entry.stable = vector
            entry.candidate = nil
        } else if entry.candidate == nil {
            entry.candidate = vector
        }
        entries[peer] = entry
    }

    /// Notes what this store holds now: acknowledgements whose change sets it has all taken in become stable.
    package mutating func update(local: VersionVector) {
        for (peer, var entry) in entries {
            guard let candidate = entry.candidate, Self.covers(local, candidate) else { continue }
            entry.stable = candidate
            entry.candidate = nil
            entries[peer] = entry
        }
    }

    /// What each peer held at its last successful round, once every peer has had one; empty before.
    package var acknowledged: [VersionVector] {
        let vectors = peers.compactMap { entries[$0]?.latest }
        return vectors.count == peers.count ? vectors : []
    }

    /// Every peer's stable acknowledgement; nil while a peer has none (then no delete may be forgotten).
    package var stable: [VersionVector]? {
        let vectors = peers.compactMap { entries[$0]?.stable }
        return vectors.count == peers.count ? vectors : nil
    }

    /// The peers without a stable acknowledgement yet.
    package var unstable: [String] { peers.filter { entries[$0]?.stable == nil } }

    /// The peers without a successful round yet.
    package var silent: [String] { peers.filter { entries[$0]?.latest == nil } }

    /// What a purge at `now` may drop: change sets every peer has and `retention` seconds old; and,
    /// once every peer's acknowledgement is stable, tombstones `horizon` seconds old, capped by them.
    package func policy(at now: Date, retention: TimeInterval, horizon: TimeInterval) -> PurgePolicy {
        let stable = stable
        return PurgePolicy(acknowledged: acknowledged, changeSetsMadeBefore: .wall(now.addingTimeInterval(-retention)),
                           tombstonesMadeBefore: stable == nil ? nil : .wall(now.addingTimeInterval(-horizon)),
                           knownToPeers: stable ?? [])
    }

    private static func covers(_ vector: VersionVector, _ other: VersionVector) -> Bool {
        other.allSatisfy { vector[$0.key, default: 0] >= $0.value }
    }
}
