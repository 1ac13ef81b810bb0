import Foundation
import GRDB
import FerryStore

extension SQLiteStore {
    /// Drops what `policy` allows (see ``PurgePolicy``): the change sets every listed peer has
    /// taken in (each vector says what one peer has) and that are old enough, then the tombstones
    /// past the horizon. A peer later asking for purged change sets gets
    /// ``HistoryError/purged(origin:needed:purgedThrough:)``; a change set that does not know
    /// everything made before the horizon is refused (``HistoryError/pastHorizon(origin:needed:horizon:)``).
    @discardableResult
    public func purgeHistory(_ policy: PurgePolicy) throws -> PurgeReport {
        var report = PurgeReport()
        let store = identifier
        try write { db in report = try HistoryLog(db: db, store: store).purge(policy) }
        return report
    }

    /// How much history the store keeps (change sets, their bytes, tombstones, what was purged).
    public func historySize() throws -> HistorySize {
        let store = identifier
        return try read { db in try HistoryLog(db: db, store: store).size() }
    }

    /// The change sets not covered by `vector`, then every new one as it is
    /// recorded — by this process or by any other process writing the same file
    /// (woken by ``commits()``, not by polling). Ends when the task is cancelled.
    ///
    /// ```swift
    /// for try await changeSet in store.changeSetUpdates(after: peerVector) { push(changeSet) }
    /// ```
    public func changeSetUpdates(after vector: VersionVector = [:]) -> ChangeSetUpdates {
        ChangeSetUpdates(store: self, vector: vector)
    }
}

/// An `AsyncSequence` of a store's change sets: those after a version vector,
/// then each new one as it is recorded (see ``SQLiteStore/changeSetUpdates(after:)``).
public struct ChangeSetUpdates: AsyncSequence, Sendable {
    public typealias Element = ChangeSet

    let store: SQLiteStore
    let vector: VersionVector

    public func makeAsyncIterator() -> Iterator {
        Iterator(store: store, vector: vector)
    }

    /// Reads the history in rank order, waiting for the store's next commit when it has caught up.
    public struct Iterator: AsyncIteratorProtocol {
        let store: SQLiteStore
        var vector: VersionVector
        var lastRank: Int64 = 0
        var buffered: [ChangeSet] = []
        /// Subscribed before the first read, so that no commit falls between a read and the wait.
        var commits: AsyncStream<Void>.AsyncIterator

        init(store: SQLiteStore, vector: VersionVector) {
            self.store = store
            self.vector = vector
            self.commits = store.commits().makeAsyncIterator()
        }

        public mutating func next() async throws -> ChangeSet? {
            while buffered.isEmpty {
                if Task.isCancelled { return nil }
                let (rows, last) = try store.changeSets(afterRank: lastRank, excluding: vector)
                lastRank = last
                buffered = rows
                if buffered.isEmpty {
                    guard await commits.next() != nil, !Task.isCancelled else { return nil }
                }
            }
            return buffered.removeFirst()
        }
    }
}

extension SQLiteStore {
    public func lastChangeSetRank() throws -> Int64 {
        try read { db in try Int64.fetchOne(db, sql: "SELECT MAX(Z_RANK) FROM Z_FERRY_CHANGESET") ?? 0 }
    }

    public func appliedChangeSets(afterRank rank: Int64, limit: Int, maximumBytes: Int?) throws -> (changeSets: [ChangeSet], lastRank: Int64) {
        try read { db in
            var result: [ChangeSet] = []
            var last = rank
            var budget = ReadBudget(maximum: maximumBytes)
            let statement = try db.cachedStatement(sql: "SELECT Z_RANK, Z_STATUS, Z_BODY FROM Z_FERRY_CHANGESET WHERE Z_RANK > ? ORDER BY Z_RANK LIMIT ?")
            let rows = try Row.fetchCursor(statement, arguments: [rank, limit])
            while let row = try rows.next() {
                let applied = row[1] as Int == HistorySchema.applied
                // (A compressed body records its length: one past the bound is not inflated.)
                if applied, try !budget.admits(try StoredBody.length(row[2])) { break }
                last = row[0]
                guard applied else { continue }
                if let changeSet = changeSetInKnownVersion(try StoredBody.text(row[2])) { result.append(changeSet) }
            }
            return (result, last)
        }
    }

    /// Change sets recorded after `rank` that `vector` does not cover, and the last rank read.
    func changeSets(afterRank rank: Int64, excluding vector: VersionVector, limit: Int = 500) throws -> ([ChangeSet], Int64) {
        return try read { db in
            var result: [ChangeSet] = []
            var last = rank
            for row in try Row.fetchAll(
                db.cachedStatement(sql: "SELECT Z_RANK, Z_ORIGIN, Z_SEQ, Z_BODY FROM Z_FERRY_CHANGESET WHERE Z_RANK > ? ORDER BY Z_RANK LIMIT ?"),
                arguments: [rank, limit]) {
                last = row[0]
                guard let text: String = row[1], let origin = UUID(parsing: text) else { continue }
                let sequence: Int64 = row[2]
                if sequence <= vector[origin, default: 0] { continue }
                if let changeSet = changeSetInKnownVersion(try StoredBody.text(row[3])) {
                    result.append(changeSet)
                }
            }
            return (result, last)
        }
    }
}
