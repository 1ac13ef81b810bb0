import Foundation
import GRDB
import FerryStore

extension SQLiteStore {
    /// Deletes the change sets that every listed peer has acknowledged (each
    /// vector says what one peer has taken in), and returns how many went.
    /// Change sets some peer still lacks are kept; so are tombstones. A peer
    /// later asking for purged change sets gets ``HistoryError/purged(origin:needed:purgedThrough:)``.
    @discardableResult
    public func purgeChangeSets(acknowledgedBy peers: [VersionVector]) throws -> Int {
        var removed = 0
        let store = identifier
        try write { db in removed = try HistoryLog(db: db, store: store).purge(coveredByAll: peers) }
        return removed
    }

    /// The change sets not covered by `vector`, then every new one as it is
    /// recorded — by this process or by any other process writing the same file
    /// (the file is polled every `interval`). Ends when the task is cancelled.
    ///
    /// ```swift
    /// for try await changeSet in store.changeSetUpdates(after: peerVector) { push(changeSet) }
    /// ```
    public func changeSetUpdates(after vector: VersionVector = [:], interval: Duration = .milliseconds(100)) -> ChangeSetUpdates {
        ChangeSetUpdates(store: self, vector: vector, interval: interval)
    }
}

/// An `AsyncSequence` of a store's change sets: those after a version vector,
/// then each new one as it is recorded (see ``SQLiteStore/changeSetUpdates(after:interval:)``).
public struct ChangeSetUpdates: AsyncSequence, Sendable {
    public typealias Element = ChangeSet

    let store: SQLiteStore
    let vector: VersionVector
    let interval: Duration

    public func makeAsyncIterator() -> Iterator {
        Iterator(store: store, vector: vector, interval: interval)
    }

    /// Reads the history in rank order, waiting for more when it has caught up.
    public struct Iterator: AsyncIteratorProtocol {
        let store: SQLiteStore
        var vector: VersionVector
        let interval: Duration
        var lastRank: Int64 = 0
        var buffered: [ChangeSet] = []

        init(store: SQLiteStore, vector: VersionVector, interval: Duration) {
            self.store = store
            self.vector = vector
            self.interval = interval
        }

        public mutating func next() async throws -> ChangeSet? {
            while buffered.isEmpty {
                if Task.isCancelled { return nil }
                let (rows, last) = try store.changeSets(afterRank: lastRank, excluding: vector)
                lastRank = last
                buffered = rows
                if buffered.isEmpty {
                    do { try await Task.sleep(for: interval) } catch { return nil }
                }
            }
            return buffered.removeFirst()
        }
    }
}

extension SQLiteStore {
    /// Change sets recorded after `rank` that `vector` does not cover, and the last rank read.
    func changeSets(afterRank rank: Int64, excluding vector: VersionVector, limit: Int = 500) throws -> ([ChangeSet], Int64) {
        let model = self.model
        let versionHash = modelVersionHash
        return try read { db in
            var result: [ChangeSet] = []
            var last = rank
            for row in try Row.fetchAll(db.cachedStatement(sql: "SELECT Z_RANK, Z_ORIGIN, Z_SEQ, Z_BODY FROM Z_FERRY_CHANGESET WHERE Z_RANK > ? ORDER BY Z_RANK LIMIT ?"),
                                        arguments: [rank, limit]) {
                last = row[0]
                guard let text: String = row[1], let origin = UUID(uuidString: text) else { continue }
                let sequence: Int64 = row[2]
                if sequence <= vector[origin, default: 0] { continue }
                if case .changeSet(let changeSet)? = try? ChangeSetCodec.decode(row[3], model: model, versionHash: versionHash) { result.append(changeSet) }
            }
            return (result, last)
        }
    }
}
