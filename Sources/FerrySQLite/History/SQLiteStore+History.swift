import Foundation
import GRDB
import FerryModel
import FerryStore

/// Where a store stands: its UUID, its model, and what it has taken in.
public struct HistoryState: Sendable, Hashable {
    /// The store's UUID.
    public var store: UUID
    /// The version hash of the store's model.
    public var modelHash: String
    /// For each origin, the highest sequence number taken in.
    public var vector: VersionVector

    /// `{"model":…,"store":…,"vector":{…}}`, the form `ferry state` prints.
    public var json: String {
        JSONValue.sortedObject([
            "store": .string(store.uuidString),
            "model": .string(modelHash),
            "vector": .sortedObject(Dictionary(uniqueKeysWithValues: vector.map { ($0.key.uuidString, JSONValue.integer($0.value)) })),
        ]).text
    }
}

extension SQLiteStore {
    /// The store's UUID, model hash and version vector.
    public func historyState() throws -> HistoryState {
        let store = identifier
        let vector = try read { db in try HistoryLog(db: db, store: store).vector() }
        return HistoryState(store: identifier, modelHash: model.versionHash, vector: vector)
    }

    /// The change sets not covered by `vector`, as canonical JSON lines, in
    /// the order this store took them in (which can be applied as is).
    public func changeSetLines(after vector: VersionVector = [:], limit: Int? = nil) throws -> [String] {
        let store = identifier
        return try read { db in try HistoryLog(db: db, store: store).bodies(after: vector, limit: limit) }
    }

    /// The change sets not covered by `vector`, decoded.
    public func changeSets(after vector: VersionVector = [:], limit: Int? = nil) throws -> [ChangeSet] {
        try changeSetLines(after: vector, limit: limit).compactMap { line in
            if case .changeSet(let changeSet) = try ChangeSetCodec.decode(line, model: model) { return changeSet }
            return nil
        }
    }
}
