import Foundation
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
    /// The store's public signing key (``StoreSigningKey/publicKey``), shown in its state; nil when not loaded.
    public nonisolated let publicKey: String?

    /// An endpoint for `store`.
    public init(store: any ReplicaStore, maximumOrigins: Int = 10_000, publicKey: String? = nil) throws {
        self.store = store
        self.publicKey = publicKey
        self.storeIdentifier = store.identifier
        self.modelVersionHash = store.modelVersionHash
        var engine = try ReplayEngine(store: store)
        engine.maximumOrigins = maximumOrigins
        self.engine = engine
    }

    /// A signal after each commit to the store (this process's or another's on the same file;
    /// see ``ReplicaStore/commits()``): what the daemon waits on to push new change sets.
    public nonisolated func commits() -> AsyncStream<Void> {
        store.commits()
    }

    /// The store's UUID, model hash, version vector and public key.
    public func state() throws -> HistoryState {
        var state = try store.historyState()
        state.publicKey = publicKey
        return state
    }

    /// At most `limit` change sets not covered by `vector`, as JSON lines in an order that applies as is.
    public func lines(after vector: VersionVector, limit: Int) throws -> [String] {
        try store.changeSetLines(after: vector, limit: limit)
    }

    /// One page of the change sets not covered by `vector`, after position `cursor` (0 to start).
    public func page(after vector: VersionVector, cursor: Int64, limit: Int) throws -> ChangeSetPage {
        try store.changeSetPage(after: vector, cursor: cursor, limit: limit)
    }

    /// Applies change sets given as JSON lines; a malformed line rejects all of them.
    public func apply(lines: [String]) throws -> ApplyReport {
        try engine.apply(lines: lines)
    }

    /// Checks and decodes change-set lines against the store's model, as
    /// ``apply(lines:)`` does first, but off the actor and on a thread of its
    /// own: a pull checks its next batch so while this one is applied.
    nonisolated func check(lines: [String]) async throws(ReplayError) -> ReplayEngine.CheckedBatch {
        ReplayEngine.CheckedBatch(entries: try await LineDecoding.decodeOffPool(lines, model: store.model, versionHash: store.modelVersionHash))
    }

    /// Applies a batch ``check(lines:)`` has checked.
    func apply(_ batch: ReplayEngine.CheckedBatch) throws -> ApplyReport {
        try engine.apply(batch)
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
