import Foundation
import Synchronization
import FerryStore
import NIOPosix

/// One store's side of replication: what peers read from it and what they
/// apply to it, one operation at a time. The HTTP server and the sync loop of a
/// daemon share one endpoint, so two batches are never replayed at once.
///
/// Store work is synchronous SQLite I/O in short transactions; it runs on the
/// actor's executor, never on a network event loop.
public actor ReplicationEndpoint {
    /// The store.
    public let store: any ReplicaStore
    /// The store's UUID (fixed for the store's life; readable without waiting for the actor).
    public nonisolated let storeIdentifier: UUID
    /// The version hash of the store's model (readable without waiting for the actor).
    public nonisolated let modelVersionHash: String
    private let engine: ReplayEngine
    /// The store's version vector as this endpoint last read it: by ``vector()``, ``state()``, or
    /// at the end of an apply (its report's). Nil before the first.
    package private(set) var lastReadVector: VersionVector?

    /// Which origins' change sets the store takes (docs/SYNC.md, "Signed change sets").
    public nonisolated let trust: OriginTrust
    /// Hears every refusal of an untrusted change set, and every key learned or refused.
    private nonisolated let observer: TrustObserver
    /// The configured peers, asked for their keys when a change set of an origin (or a key) not known yet arrives.
    private nonisolated let keyPeers = Mutex<[(name: String, client: PeerClient)]>([])

    /// An endpoint for `store`, taking change sets as `trust` allows (without one: checked against
    /// the keys the store holds, other origins taken; ``OriginTrust/Policy/storeKeysOnly``).
    public init(store: any ReplicaStore, maximumOrigins: Int = 10_000, trust: OriginTrust? = nil,
                observer: TrustObserver = TrustObserver()) throws {
        self.store = store
        self.storeIdentifier = store.identifier
        self.modelVersionHash = store.modelVersionHash
        let trust = try trust ?? OriginTrust(store: store)
        self.trust = trust
        self.observer = observer
        var engine = try ReplayEngine(store: store, trust: trust)
        engine.maximumOrigins = maximumOrigins
        self.engine = engine
    }

    /// Sets the peers asked for their keys when a pushed change set of an origin (or a key) not known
    /// yet arrives (``receive(lines:)``): the daemon's configured peers.
    public nonisolated func askForKeys(from peers: [(name: String, client: PeerClient)]) {
        keyPeers.withLock { $0 = peers }
    }

    /// Asks every peer of ``askForKeys(from:)`` for its state, at once, and takes the keys it teaches
    /// (its own on first use, endorsed rotations; ``OriginTrust/learn(from:peer:)``). Waits at most
    /// `timeout`: a push that met an unknown key waits for this before it is tried again. A peer that
    /// cannot be asked is passed over (the observer hears why), as a key it taught that cannot be recorded.
    public nonisolated func learnKeysFromPeers(timeout: Duration = .seconds(5)) async {
        let peers = keyPeers.withLock { $0 }
        guard !peers.isEmpty else { return }
        let observer = self.observer
        let askers = peers.map { peer in
            Task {
                do {
                    try self.learnKeys(from: try await peer.client.state(), peer: peer.name)
                } catch {
                    if !Task.isCancelled { observer.couldNotLearnKeys(peer.name, error) }
                }
            }
        }
        // The first of "every peer answered" and the timeout ends the wait; past the timeout the
        // askers are cancelled, and none is waited for (a request that ignores cancellation ends on its own).
        // Answered in time, the timeout's sleep is cancelled: no sleeper outlives the wait.
        let ended = FirstOf()
        let deadline = Task { try await Task.sleep(for: timeout) }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            Task {
                for asker in askers { await asker.value }
                deadline.cancel()
                if ended.claim() { continuation.resume() }
            }
            Task {
                _ = await deadline.result
                if ended.claim() {
                    for asker in askers { asker.cancel() }
                    continuation.resume()
                }
            }
        }
    }

    /// Takes what a configured peer's state teaches about keys (``OriginTrust/learn(from:peer:)``), telling the observer.
    public nonisolated func learnKeys(from state: HistoryState, peer: String) throws {
        for event in try trust.learn(from: state, peer: peer) { observer.keyEvent(event) }
    }

    /// A signal after each commit to the store (this process's or another's on the same file;
    /// see ``ReplicaStore/commits()``): what the daemon waits on to push new change sets.
    public nonisolated func commits() -> AsyncStream<Void> {
        store.commits()
    }

    /// The store's UUID, model hash, version vector, public key (its newest own key), and the keys
    /// it holds for every origin.
    public func state() throws -> HistoryState {
        var state = try store.historyState()
        lastReadVector = state.vector
        let keys = try store.originKeys()
        state.publicKey = keys.last(where: { $0.origin == storeIdentifier })?.publicKey
        state.keys = keys.map(PublishedKey.init)
        return state
    }

    /// The store's version vector: ``state()`` without reading the keys.
    public func vector() throws -> VersionVector {
        let vector = try store.historyState().vector
        lastReadVector = vector
        return vector
    }

    /// At most `limit` change sets not covered by `vector`, as JSON lines in an order that applies as is,
    /// and of those only the first that add up to at most `maximumBytes` (a newline after each), always
    /// the first: what one push request carries. The rest are not read, and a large one is kept as the
    /// store holds it, made a piece at a time as it is sent (``ChangeSetPage/Line``).
    public func lines(after vector: VersionVector, limit: Int, maximumBytes: Int) throws -> [ChangeSetPage.Line] {
        try store.changeSetPage(after: vector, cursor: 0, limit: limit, maximumBytes: maximumBytes).lines
    }

    /// One page of the change sets not covered by `vector`, after position `cursor` (0 to start).
    public func page(after vector: VersionVector, cursor: Int64, limit: Int) throws -> ChangeSetPage {
        try store.changeSetPage(after: vector, cursor: cursor, limit: limit)
    }

    /// Applies change sets given as JSON lines; a malformed or untrusted line rejects all of them.
    public func apply(lines: [String]) throws -> ApplyReport {
        noted(try engine.apply(lines: lines))
    }

    /// ``apply(lines:)`` for change sets a peer pushed: a change set of an origin (or signed with a
    /// key) not known yet first has the configured peers asked for their keys (at most every few
    /// seconds), then the batch is tried once more; a refusal is told to the observer.
    public func receive(lines: [String]) async throws -> ApplyReport {
        do {
            return noted(try engine.apply(lines: lines))
        } catch ReplayError.untrusted(let line, let refusal) {
            guard refusal.mayBeLearned, !keyPeers.withLock({ $0.isEmpty }), trust.shouldAskPeers() else {
                observer.refused(refusal, "push")
                throw ReplayError.untrusted(line: line, refusal)
            }
            await learnKeysFromPeers()
            do {
                return noted(try engine.apply(lines: lines))
            } catch ReplayError.untrusted(let line, let refusal) {
                observer.refused(refusal, "push")
                throw ReplayError.untrusted(line: line, refusal)
            }
        }
    }

    /// Checks and decodes change-set lines against the store's model and trust, as
    /// ``apply(lines:)`` does first, but off the actor and on a thread of its
    /// own: a pull checks its next batch so while this one is applied.
    nonisolated func check(lines: [String]) async throws(ReplayError) -> ReplayEngine.CheckedBatch {
        ReplayEngine.CheckedBatch(entries: try await LineDecoding.decodeOffPool(lines, model: store.model, versionHash: store.modelVersionHash,
                                                                                verifier: trust.verifier))
    }

    /// Tells the observer of a refusal met on a pull.
    nonisolated func noteRefusal(_ refusal: TrustRefusal, via: String) {
        observer.refused(refusal, via)
    }

    /// Applies a batch ``check(lines:)`` has checked.
    func apply(_ batch: ReplayEngine.CheckedBatch) throws -> ApplyReport {
        noted(try engine.apply(batch))
    }

    /// Keeps `report`'s vector as the last one read, and returns the report.
    private func noted(_ report: ApplyReport) -> ApplyReport {
        lastReadVector = report.vector
        return report
    }

    /// How many received change sets are held back and how many are quarantined.
    public func backlog() throws -> Backlog {
        try store.backlog()
    }

    /// Drops what `policy` allows from the history (``ReplicaStore/purgeHistory(_:)``).
    public func purge(_ policy: PurgePolicy) throws -> PurgeReport {
        try store.purgeHistory(policy)
    }

    /// A consistent snapshot of the store in a file (``ReplicaStore/writeSnapshot()``), written on
    /// a thread of the I/O pool: it reads the whole store, and neither this actor nor the shared
    /// pool waits for it (the copy is one read transaction, so writes go on meanwhile).
    public nonisolated func writeSnapshot() async throws -> SnapshotFile {
        let store = self.store
        return try await NIOThreadPool.singleton.runIfActive { try store.writeSnapshot() }
    }

    /// How much history the store keeps.
    public func historySize() throws -> HistorySize {
        try store.historySize()
    }
}

/// Who hears about trust: every change set refused as untrusted (with how it came: `push`, `pull`),
/// and every key learned or refused (the daemon counts them in `/metrics` and logs them, never a body).
public struct TrustObserver: Sendable {
    /// A refused change set and how it came.
    public var refused: @Sendable (TrustRefusal, String) -> Void
    /// A key learned, or a conflicting key presented.
    public var keyEvent: @Sendable (OriginTrust.Event) -> Void
    /// A peer asked for its keys could not answer, or what it taught could not be recorded.
    public var couldNotLearnKeys: @Sendable (_ peer: String, _ error: any Error) -> Void

    public init(refused: @escaping @Sendable (TrustRefusal, String) -> Void = { _, _ in },
                keyEvent: @escaping @Sendable (OriginTrust.Event) -> Void = { _ in },
                couldNotLearnKeys: @escaping @Sendable (_ peer: String, _ error: any Error) -> Void = { _, _ in }) {
        self.refused = refused
        self.keyEvent = keyEvent
        self.couldNotLearnKeys = couldNotLearnKeys
    }
}

/// Which of several racing tasks came first: only the first to ``claim()`` gets true.
private final class FirstOf: Sendable {
    private let claimed = Atomic<Bool>(false)

    func claim() -> Bool { !claimed.exchange(true, ordering: .acquiringAndReleasing) }
}
