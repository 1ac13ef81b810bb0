import Foundation
import Logging
import Metrics
import FerryStore
import FerrySync
import FerryServer

/// Runs sync rounds with the configured peers, one round at a time, and keeps
/// what `ferry status` and `/v1/status` show: per peer the last attempt, the
/// last success, the last error, and how far apart the two stores are.
public actor SyncCoordinator {
    /// What hears that `peer` answered a round 410 for `reason`: this store needs a snapshot of it,
    /// taken through `client` (``Bootstrap``).
    public typealias GoneHandler = @Sendable (_ peer: String, _ client: PeerClient, _ reason: String) -> Void

    struct PeerRecord {
        let name: String
        let sync: PeerSync
        /// Whether the peer is a relay, as its state last said (nil until asked): relays are long-polled.
        var isRelay: Bool?
        /// Idle, syncing or backing off; last attempt, success and error.
        var session: PeerSession
        var toPull: Int64?
        var toPush: Int64?
        /// The version hash of the peer's model, as its state last said.
        var model: String?
        /// The peer's store and vector as the last successful round saw them (a push-only round starts from them).
        var known: (store: UUID, vector: VersionVector)?
        /// Whether the peer's state was read for its keys since the daemon started (trust on first use).
        var keysRead = false
    }

    /// What each peer had taken in at its last successful round of this run (kept through
    /// failures), and which of those this store has caught up with: what a purge may drop.
    private var acknowledgements: PeerAcknowledgements

    /// The last purge: when, and what went.
    private var lastPurge: (at: Date, report: PurgeReport)?

    /// The local side.
    public let endpoint: ReplicationEndpoint
    private let onGone: GoneHandler?
    private var peers: [PeerRecord]
    /// A round is running; rounds asked for meanwhile wait in `waitingRounds`, first come first served.
    private var roundRunning = false
    private var waitingRounds: [CheckedContinuation<Void, Never>] = []
    private let logger: Logger
    /// The time rounds and backoffs are reckoned in; the sync loop's schedule reads it too.
    nonisolated let clock: any PeerClock
    /// How long a request to a peer may go without data (a long poll of a relay waits less).
    nonisolated let requestTimeout: TimeInterval
    private var random = SystemRandomNumberGenerator()

    /// A coordinator for `peers` (name, URL, token, how its certificate is checked) over
    /// `endpoint`; a failing peer is retried on `retries`, reckoned on `clock` (tests pass a
    /// `ManualClock`). Requests go over HTTP, or through `transport` when one is given (tests
    /// pass an `InMemoryTransport`).
    public init(endpoint: ReplicationEndpoint, peers: [(name: String, url: URL, token: String, trust: PeerTrust)], batchSize: Int,
                            requestTimeout: TimeInterval, retries: RetrySchedule = RetrySchedule(), logger: Logger,
                            clock: any PeerClock = SystemPeerClock(), transport: (any PeerTransport)? = nil,
                            onGone: GoneHandler? = nil) {
        self.init(endpoint: endpoint, peers: peers.map { (name: $0.name, urls: [$0.url], token: $0.token, trust: $0.trust) },
                  batchSize: batchSize, requestTimeout: requestTimeout, retries: retries, logger: logger, clock: clock,
                  transport: transport, onGone: onGone)
    }

    /// A coordinator for `peers`, each reached at any of its `urls` (relays sharing one database:
    /// requests fail over from one to the next; ``PeerClient``); otherwise as the initializer above.
    public init(endpoint: ReplicationEndpoint, peers: [(name: String, urls: [URL], token: String, trust: PeerTrust)], batchSize: Int,
                requestTimeout: TimeInterval, retries: RetrySchedule = RetrySchedule(), logger: Logger,
                clock: any PeerClock = SystemPeerClock(), transport: (any PeerTransport)? = nil,
                onGone: GoneHandler? = nil) {
        self.endpoint = endpoint
        self.onGone = onGone
        self.logger = logger
        self.clock = clock
        self.requestTimeout = requestTimeout
        self.peers = peers.map { peer in
            PeerRecord(name: peer.name,
                       sync: PeerSync(name: peer.name, endpoint: endpoint,
                                      client: transport.map { PeerClient(baseURLs: peer.urls, token: peer.token, transport: $0) }
                                          ?? PeerClient(baseURLs: peer.urls, token: peer.token, timeout: requestTimeout, trust: peer.trust),
                                      batchSize: batchSize),
                       session: PeerSession(retries: retries))
        }
        self.acknowledgements = PeerAcknowledgements(peers: peers.map(\.name))
        self.peerClients = self.peers.map { ($0.name, $0.sync.client) }
    }

    /// The configured peers' names.
    public var peerNames: [String] { peers.map(\.name) }

    /// Each configured peer's name and client: whom the endpoint asks for keys it does not know yet
    /// (``ReplicationEndpoint/askForKeys(from:)``).
    public nonisolated let peerClients: [(name: String, client: PeerClient)]

    /// Reads `peer`'s state and takes the keys it teaches; the state when both worked.
    private static func readKeys(of peer: PeerSync, into endpoint: ReplicationEndpoint, logger: Logger) async -> HistoryState? {
        let state: HistoryState
        do {
            state = try await peer.client.state()
        } catch {
            logger.debug("could not ask peer \(peer.name) for its keys: \(error)")
            return nil
        }
        do {
            try endpoint.learnKeys(from: state, peer: peer.name)
            return state
        } catch {
            logger.warning("could not record the keys of peer \(peer.name): \(error)")
            return nil
        }
    }

    /// The client of the peer named `name`.
    func client(of name: String) -> PeerClient? {
        peers.first { $0.name == name }?.sync.client
    }

    /// The peers known to be relays, with their clients: what the sync loop long-polls.
    func relays() -> [(name: String, client: PeerClient, batchSize: Int)] {
        peers.filter { $0.isRelay == true }.map { ($0.name, $0.sync.client, $0.sync.batchSize) }
    }

    /// One round with `peer` (all peers when nil), after any round already running.
    /// - Returns: one result per peer; empty when `peer` names none.
    /// `prefetched`: `peer`'s first batch of a pull, already received (a relay's long poll).
    /// The round runs in a task of its own, so that a caller that is cancelled (a `sync-now` whose
    /// client went away) does not cut it short.
    public func round(peer: String? = nil, pull: Bool = true, push: Bool = true, prefetched: [String]? = nil,
                      progress: @escaping @Sendable (String) -> Void = { _ in }) async -> [PeerSyncResult] {
        guard pull || push else { return [] }
        let round: PeerRound = pull && push ? .full : (pull ? .pull : .push)
        let names = peers.map(\.name).filter { peer == nil || $0 == peer }
        // (A first batch already received belongs to the one peer named.)
        let firstBatch = peer == nil ? nil : prefetched
        let task = Task { () -> [PeerSyncResult] in
            await self.inTurn(names.map { ($0, round) }, prefetched: firstBatch, progress: progress)
        }
        return await task.value
    }

    /// Takes `event` for every peer (``PeerSession/handle(_:at:using:)``) and runs the rounds their
    /// sessions ask for, each after any round already running, on the caller's task (the sync loop's,
    /// which is cancelled only when the daemon stops: a round then stops between change sets). Starting
    /// a task per commit would wake one more thread on the path of every save (W4 in docs/PERFORMANCE.md).
    /// A round asked for while a peer's round runs waits in its session for the next
    /// ``PeerEvent/tick`` (``PeerSession/pending``). ``PeerEvent/roundEnded(error:)`` is the
    /// coordinator's own to give: handed in here, it does nothing.
    /// - Returns: the results of the rounds run.
    public func handle(_ event: PeerEvent, progress: @escaping @Sendable (String) -> Void = { _ in }) async -> [PeerSyncResult] {
        if case .roundEnded = event { return [] }
        let now = clock.now()
        var due: [(String, PeerRound)] = []
        for index in peers.indices {
            if let round = peers[index].session.handle(event, at: now, using: &random) { due.append((peers[index].name, round)) }
        }
        return due.isEmpty ? [] : await inTurn(due, prefetched: nil, progress: progress)
    }

    /// When the sync loop must look at its clock again for a peer (now for a round asked for while
    /// the last one ran, else a failed peer's retry); nil when none waits.
    func nextWake() -> Date? {
        let now = clock.now()
        if peers.contains(where: { $0.session.hasPendingRound(at: now) }) { return now }
        return peers.compactMap(\.session.retryAt).min()
    }

    /// Waits for the rounds asked for before, runs these (in order), then lets the next one run.
    private func inTurn(_ rounds: [(peer: String, round: PeerRound)], prefetched: [String]?,
                        progress: @escaping @Sendable (String) -> Void) async -> [PeerSyncResult] {
        if roundRunning {
            await withCheckedContinuation { waitingRounds.append($0) }  // (resumed with the turn: roundRunning stays true)
        } else {
            roundRunning = true
        }
        defer {
            if waitingRounds.isEmpty { roundRunning = false } else { waitingRounds.removeFirst().resume() }
        }
        var results: [PeerSyncResult] = []
        for (peer, round) in rounds {
            // (Stopping: the rounds not begun wait for the next start, as a round cut off does.)
            guard !Task.isCancelled, let index = peers.firstIndex(where: { $0.name == peer }) else { continue }
            if let result = await perform(index, round, prefetched: prefetched, progress: progress) { results.append(result) }
        }
        return results
    }

    /// One round with the peer at `index`; nil when it could not start.
    private func perform(_ index: Int, _ round: PeerRound, prefetched: [String]?,
                         progress: @escaping @Sendable (String) -> Void) async -> PeerSyncResult? {
        let name = peers[index].name
        let (pull, push) = (round.pulls, round.pushes)
        do {
            // Forced: a round asked for (the pull interval, sync-now) runs even during a backoff.
            try peers[index].session.start(at: clock.now(), force: true)
        } catch {
            // Rounds run one at a time (see `inTurn`), so a session is never already syncing here.
            logger.error("sync with \(name) not started: \(error)")
            return nil
        }
        // The peer's keys, once per daemon life, before its change sets are checked: its own key
        // on first use, and rotations (later rotations are learned when a check needs them).
        if !peers[index].keysRead, endpoint.trust.policy.trustsPeersOnFirstUse,
           let state = await Self.readKeys(of: peers[index].sync, into: endpoint, logger: logger) {
            peers[index].keysRead = true
            peers[index].isRelay = state.isRelay
        }
        // A push-only round (after a local commit) starts from the peer's vector as last seen;
        // a full round asks the peer, so a peer that went back is corrected on the interval.
        let known = pull ? nil : peers[index].known
        let result = await peers[index].sync.run(pull: pull, push: push, known: known, prefetched: prefetched,
                                                 progress: progress)
        if let isRelay = result.peerIsRelay { peers[index].isRelay = isRelay }
        if result.error == nil, let store = result.peerStore, let vector = result.peerVector {
            peers[index].known = (store, vector)
        } else if result.error == nil, let known = peers[index].known, !result.pulledThrough.isEmpty {
            // A pull-only round (a relay's long poll woke it): the peer holds what it sent, so the push
            // this store's commit of it starts is not sent back there.
            peers[index].known = (known.store, known.vector.merging(result.pulledThrough, uniquingKeysWith: max))
        } else if result.error != nil {
            peers[index].known = nil
        }
        let ended = clock.now()
        _ = peers[index].session.handle(.roundEnded(error: result.error), at: ended, using: &random)
        let backoff = peers[index].session.retryAt.map { $0.timeIntervalSince(ended) }
        ReceivedMetrics.record(result.pulled, via: "pull")
        Counter(label: "ferry_changesets_pulled_total", dimensions: [("peer", name)]).increment(by: result.pulled.applied)
        Counter(label: "ferry_changesets_pushed_total", dimensions: [("peer", name)]).increment(by: result.pushed.applied)
        Counter(label: "ferry_sync_rounds_total", dimensions: [("peer", name), ("result", result.error == nil ? "ok" : "failed")]).increment()
        if let error = result.error {
            var level = Logger.Level.warning
            switch error {
            case .localStore:
                // Not the peer's fault or the network's: this machine needs attention (disk, permissions).
                // A pull could not take change sets in; a push could not read the ones to send ("send").
                let operation = result.failedHalf == .push ? "send" : "pull"
                Counter(label: "ferry_store_errors_total", dimensions: [("operation", operation)]).increment()
                level = .error
            case .changeSetTooLarge:
                // Trying again does not help until an operator raises the peer's limit.
                level = .error
            default:
                break
            }
            logger.log(level: level, "sync with \(name) failed: \(error); next try in \(Int((backoff ?? 0).rounded())) s")
            if case .failed(410, let reason) = error { onGone?(name, peers[index].sync.client, reason) }
        } else {
            if let model = result.peerModel, !model.isEmpty {
                if let previous = peers[index].model, previous != model {
                    Gauge(label: "ferry_peer_model", dimensions: [("peer", name), ("model", previous)]).record(0)
                }
                peers[index].model = model
                Gauge(label: "ferry_peer_model", dimensions: [("peer", name), ("model", model)]).record(1)
            }
            // A push-only round that had nothing to send (after each commit that took in the peer's own
            // change sets, for one) takes the store's vector as the endpoint last read it (at the end of
            // that apply) instead of reading it again: that read would come right after the replay's
            // commit, on a processor the store's readers want then (W4 in docs/PERFORMANCE.md).
            // An older vector only holds an acknowledgement back, and the next round that sends or
            // pulls anything reads it afresh.
            let local = !pull && result.pushed == ApplyReport() ? await endpoint.lastReadVector : try? await endpoint.vector()
            if let local, let vector = result.peerVector { acknowledgements.record(vector, from: name, local: local) }
            if let lag = Self.lag(peerVector: result.peerVector, local: local, peerStore: result.peerStore) {
                peers[index].toPull = lag.toPull
                peers[index].toPush = lag.toPush
                Gauge(label: "ferry_peer_lag_changesets", dimensions: [("peer", name), ("direction", "to_pull")]).record(lag.toPull)
                Gauge(label: "ferry_peer_lag_changesets", dimensions: [("peer", name), ("direction", "to_push")]).record(lag.toPush)
            }
            if result.pulled.applied + result.pushed.applied + result.pulled.quarantined > 0 {
                logger.info("synced with \(peers[index].name): \(result.summary)")
            }
        }
        return result
    }

    /// How many change sets the peer has that this store lacks, and the reverse, from the
    /// peer's vector the round last saw (no extra request); nil when the round did not push.
    ///
    /// The peer has every change set of its own (`peerStore`), whatever that vector says: a
    /// push-only round starts from the vector of an earlier round, older than the peer's own
    /// change sets this store took in since, and those are not to push.
    static func lag(peerVector: VersionVector?, local: VersionVector?, peerStore: UUID?) -> (toPull: Int64, toPush: Int64)? {
        guard let remote = peerVector, let local else { return nil }
        var toPull: Int64 = 0
        var toPush: Int64 = 0
        for origin in Set(remote.keys).union(local.keys) {
            let difference = remote[origin, default: 0] - local[origin, default: 0]
            if difference > 0 { toPull += difference } else if origin != peerStore { toPush -= difference }
        }
        return (toPull, toPush)
    }

    /// Purges the history by the daemon's policy (docs/SYNC.md, "Bounded history"): the change sets
    /// every configured peer has acknowledged in this run and made more than `retention` seconds ago
    /// (none while a peer has not synced since the daemon started, or when there are no peers), and the
    /// tombstones of deletes made more than `horizon` seconds ago that every peer has acknowledged
    /// and whose acknowledgement this store has caught up with (``PeerAcknowledgements``).
    /// - Returns: what went; nil when the store could not be purged (the error is logged).
    @discardableResult
    public func purge(retention: TimeInterval, horizon: TimeInterval) async -> PurgeReport? {
        if let local = try? await endpoint.vector() { acknowledgements.update(local: local) }
        let policy = acknowledgements.policy(at: clock.now(), retention: retention, horizon: horizon)
        do {
            let report = try await endpoint.purge(policy)
            lastPurge = (clock.now(), report)
            Counter(label: "ferry_history_purged_changesets_total").increment(by: report.changeSets)
            Counter(label: "ferry_history_forgotten_tombstones_total").increment(by: report.tombstones)
            if report.changeSets + report.tombstones + report.aliases > 0 {
                let message = "purged \(report.changeSets) change sets every peer has; " +
                    "forgot \(report.tombstones) tombstones and \(report.aliases) aliases past the horizon"
                logger.info("\(message)")
            }
            if !acknowledgements.silent.isEmpty {
                logger.debug("no change set purged: no successful round yet with \(acknowledgements.silent.joined(separator: ", "))")
            } else if !acknowledgements.unstable.isEmpty {
                let message = "no tombstone forgotten: this store has not yet taken in everything " +
                    "\(acknowledgements.unstable.joined(separator: ", ")) held when it acknowledged"
                logger.debug("\(message)")
            }
            _ = await historySize()
            return report
        } catch {
            Counter(label: "ferry_store_errors_total", dimensions: [("operation", "purge")]).increment()
            logger.error("could not purge the history: \(error)")
            return nil
        }
    }

    /// How much history the store keeps, also recorded in the `ferry_history_*` gauges.
    private func historySize() async -> Result<HistorySize, any Error> {
        do {
            let size = try await endpoint.historySize()
            Gauge(label: "ferry_history_changesets").record(size.changeSets)
            Gauge(label: "ferry_history_bytes").record(size.bytes)
            Gauge(label: "ferry_history_tombstones").record(size.tombstones)
            return .success(size)
        } catch {
            return .failure(error)
        }
    }

    /// The status document of `GET /v1/status` and `ferry status` (``StatusDocument``).
    ///
    /// `store` and `model` are always there. `vector`, `waiting` and `quarantined` are read
    /// from the store; any of them that could not be read is `null`, and `read_error` says
    /// why (`null` when every read succeeded) — a count is never left out without a word.
    public func status() async -> StatusDocument {
        let time = clock.now()
        var document = StatusDocument(store: endpoint.storeIdentifier, model: endpoint.modelVersionHash, peers: peers.map { peer in
            let client = peer.sync.client
            var status = StatusDocument.Peer(name: peer.name, url: client.baseURL.absoluteString, state: peer.session.phase(at: time).name)
            if client.baseURLs.count > 1 { status.urls = client.baseURLs.map(\.absoluteString) }
            status.relay = peer.isRelay
            status.lastAttempt = peer.session.lastAttempt
            status.lastSuccess = peer.session.lastSuccess
            status.lastError = peer.session.lastError?.description
            status.consecutiveFailures = peer.session.consecutiveFailures
            status.retryAt = peer.session.retryAt
            status.toPull = peer.toPull
            status.toPush = peer.toPush
            status.model = peer.model
            return status
        })
        var readErrors: [String] = []
        do {
            document.vector = try await endpoint.vector()
        } catch {
            readErrors.append("the version vector: \(error)")
        }
        do {
            let backlog = try await endpoint.backlog()
            document.waiting = backlog.waiting
            document.quarantined = backlog.quarantined
            document.leftInvalid = backlog.leftInvalid
            document.waitingForModel = backlog.waitingForModel
            Gauge(label: "ferry_changesets_waiting_for_model").record(backlog.waitingForModel)
        } catch {
            readErrors.append("the waiting and quarantined change sets: \(error)")
        }
        switch await historySize() {
        case .success(let size):
            document.history = StatusDocument.History(size, lastPurge: lastPurge?.at, lastPurged: lastPurge?.report)
        case .failure(let error):
            readErrors.append("the history's size: \(error)")
        }
        if !readErrors.isEmpty {
            let message = "could not read \(readErrors.joined(separator: "; nor ")); ask again, and see the daemon's log if it persists"
            logger.warning("status: \(message)")
            document.readError = message
        }
        return document
    }
}
