import Foundation
import Synchronization
import FerryModel

/// A store that keeps everything in memory, for tests and caches.
///
/// It follows the same rules as the SQLite store (primary keys per root
/// entity, optimistic locking, delete semantics, predicate semantics), so a
/// test written against it means the same against SQLite. It is a
/// ``ReplicaStore`` too: it records each save as a change set and replays
/// change sets from other stores as `SQLiteStore` does (the convergence tests
/// run on both). Its state lives in a `Mutex`, so contexts on different tasks can share it.
public final class InMemoryStore: PersistentStore {
    public let identifier: UUID
    public let model: ManagedObjectModel
    /// The model's version hash, worked out once.
    public let modelVersionHash: String
    let state: Mutex<State>
    /// The streams ``commits()`` handed out, signalled after each write.
    let commitSignals = Mutex<[UUID: AsyncStream<Void>.Continuation]>([:])

    struct State: Sendable {
        var history: InMemoryHistory
        var rows: [ObjectID: RowSnapshot] = [:]
        var maxPrimaryKey: [String: Int64] = [:]
        /// Join-table rows: (canonical side, other side) pairs per join table.
        var joins: [JoinTableKey: Set<JoinPair>] = [:]
        /// Member order of ordered to-many relationships, by owner and relationship name.
        var order: [ObjectID: [String: [ObjectID]]] = [:]
    }

    struct JoinPair: Hashable, Sendable {
        var canonical: ObjectID
        var other: ObjectID
    }

    /// The earlier versions of its model it was migrated from (``migrated(to:)``): change sets made with them are read translated.
    public let earlierModels: [ManagedObjectModel]

    /// Creates an empty store for `model`, signing the change sets it records with `signingKey` when given.
    public init(model: ManagedObjectModel, identifier: UUID = UUID(), signingKey: (any ChangeSetSigner)? = nil) {
        self.model = model
        self.identifier = identifier
        let hash = model.versionHash
        self.modelVersionHash = hash
        self.earlierModels = []
        var history = InMemoryHistory(store: identifier, model: model, modelHash: hash)
        if let signingKey {
            history.signer = signingKey
            history.keys = [OriginKey(origin: identifier, publicKey: signingKey.publicKey, firstSequence: 1, source: .own)]
        }
        self.state = Mutex(State(history: history))
    }

    /// A store holding `state`, made by a migration.
    init(model: ManagedObjectModel, identifier: UUID, earlierModels: [ManagedObjectModel], state: State) {
        self.model = model
        self.identifier = identifier
        self.modelVersionHash = model.versionHash
        self.earlierModels = earlierModels
        self.state = Mutex(state)
    }

    // MARK: - Reading

    public func fetchRows(_ request: FetchRequest) throws -> [RowSnapshot] {
        _ = try request.validated(in: model)
        return try state.withLock { state in
            let matching = try state.rows.values.filter { row in
                guard isFetched(row.objectID.entityName, by: request) else { return false }
                guard let predicate = request.predicate else { return true }
                return try PredicateEvaluator().evaluate(predicate, on: RowSubject(store: self, state: state, row: row))
            }
            let sorted = try sort(matching, by: request.sortDescriptors, in: state)
            let start = min(request.fetchOffset, sorted.count)
            let window = sorted[start...]
            return Array(request.fetchLimit > 0 ? window.prefix(request.fetchLimit) : window)
        }
    }

    public func fetchObjectIDs(_ request: FetchRequest) throws -> [ObjectID] {
        try fetchRows(request).map(\.objectID)
    }

    public func count(_ request: FetchRequest) throws -> Int {
        try fetchRows(request).count
    }

    public func rows(for ids: [ObjectID]) throws -> [ObjectID: RowSnapshot] {
        state.withLock { state in
            var result: [ObjectID: RowSnapshot] = [:]
            for id in ids { result[id] = state.rows[id] }
            return result
        }
    }

    public func relatedObjectIDs(of id: ObjectID, relationship name: String) throws -> [ObjectID] {
        guard let entity = model.entity(named: id.entityName), entity.relationship(named: name) != nil else {
            throw QueryError.unknownKey(entity: id.entityName, key: name, keyPath: name)
        }
        return state.withLock { state in members(of: id, relationship: name, in: state) }
    }

    /// The destinations of a relationship of a row, in order for ordered relationships.
    func members(of id: ObjectID, relationship name: String, in state: State) -> [ObjectID] {
        guard let entity = model.entity(named: id.entityName), let relationship = entity.relationship(named: name) else { return [] }
        var members: [ObjectID]
        switch model.storage(of: relationship, in: entity) {
        case .foreignKey:
            guard let index = entity.propertyIndex(named: name), let target = state.rows[id]?.toOne[index] else { return [] }
            return [target]
        case .inverseOfForeignKey(let inverse):
            members = state.rows.values.filter { row in
                guard let rowEntity = model.entity(named: row.objectID.entityName),
                      rowEntity.isKind(of: relationship.destinationEntityName),
                      let index = rowEntity.propertyIndex(named: inverse.name) else { return false }
                return row.toOne[index] == id
            }.map(\.objectID)
        case .joinTable(let key, let sourceIsCanonical):
            let pairs = state.joins[key] ?? []
            members = sourceIsCanonical
                ? pairs.filter { $0.canonical == id }.map(\.other)
                : pairs.filter { $0.other == id }.map(\.canonical)
        }
        members = members.filter { state.rows[$0] != nil }
        if relationship.isOrdered, let order = state.order[id]?[name] {
            let position = Dictionary(order.enumerated().map { ($1, $0) }, uniquingKeysWith: { a, _ in a })
            return members.sorted { (position[$0] ?? Int.max, $0.primaryKey ?? 0) < (position[$1] ?? Int.max, $1.primaryKey ?? 0) }
        }
        return members.sorted { ($0.primaryKey ?? 0) < ($1.primaryKey ?? 0) }
    }

    // MARK: - Writing

    public func save(_ request: SaveRequest) throws -> SaveResult {
        try write(request, replay: nil)
    }

    /// Writes `request`, recording it as a local save or, with `replay`, as that replay
    /// (``ReplayWriter/saveReplay(_:recording:)``).
    func write(_ request: SaveRequest, replay: ReplayAnnotation?) throws -> SaveResult {
        let result = try state.withLock { state in
            var conflicts: [String] = []
            for update in request.updates where state.rows[update.objectID]?.version != update.expectedVersion {
                conflicts.append(update.objectID.uriString)
            }
            for delete in request.deletes where state.rows[delete.objectID]?.version != delete.expectedVersion {
                conflicts.append(delete.objectID.uriString)
            }
            guard conflicts.isEmpty else { throw SaveError.conflict(objectURIs: conflicts) }

            var next = state
            var permanent: [ObjectID: ObjectID] = [:]
            var insertedIDs: [ObjectID] = []
            var updatedVersions: [Int64] = []
            for insert in request.inserts {
                guard let entity = model.entity(named: insert.objectID.entityName) else {
                    throw SaveError.storeFailed("unknown entity \(insert.objectID.entityName)")
                }
                let key = (next.maxPrimaryKey[entity.rootName] ?? 0) + 1
                next.maxPrimaryKey[entity.rootName] = key
                let id = ObjectID.permanent(entityName: entity.name, store: identifier, primaryKey: key)
                permanent[insert.objectID] = id
                insertedIDs.append(id)
            }
            func resolve(_ id: ObjectID?) -> ObjectID? {
                guard let id else { return nil }
                if id.isTemporaryID { return permanent[id] }
                return id
            }
            for insert in request.inserts {
                guard let id = permanent[insert.objectID] else { continue }
                next.rows[id] = RowSnapshot(objectID: id, version: 1, attributes: insert.attributes, toOne: insert.toOne.map(resolve))
            }
            for update in request.updates {
                guard var row = next.rows[update.objectID] else { continue }
                for (index, value) in update.attributes { row.attributes[index] = value }
                for (index, target) in update.toOne { row.toOne[index] = resolve(target) }
                row.version += 1
                next.rows[update.objectID] = row
                updatedVersions.append(row.version)
            }
            for change in request.toManyChanges {
                guard let source = resolve(change.source), let entity = model.entity(named: source.entityName),
                      let relationship = entity.relationship(named: change.relationship) else { continue }
                if case .joinTable(let key, let sourceIsCanonical) = model.storage(of: relationship, in: entity) {
                    for target in change.added.compactMap(resolve) {
                        let pair = sourceIsCanonical ? JoinPair(canonical: source, other: target) : JoinPair(canonical: target, other: source)
                        next.joins[key, default: []].insert(pair)
                    }
                    for target in change.removed.compactMap(resolve) {
                        let pair = sourceIsCanonical ? JoinPair(canonical: source, other: target) : JoinPair(canonical: target, other: source)
                        next.joins[key]?.remove(pair)
                    }
                }
                if let ordered = change.orderedMembers {
                    next.order[source, default: [:]][change.relationship] = ordered.compactMap(resolve)
                }
            }
            var deleted: [ObjectID: RowSnapshot] = [:]
            var deletedMemberships: [ObjectID: [String: [ObjectID]]] = [:]
            for delete in request.deletes {
                deleted[delete.objectID] = next.rows[delete.objectID]
                // As they were before the save (a delete's Nullify rule removes them in it).
                if let entity = model.entity(named: delete.objectID.entityName) {
                    for relationship in model.tombstoneMemberships(of: entity) {
                        let members = self.members(of: delete.objectID, relationship: relationship.name, in: state)
                        if !members.isEmpty { deletedMemberships[delete.objectID, default: [:]][relationship.name] = members }
                    }
                }
                next.rows[delete.objectID] = nil
                next.order[delete.objectID] = nil
                for key in next.joins.keys {
                    next.joins[key] = next.joins[key]?.filter { $0.canonical != delete.objectID && $0.other != delete.objectID }
                }
            }
            let rowsAfter = next.rows
            let after = next
            let sequenceBefore = next.history.vector[identifier, default: 0]
            next.history.record(request, replay: replay, insertedIDs: insertedIDs, resolve: resolve, deleted: deleted,
                                deletedMemberships: deletedMemberships, rows: { rowsAfter[$0] },
                                members: { self.members(of: $0, relationship: $1, in: after) })
            let sequenceAfter = next.history.vector[identifier, default: 0]
            state = next
            let recorded = replay == nil && sequenceAfter > sequenceBefore ? sequenceAfter : nil
            return SaveResult(permanentIDs: insertedIDs, updatedVersions: updatedVersions, recordedSequence: recorded)
        }
        signalCommit()
        return result
    }

    // MARK: - Helpers

    private func isFetched(_ entityName: String, by request: FetchRequest) -> Bool {
        if entityName == request.entityName { return true }
        guard request.includesSubentities, let entity = model.entity(named: entityName) else { return false }
        return entity.isKind(of: request.entityName)
    }

    private func value(at keyPath: String, of row: RowSnapshot, in state: State) throws -> KeyPathValue {
        guard let entity = model.entity(named: row.objectID.entityName) else { return .null }
        let path = try ResolvedKeyPath.resolve(keyPath, from: entity, in: model)
        guard let current = follow(path.hops, from: row, in: state), let currentEntity = model.entity(named: current.objectID.entityName),
              let index = currentEntity.propertyIndex(named: path.final.name) else { return .null }
        switch path.final {
        case .attribute: return current.attributes[index].map(KeyPathValue.attribute) ?? .null
        case .relationship: return current.toOne[index].map(KeyPathValue.object) ?? .null
        }
    }

    /// The row reached by following to-one `hops`, nil at an empty or dangling link.
    private func follow(_ hops: [RelationshipDescription], from row: RowSnapshot, in state: State) -> RowSnapshot? {
        var current = row
        for hop in hops {
            guard let entity = model.entity(named: current.objectID.entityName),
                  let index = entity.propertyIndex(named: hop.name),
                  let target = current.toOne[index], let next = state.rows[target] else { return nil }
            current = next
        }
        return current
    }

    private func sort(_ rows: [RowSnapshot], by descriptors: [FetchSortDescriptor], in state: State) throws -> [RowSnapshot] {
        let keyed = try rows.map { row in (row, try descriptors.map { try value(at: $0.keyPath, of: row, in: state) }) }
        return keyed.sorted { lhs, rhs in
            PredicateEvaluator.precedes(lhs.1, rhs.1, by: descriptors) ?? ((lhs.0.objectID.primaryKey ?? 0) < (rhs.0.objectID.primaryKey ?? 0))
        }.map(\.0)
    }

    /// A row as predicates see it.
    private struct RowSubject: PredicateSubject {
        let store: InMemoryStore
        let state: State
        let row: RowSnapshot

        var objectID: ObjectID { row.objectID }

        func value(at keyPath: String) throws -> KeyPathValue {
            try store.value(at: keyPath, of: row, in: state)
        }

        func members(at keyPath: String) throws -> [RowSubject] {
            let model = store.model
            guard let entity = model.entity(named: row.objectID.entityName) else { return [] }
            let path = try ToManyKeyPath.resolve(keyPath, from: entity, in: model)
            guard let owner = store.follow(path.hops, from: row, in: state) else { return [] }
            return store.members(of: owner.objectID, relationship: path.relationship.name, in: state)
                .compactMap { state.rows[$0] }
                .map { RowSubject(store: store, state: state, row: $0) }
        }
    }
}
