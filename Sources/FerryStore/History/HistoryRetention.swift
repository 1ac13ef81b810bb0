import Foundation

/// What a purge may drop from a store's history (docs/SYNC.md, "Bounded history").
///
/// A change set goes when every peer in ``acknowledged`` has it and it was made before
/// ``changeSetsMadeBefore`` (the retention period); quarantined change sets, and those applied
/// but left invalid, stay until they are dealt with. A tombstone goes when its delete was made
/// before ``tombstonesMadeBefore`` (the horizon), and so does an alias of a merged duplicate; from then on the store refuses peers and change
/// sets that do not know everything made before the horizon (``HistoryError/pastHorizon(origin:needed:horizon:)``),
/// since they could bring back an object whose delete it no longer remembers.
public struct PurgePolicy: Sendable, Equatable {
    /// What each peer has taken in (one version vector per peer); no change set goes when empty.
    public var acknowledged: [VersionVector]
    /// Change sets made at or after this time stay (nil: no age limit).
    public var changeSetsMadeBefore: HybridTimestamp?
    /// Tombstones of deletes made before this time go (nil: tombstones stay).
    public var tombstonesMadeBefore: HybridTimestamp?
    /// What every peer has taken in, of which this store holds everything (one vector per peer;
    /// empty: no cap): the horizon never asks a change set to know more than all of these, and forgets
    /// only the deletes they cover, so nothing made without knowing a forgotten delete can still
    /// arrive from them. A daemon passes its peers' stable acknowledgements (docs/SYNC.md, "Bounded history").
    public var knownToPeers: [VersionVector]

    public init(acknowledged: [VersionVector], changeSetsMadeBefore: HybridTimestamp? = nil, tombstonesMadeBefore: HybridTimestamp? = nil,
                knownToPeers: [VersionVector]? = nil) {
        self.acknowledged = acknowledged
        self.changeSetsMadeBefore = changeSetsMadeBefore
        self.tombstonesMadeBefore = tombstonesMadeBefore
        self.knownToPeers = knownToPeers ?? acknowledged
    }

    /// The policy of a daemon at `now`: change sets `retention` seconds old that every peer
    /// has, tombstones older than `horizon` seconds (nil: kept forever).
    public static func at(_ now: Date, acknowledged: [VersionVector], retention: TimeInterval, horizon: TimeInterval?,
                          knownToPeers: [VersionVector]? = nil) -> PurgePolicy {
        PurgePolicy(acknowledged: acknowledged, changeSetsMadeBefore: .wall(now.addingTimeInterval(-retention)),
                    tombstonesMadeBefore: horizon.map { .wall(now.addingTimeInterval(-$0)) }, knownToPeers: knownToPeers)
    }
}

/// What one purge dropped.
public struct PurgeReport: Sendable, Equatable {
    /// Change sets deleted from the history.
    public var changeSets: Int
    /// Tombstones forgotten.
    public var tombstones: Int
    /// Aliases of merged duplicates forgotten (merges made before the horizon).
    public var aliases: Int

    public init(changeSets: Int = 0, tombstones: Int = 0, aliases: Int = 0) {
        self.changeSets = changeSets
        self.tombstones = tombstones
        self.aliases = aliases
    }
}

/// How much history a store keeps: what `ferry status` and `/metrics` show.
public struct HistorySize: Sendable, Equatable {
    /// Change sets in the history (applied, quarantined or left invalid).
    public var changeSets: Int
    /// Their bodies' size, in bytes.
    public var bytes: Int64
    /// Tombstones of deleted objects.
    public var tombstones: Int
    /// Per origin (UUID text), the last sequence number purged.
    public var purgedThrough: [String: Int64]
    /// The tombstone horizon: deletes made before it are forgotten (nil: none forgotten yet).
    public var horizon: HybridTimestamp?

    public init(changeSets: Int, bytes: Int64, tombstones: Int, purgedThrough: [String: Int64], horizon: HybridTimestamp?) {
        self.changeSets = changeSets
        self.bytes = bytes
        self.tombstones = tombstones
        self.purgedThrough = purgedThrough
        self.horizon = horizon
    }
}
