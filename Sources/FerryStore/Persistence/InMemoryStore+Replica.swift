import Foundation
import FerryModel

/// What replication needs of the in-memory store: the same ``ReplicaStore`` as
/// `SQLiteStore`, kept in ``InMemoryHistory``.
extension InMemoryStore: ReplicaStore {
    // MARK: History

    public func historyState() throws -> HistoryState {
        HistoryState(store: identifier, modelHash: modelVersionHash, vector: state.withLock { $0.history.vector })
    }

    public func originKeys() throws -> [OriginKey] {
        state.withLock { state in
            state.history.keys.sorted { ($0.origin.uuidString, $0.firstSequence) < ($1.origin.uuidString, $1.firstSequence) }
        }
    }

    public func recordOriginKey(_ key: OriginKey) throws {
        state.withLock { state in
            state.history.keys.removeAll { $0.origin == key.origin && $0.publicKey == key.publicKey }
            state.history.keys.append(key)
        }
    }

    public func changeSetLines(after vector: VersionVector, limit: Int?) throws -> [String] {
        try state.withLock { state throws(HistoryError) in try state.history.bodies(after: vector, limit: limit).lines }
    }

    public func changeSetPage(after vector: VersionVector, cursor: Int64, limit: Int, maximumBytes: Int?) throws -> ChangeSetPage {
        try state.withLock { state throws(HistoryError) in
            try state.history.page(after: vector, cursor: cursor, limit: limit, maximumBytes: maximumBytes)
        }
    }

    public func purgeHistory(_ policy: PurgePolicy) throws -> PurgeReport {
        let report = state.withLock { $0.history.purge(policy) }
        signalCommit()
        return report
    }

    public func historySize() throws -> HistorySize {
        state.withLock { $0.history.size() }
    }

    public func removeOrigin(_ origin: UUID) throws -> Int {
        guard origin != identifier else { throw HistoryError.ownOrigin(origin) }
        let removed = state.withLock { $0.history.removeOrigin(origin) }
        signalCommit()
        return removed
    }

    /// An in-memory store keeps no file to copy: it makes no snapshot.
    public func writeSnapshot() throws -> SnapshotFile {
        throw StoreError.storeFailure("an in-memory store makes no snapshot: start a new store from a SQLite store's snapshot, or replay its history")
    }

    /// A signal after each write to the store (saves, received change sets, held ones, purges).
    public func commits() -> AsyncStream<Void> {
        let (stream, continuation) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let key = UUID()
        commitSignals.withLock { $0[key] = continuation }
        continuation.onTermination = { [weak self] _ in
            _ = self?.commitSignals.withLock { $0.removeValue(forKey: key) }
        }
        return stream
    }

    public func lastChangeSetRank() throws -> Int64 {
        state.withLock { $0.history.records.last?.rank ?? 0 }
    }

    public func appliedChangeSets(afterRank rank: Int64, limit: Int, maximumBytes: Int?) throws -> (changeSets: [ChangeSet], lastRank: Int64) {
        let (records, model, hash) = state.withLock { state in
            var budget = ReadBudget(maximum: maximumBytes)
            var records: [InMemoryHistory.Record] = []
            for record in state.history.records where record.rank > rank {
                guard records.count < limit, record.quarantineReason != nil || budget.admits(record.body.utf8.count) else { break }
                records.append(record)
            }
            return (records, state.history.model, state.history.modelHash)
        }
        var changeSets: [ChangeSet] = []
        for record in records where record.quarantineReason == nil {
            if case .changeSet(let changeSet)? = try? ChangeSetCodec.decode(record.body, model: model, versionHash: hash) {
                changeSets.append(changeSet)
            }
        }
        return (changeSets, records.last?.rank ?? rank)
    }

    func signalCommit() {
        for continuation in commitSignals.withLock({ Array($0.values) }) { continuation.yield() }
    }

    // MARK: Received change sets that wait or were refused

    public func hold(_ changeSet: HeldChangeSet) throws {
        state.withLock { $0.history.held[.init(origin: changeSet.origin.uuidString, sequence: changeSet.sequence)] = changeSet }
        signalCommit()
    }

    public func heldChangeSets() throws -> [HeldChangeSet] {
        state.withLock { $0.history.heldInOrder }
    }

    public func release(origin: UUID, sequence: Int64) throws {
        state.withLock { _ = $0.history.held.removeValue(forKey: .init(origin: origin.uuidString, sequence: sequence)) }
        signalCommit()
    }

    public func backlog() throws -> Backlog {
        state.withLock { state in
            Backlog(waiting: state.history.held.count, quarantined: state.history.records.count { $0.quarantineReason != nil },
                    leftInvalid: state.history.records.count { $0.leftInvalid != nil },
                    waitingForModel: state.history.held.values.count { $0.reason.hasPrefix(Backlog.modelReasonPrefix) })
        }
    }

    public func replayStart() throws -> ReplayStart {
        state.withLock {
            ReplayStart(vector: $0.history.vector, held: $0.history.heldInOrder, horizon: $0.history.horizon, horizonTime: $0.history.horizonTime)
        }
    }

    public func quarantinedChangeSets() throws -> [HeldChangeSet] {
        state.withLock { state in
            state.history.records.compactMap { record in
                record.quarantineReason.map { HeldChangeSet(origin: record.origin, sequence: record.sequence, reason: $0, body: record.body) }
            }
        }
    }

    public func changeSetsLeftInvalid() throws -> [HeldChangeSet] {
        state.withLock { state in
            state.history.records.compactMap { record in
                record.leftInvalid.map { HeldChangeSet(origin: record.origin, sequence: record.sequence, reason: $0, body: record.body) }
            }
        }
    }

    public func saveReplay(_ request: SaveRequest, recording replay: ReplayAnnotation) throws -> SaveResult {
        try write(request, replay: replay)
    }

    public func recordReceived(_ changeSet: ChangeSet, body: String, as record: ReceivedRecord) throws {
        state.withLock { $0.history.recordReceived(changeSet, body: body, as: record) }
        signalCommit()
    }

    // MARK: Merge metadata

    public func localObjectID(forOriginURI uri: String) throws -> ObjectID? {
        let uri = try aliases(of: [uri])[uri] ?? uri
        let found = try lookUp(originURIs: [uri])
        if let mapped = found.mapped[uri] {
            // As in the SQLite store: an object from elsewhere whose row is gone (deleted here) has none.
            return try rows(for: [mapped])[mapped] != nil ? mapped : nil
        }
        return found.own[uri]
    }

    public func ownObjectID(forURI uri: String) -> ObjectID? {
        guard case .success(let parts) = ObjectURIComponents.parse(uri), parts.store == identifier,
              model.entity(named: parts.entityName) != nil, let key = parts.primaryKey else { return nil }
        return .permanent(entityName: parts.entityName, store: identifier, primaryKey: key)
    }

    public func lookUp(originURIs uris: [String]) throws -> OriginLookup {
        state.withLock { state in
            var found = OriginLookup()
            for uri in uris {
                if state.history.aliases[uri] != nil { found.aliased.insert(uri) }
                if state.history.tombstones[uri] != nil { found.buried.insert(uri) }
                if let row = state.history.rowsByOrigin[uri] {
                    found.mapped[uri] = row
                } else if !found.buried.contains(uri), let id = ownObjectID(forURI: uri), state.history.originsByRow[id] == nil {
                    found.own[uri] = id  // a row born here (not one renamed for an object from elsewhere)
                }
            }
            return found
        }
    }

    public func isBuried(_ uri: String) throws -> Bool {
        state.withLock { $0.history.tombstones[uri] != nil }
    }

    public func tombstone(of uri: String) throws -> Tombstone? {
        state.withLock { $0.history.tombstones[uri] }
    }

    public func tombstones(referringTo uri: String) throws -> [String: Tombstone] {
        state.withLock { $0.history.tombstones.filter { $0.value.names(uri) } }
    }

    public func lastWrite(of id: ObjectID, property: String) throws -> WriteStamp? {
        state.withLock { $0.history.clocks[id]?[property] }
    }

    public func positions(of id: ObjectID, relationship: String) throws -> [String: String] {
        state.withLock { $0.history.positions[id]?[relationship] ?? [:] }
    }

    public func aliases(of uris: [String]) throws -> [String: String] {
        state.withLock { $0.history.survivors(of: uris) }
    }

    public func restores(of uris: [String]) throws -> [String: Set<ChangeSetMark>] {
        state.withLock { history in
            var found: [String: Set<ChangeSetMark>] = [:]
            for uri in uris { if let marks = history.history.restores[uri] { found[uri] = marks } }
            return found
        }
    }

    public func carriedValues(of uri: String) throws -> [String: CarriedValue] {
        state.withLock { $0.history.carried[uri] ?? [:] }
    }

    public func writes(of property: String) throws -> [ObjectID: WriteStamp] {
        state.withLock { $0.history.clocks.compactMapValues { $0[property] } }
    }

    public func lastWrites(of id: ObjectID) throws -> [String: WriteStamp] {
        state.withLock { $0.history.clocks[id] ?? [:] }
    }

    public func originURI(of id: ObjectID) throws -> String {
        state.withLock { $0.history.uri(of: id) }
    }

    /// The origin URI of each row named by another URI than its own (objects born elsewhere, or brought back).
    public func originURIs() throws -> [ObjectID: String] {
        state.withLock { $0.history.originsByRow }
    }
}
