import Foundation
import FerryStore

/// The daemon's status document: the answer of `GET /v1/status` and what
/// `ferry status` prints (docs/PROTOCOL.md). `store` and `model` are always
/// there; `vector`, `waiting` and `quarantined` are read from the store, and any
/// of them that could not be read is `null` with `read_error` saying why — a
/// count is never left out without a word. While the daemon's store cannot be
/// opened, `store_error` says why and the counts are absent.
public struct StatusDocument: Codable, Sendable, Equatable {
    /// One configured peer as the daemon sees it.
    public struct Peer: Codable, Sendable, Equatable {
        /// The peer's name in the configuration.
        public var name: String
        /// The peer's URL: of several (relays sharing one database), the one in use.
        public var url: String
        /// Every URL of a peer listed with several (`urls` in the configuration), in the order
        /// they are tried; nil for a peer with one.
        public var urls: [String]?
        /// Whether the peer is a relay (`ferry relay`), as its state last said: this store then
        /// long-polls it for new change sets. Nil until known.
        public var relay: Bool?
        /// `idle`, `syncing`, `backing_off`, or `waiting for the store`.
        public var state: String
        public var lastAttempt: Date?
        public var lastSuccess: Date?
        public var lastError: String?
        public var consecutiveFailures: Int?
        /// When the next automatic round is due after a failure.
        public var retryAt: Date?
        /// Change sets the peer has that this store lacks, as of the last successful round.
        public var toPull: Int64?
        /// Change sets this store has that the peer lacks, likewise.
        public var toPush: Int64?
        /// The version hash of the peer's model, as its state last said (a rolling upgrade shows here).
        public var model: String?

        /// A peer in `state`, with nothing else known yet.
        public init(name: String, url: String, state: String) {
            self.name = name
            self.url = url
            self.state = state
        }

        enum CodingKeys: String, CodingKey {
            case name, url, urls, relay, state
            case lastAttempt = "last_attempt", lastSuccess = "last_success", lastError = "last_error"
            case consecutiveFailures = "consecutive_failures", retryAt = "retry_at", toPull = "to_pull", toPush = "to_push", model
        }

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            name = try container.decode(String.self, forKey: .name)
            url = try container.decode(String.self, forKey: .url)
            urls = try container.decodeIfPresent([String].self, forKey: .urls)
            relay = try container.decodeIfPresent(Bool.self, forKey: .relay)
            state = try container.decode(String.self, forKey: .state)
            lastAttempt = try container.decodeIfPresent(Date.self, forKey: .lastAttempt)
            lastSuccess = try container.decodeIfPresent(Date.self, forKey: .lastSuccess)
            lastError = try container.decodeIfPresent(String.self, forKey: .lastError)
            consecutiveFailures = try container.decodeIfPresent(Int.self, forKey: .consecutiveFailures)
            retryAt = try container.decodeIfPresent(Date.self, forKey: .retryAt)
            toPull = try container.decodeIfPresent(Int64.self, forKey: .toPull)
            toPush = try container.decodeIfPresent(Int64.self, forKey: .toPush)
            model = try container.decodeIfPresent(String.self, forKey: .model)
        }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(name, forKey: .name)
            try container.encode(url, forKey: .url)
            try container.encodeIfPresent(urls, forKey: .urls)
            try container.encodeIfPresent(relay, forKey: .relay)
            try container.encode(state, forKey: .state)
            // Only a peer of an open store has these; each is then there, null when unknown.
            if let consecutiveFailures {
                try container.encode(consecutiveFailures, forKey: .consecutiveFailures)
                try container.encode(lastAttempt, forKey: .lastAttempt)
                try container.encode(lastSuccess, forKey: .lastSuccess)
                try container.encode(lastError, forKey: .lastError)
                try container.encode(retryAt, forKey: .retryAt)
                try container.encode(toPull, forKey: .toPull)
                try container.encode(toPush, forKey: .toPush)
                try container.encode(model, forKey: .model)
            }
        }
    }

    /// How much history the store keeps (docs/SYNC.md, "Bounded history").
    public struct History: Codable, Sendable, Equatable {
        /// Change sets in the history.
        public var changeSets: Int
        /// Their size in bytes.
        public var bytes: Int64
        /// Tombstones of deleted objects.
        public var tombstones: Int
        /// Per origin, the last change set purged.
        public var purgedThrough: [String: Int64]
        /// Deletes made before this are forgotten; null while none are.
        public var horizon: Date?
        /// When the daemon last purged; null before its first purge.
        public var lastPurge: Date?
        /// What the last purge dropped.
        public var lastPurgedChangeSets: Int?
        public var lastForgottenTombstones: Int?

        /// The document's part for `size`, and the last purge.
        public init(_ size: HistorySize, lastPurge: Date?, lastPurged: PurgeReport?) {
            changeSets = size.changeSets
            bytes = size.bytes
            tombstones = size.tombstones
            purgedThrough = size.purgedThrough
            horizon = size.horizon.map { Date(timeIntervalSince1970: TimeInterval($0.milliseconds) / 1000) }
            self.lastPurge = lastPurge
            lastPurgedChangeSets = lastPurged?.changeSets
            lastForgottenTombstones = lastPurged?.tombstones
        }

        enum CodingKeys: String, CodingKey {
            case changeSets = "change_sets", bytes, tombstones, purgedThrough = "purged_through", horizon
            case lastPurge = "last_purge", lastPurgedChangeSets = "last_purged_change_sets", lastForgottenTombstones = "last_forgotten_tombstones"
        }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(changeSets, forKey: .changeSets)
            try container.encode(bytes, forKey: .bytes)
            try container.encode(tombstones, forKey: .tombstones)
            try container.encode(purgedThrough, forKey: .purgedThrough)
            try container.encode(horizon, forKey: .horizon)
            try container.encode(lastPurge, forKey: .lastPurge)
            try container.encode(lastPurgedChangeSets, forKey: .lastPurgedChangeSets)
            try container.encode(lastForgottenTombstones, forKey: .lastForgottenTombstones)
        }
    }

    /// Why the daemon's store is not open.
    public struct StoreProblem: Codable, Sendable, Equatable {
        /// What is wrong and what the daemon does about it.
        public var message: String
        /// Since when.
        public var since: Date
        /// Whether pulls are served from a read-only view meanwhile.
        public var readOnlyView: Bool

        /// A problem.
        public init(message: String, since: Date, readOnlyView: Bool) {
            self.message = message
            self.since = since
            self.readOnlyView = readOnlyView
        }

        enum CodingKeys: String, CodingKey {
            case message, since, readOnlyView = "read_only_view"
        }
    }

    /// The store's UUID (absent while the store is not open).
    public var store: UUID?
    /// The store's model version hash (absent while the store is not open).
    public var model: String?
    /// What the store has taken in; null when it could not be read.
    public var vector: VersionVector?
    /// Received change sets waiting for a predecessor or a model; null when unreadable.
    public var waiting: Int?
    /// Of those, the ones made with a model version this store cannot read yet; null when unreadable.
    public var waitingForModel: Int?
    /// Quarantined change sets; null when unreadable.
    public var quarantined: Int?
    /// Change sets applied although they left the store breaking a rule of the model (they met
    /// concurrent changes; `ferry conflicts list` shows what broke); null when unreadable.
    public var leftInvalid: Int?
    /// How much history the store keeps; null when unreadable.
    public var history: History?
    /// Why some counts are null; null when every read succeeded.
    public var readError: String?
    /// Why the store is not open; absent when it is.
    public var storeError: StoreProblem?
    /// The configured peers.
    public var peers: [Peer]
    /// `"not running"` when `ferry status` found no daemon and read the store itself.
    public var daemon: String?

    /// The document of an open store.
    public init(store: UUID, model: String, peers: [Peer]) {
        self.store = store
        self.model = model
        self.peers = peers
    }

    /// The document of a daemon whose store is not open.
    public init(storeError: StoreProblem, peers: [Peer]) {
        self.storeError = storeError
        self.peers = peers
    }

    enum CodingKeys: String, CodingKey {
        case store, model, vector, waiting, waitingForModel = "waiting_for_model", quarantined, leftInvalid = "left_invalid", history,
             readError = "read_error", storeError = "store_error", peers, daemon
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        store = try container.decodeIfPresent(UUID.self, forKey: .store)
        model = try container.decodeIfPresent(String.self, forKey: .model)
        vector = try container.decodeIfPresent(WireVector.self, forKey: .vector)?.vector
        waiting = try container.decodeIfPresent(Int.self, forKey: .waiting)
        waitingForModel = try container.decodeIfPresent(Int.self, forKey: .waitingForModel)
        quarantined = try container.decodeIfPresent(Int.self, forKey: .quarantined)
        leftInvalid = try container.decodeIfPresent(Int.self, forKey: .leftInvalid)
        history = try container.decodeIfPresent(History.self, forKey: .history)
        readError = try container.decodeIfPresent(String.self, forKey: .readError)
        storeError = try container.decodeIfPresent(StoreProblem.self, forKey: .storeError)
        peers = try container.decode([Peer].self, forKey: .peers)
        daemon = try container.decodeIfPresent(String.self, forKey: .daemon)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        if let store {
            // An open store: its counts are always there, null when they could not be read.
            try container.encode(store.uuidString, forKey: .store)
            try container.encode(model, forKey: .model)
            try container.encode(vector.map(WireVector.init), forKey: .vector)
            try container.encode(waiting, forKey: .waiting)
            try container.encode(waitingForModel, forKey: .waitingForModel)
            try container.encode(quarantined, forKey: .quarantined)
            try container.encode(leftInvalid, forKey: .leftInvalid)
            try container.encode(history, forKey: .history)
            try container.encode(readError, forKey: .readError)
        }
        try container.encodeIfPresent(storeError, forKey: .storeError)
        try container.encode(peers, forKey: .peers)
        try container.encodeIfPresent(daemon, forKey: .daemon)
    }

    /// The document as JSON text.
    public var json: String { WireJSON.encode(self) }

    /// What a peer token is shown: no peer URLs, and no messages that may name paths on
    /// this machine (the store's problem, failed reads, peers' last errors). Counts,
    /// states and times stay, so a peer can still tell how far behind it is.
    public var forPeers: StatusDocument {
        var shown = self
        shown.peers = peers.map { peer in
            var redacted = peer
            redacted.url = Self.adminOnly
            if redacted.urls != nil { redacted.urls = [Self.adminOnly] }
            if redacted.lastError != nil { redacted.lastError = Self.adminOnly }
            return redacted
        }
        if var problem = shown.storeError {
            problem.message = Self.adminOnly
            shown.storeError = problem
        }
        if shown.readError != nil { shown.readError = Self.adminOnly }
        return shown
    }

    /// What stands in for details only admin tokens see.
    public static let adminOnly = "(shown to admin tokens only)"
}
