import Foundation
import FerryModel

/// The history and merge metadata of an ``InMemoryStore``: its change sets, version
/// vector, held change sets, last-write clocks, tombstones and origin URIs, with the
/// recording of each save. The same things `SQLiteStore` keeps in its `Z_FERRY_*`
/// tables, recorded the same way: merge decisions come with a replaying save
/// (``ReplayAnnotation``), and the split between the replayed change set and what the
/// save did beyond it is ``ReplayRecording``'s, shared by both stores.
struct InMemoryHistory: Sendable {
    /// One change set taken in, in order.
    struct Record: Sendable {
        var rank: Int64
        var origin: UUID
        var sequence: Int64
        var timestamp: HybridTimestamp
        var body: String
        var quarantineReason: String?
        /// For a change set applied although it left the store invalid: what broke.
        var leftInvalid: String?
    }

    struct HeldKey: Hashable, Comparable, Sendable {
        var origin: String
        var sequence: Int64
        static func < (lhs: HeldKey, rhs: HeldKey) -> Bool { (lhs.origin, lhs.sequence) < (rhs.origin, rhs.sequence) }
    }

    let store: UUID
    let model: ManagedObjectModel
    let modelHash: String
    private(set) var lastTimestamp = HybridTimestamp(rawValue: 0)
    private(set) var records: [Record] = []
    private var nextRank: Int64 = 1
    private(set) var vector: VersionVector = [:]
    private var purged: VersionVector = [:]
    /// Per origin, the last change set made before the tombstone horizon (see ``purge(_:)``), and the horizon.
    private(set) var horizon: VersionVector = [:]
    private(set) var horizonTime: HybridTimestamp?
    /// Per origin, the last change set purged and its clock.
    private var purgeMarks: [UUID: (sequence: Int64, timestamp: HybridTimestamp)] = [:]
    var held: [HeldKey: HeldChangeSet] = [:]
    /// The held change sets in origin and sequence order.
    var heldInOrder: [HeldChangeSet] { held.sorted { $0.key < $1.key }.map(\.value) }
    private(set) var clocks: [ObjectID: [String: WriteStamp]] = [:]
    private(set) var tombstones: [String: Tombstone] = [:]
    /// Origin URIs of merged duplicates → the survivor's origin URI (kept pointing at the last survivor).
    private(set) var aliases: [String: String] = [:]
    /// When each alias was made (the merge's clock), for the horizon.
    private var aliasTimes: [String: HybridTimestamp] = [:]
    /// Values merged duplicates carried to survivors lacking the attribute: survivor origin URI → attribute → value.
    private(set) var carried: [String: [String: CarriedValue]] = [:]
    /// Objects restored after a delete (origin URI) → the change sets that restored them.
    private(set) var restores: [String: Set<ChangeSetMark>] = [:]
    /// Position keys of members of ordered relationships: row → relationship → member origin URI → key.
    private(set) var positions: [ObjectID: [String: [String: String]]] = [:]
    /// Rows named by another URI than their own: objects born elsewhere, or brought back.
    private(set) var rowsByOrigin: [String: ObjectID] = [:]
    private(set) var originsByRow: [ObjectID: String] = [:]

    /// The key the store signs its change sets with; nil: unsigned.
    var signer: (any ChangeSetSigner)?
    /// The keys the store holds (its own and other origins').
    var keys: [OriginKey] = []

    init(store: UUID, model: ManagedObjectModel, modelHash: String) {
        self.store = store
        self.model = model
        self.modelHash = modelHash
    }

    // MARK: - Reading

    /// One page of the change sets `vector` does not cover, after rank `cursor` (every line held whole).
    func page(after vector: VersionVector, cursor: Int64, limit: Int?, maximumBytes: Int?) throws(HistoryError) -> ChangeSetPage {
        let (lines, last) = try bodies(after: vector, cursor: cursor, limit: limit, maximumBytes: maximumBytes)
        return ChangeSetPage(lines: lines.map(ChangeSetPage.Line.init), cursor: last)
    }

    /// The bodies of the change sets `vector` does not cover, after rank `cursor`, and the rank of the last.
    func bodies(after vector: VersionVector, cursor: Int64 = 0, limit: Int?,
                maximumBytes: Int? = nil) throws(HistoryError) -> (lines: [String], cursor: Int64) {
        for (origin, through) in purged where vector[origin, default: 0] < through {
            throw HistoryError.purged(origin: origin, needed: vector[origin, default: 0] + 1, purgedThrough: through)
        }
        var lines: [String] = []
        var last = cursor
        var budget = ReadBudget(maximum: maximumBytes)
        for record in records where record.rank > cursor && record.sequence > vector[record.origin, default: 0] {
            guard budget.admits(record.body.utf8.count + 1) else { break }
            lines.append(record.body)
            last = record.rank
            if let limit, lines.count >= limit { break }
        }
        return (lines, last)
    }

    /// The origin URI of a row: its own URI unless it was named otherwise.
    func uri(of id: ObjectID) -> String {
        originsByRow[id] ?? id.uriString
    }

    // MARK: - Change sets

    mutating func tick(now: Date = Date()) -> HybridTimestamp {
        lastTimestamp = HybridTimestamp.next(after: lastTimestamp, now: now)
        return lastTimestamp
    }

    mutating func receive(_ timestamp: HybridTimestamp) {
        lastTimestamp = HybridTimestamp.taking(in: timestamp, after: lastTimestamp)
    }

    /// Records a change set taken in (or, for a retry, updates the record it has).
    mutating func record(origin: UUID, sequence: Int64, timestamp: HybridTimestamp, body: String, quarantineReason: String?, retry: Bool) {
        if retry, let index = records.firstIndex(where: { $0.origin == origin && $0.sequence == sequence }) {
            records[index].quarantineReason = quarantineReason
            return
        }
        records.append(Record(rank: nextRank, origin: origin, sequence: sequence, timestamp: timestamp, body: body, quarantineReason: quarantineReason))
        nextRank += 1
        vector[origin] = max(vector[origin, default: 0], sequence)
    }

    /// Drops what `policy` allows, as `SQLiteStore.purgeHistory(_:)` does.
    mutating func purge(_ policy: PurgePolicy) -> PurgeReport {
        var report = PurgeReport()
        // Per origin, tombstones of its deletes made before this clock go (as in the SQLite store).
        var forgetBefore: [UUID: HybridTimestamp] = [:]
        if let cutoff = policy.tombstonesMadeBefore {
            for origin in vector.keys {
                let stored = records.filter { $0.origin == origin && $0.timestamp < cutoff }.map(\.sequence).max() ?? 0
                let purgedBefore = purgeMarks[origin].map { $0.timestamp < cutoff ? $0.sequence : 0 } ?? 0
                let beforeHorizon = max(stored, purgedBefore)
                let needed = min(beforeHorizon, policy.knownToPeers.map { $0[origin, default: 0] }.min() ?? beforeHorizon)
                if needed == beforeHorizon {
                    forgetBefore[origin] = cutoff
                } else {
                    let clock = records.first { $0.origin == origin && $0.sequence == needed }?.timestamp
                        ?? purgeMarks[origin].flatMap { $0.sequence == needed ? $0.timestamp : nil }
                    forgetBefore[origin] = clock.map { HybridTimestamp(rawValue: $0.rawValue + 1) } ?? HybridTimestamp(rawValue: 0)
                }
                if needed > 0 { horizon[origin] = max(horizon[origin, default: 0], needed) }
            }
            horizonTime = max(horizonTime ?? cutoff, cutoff)
        }
        if !policy.acknowledged.isEmpty {
            for (origin, last) in vector {
                var floor = min(last, policy.acknowledged.map { $0[origin, default: 0] }.min() ?? 0)
                if let cutoff = policy.changeSetsMadeBefore,
                   let young = records.filter({ $0.origin == origin && $0.timestamp >= cutoff }).map(\.sequence).min() {
                    floor = min(floor, young - 1)
                }
                guard floor > purged[origin, default: 0] else { continue }
                if let mark = records.first(where: { $0.origin == origin && $0.sequence == floor }) {
                    purgeMarks[origin] = (floor, mark.timestamp)
                }
                let before = records.count
                records.removeAll { $0.origin == origin && $0.sequence <= floor && $0.quarantineReason == nil && $0.leftInvalid == nil }
                report.changeSets += before - records.count
                purged[origin] = floor
            }
        }
        if let cutoff = policy.tombstonesMadeBefore {
            let forgotten = tombstones.filter { $0.value.timestamp < forgetBefore[$0.value.origin, default: HybridTimestamp(rawValue: 0)] }.map(\.key)
            for uri in forgotten {
                tombstones[uri] = nil
                // Its identity-map entry goes with it (as in the SQLite store).
                if let row = rowsByOrigin.removeValue(forKey: uri) { originsByRow[row] = nil }
            }
            report.tombstones = forgotten.count
            let aliasCut = min(cutoff, forgetBefore.values.min() ?? cutoff)
            let old = aliasTimes.filter { $0.value < aliasCut }.map(\.key)
            for uri in old {
                aliases[uri] = nil
                aliasTimes[uri] = nil
            }
            report.aliases = old.count
        }
        return report
    }

    /// How much history the store keeps.
    func size() -> HistorySize {
        HistorySize(changeSets: records.count, bytes: records.reduce(0) { $0 + Int64($1.body.utf8.count) }, tombstones: tombstones.count,
                    purgedThrough: Dictionary(uniqueKeysWithValues: purged.map { ($0.key.uuidString, $0.value) }), horizon: horizonTime)
    }

    /// Forgets every change set of `origin`, its vector entry and its held change sets.
    mutating func removeOrigin(_ origin: UUID) -> Int {
        let before = records.count
        records.removeAll { $0.origin == origin }
        vector[origin] = nil
        purged[origin] = nil
        horizon[origin] = nil
        purgeMarks[origin] = nil
        let heldBefore = held.count
        held = held.filter { $0.value.origin != origin }
        return before - records.count + heldBefore - held.count
    }

    // MARK: - Merge metadata

    mutating func setClock(of id: ObjectID, property: String, to stamp: WriteStamp) {
        clocks[id, default: [:]][property] = stamp
    }

    mutating func bury(_ uri: String, entity: String, values: [String: ChangeValue], memberships: [String: [String]] = [:],
                       stamp: WriteStamp, row: ObjectID?) {
        tombstones[uri] = Tombstone(entity: entity, values: values, memberships: memberships, timestamp: stamp.timestamp, origin: stamp.origin)
        if let row {
            clocks[row] = nil
            positions[row] = nil
        }
    }

    mutating func setPositions(of id: ObjectID, _ keys: [String: [String: String]]) {
        for (relationship, members) in keys {
            positions[id, default: [:]][relationship, default: [:]].merge(members) { _, new in new }
        }
    }

    /// Makes `loser` an alias of `survivor` (and every alias of the loser too); the loser's row is gone.
    mutating func alias(_ merge: MergedDuplicate, at timestamp: HybridTimestamp) {
        for (alias, target) in aliases where target == merge.loserURI { aliases[alias] = merge.survivorURI }
        aliases[merge.loserURI] = merge.survivorURI
        aliasTimes[merge.loserURI] = timestamp
        clocks[merge.loser] = nil
        positions[merge.loser] = nil
    }

    /// The survivor each merged URI stands for.
    func survivors(of uris: [String]) -> [String: String] {
        var result: [String: String] = [:]
        for uri in uris { if let survivor = aliases[uri] { result[uri] = survivor } }
        return result
    }

    /// Notes the objects a change set taken in (or made) here restores.
    mutating func noteRestores(of uris: [String], by mark: ChangeSetMark) {
        for uri in uris { restores[uri, default: []].insert(mark) }
    }

    mutating func unbury(_ uri: String) {
        tombstones[uri] = nil
    }

    /// Names `row` by `uri` (an object born elsewhere, or brought back on a new row).
    mutating func map(_ uri: String, to row: ObjectID) {
        if let previous = rowsByOrigin[uri] { originsByRow[previous] = nil }
        rowsByOrigin[uri] = row
        originsByRow[row] = uri
    }

    // MARK: - Recording saves

    /// Records a save whose rows are written: a local save becomes a new change set of
    /// this store; a replaying save records the replayed change set, stamps its writes with
    /// its clock, and records whatever else the save did as a new change set of this store.
    /// `deleted` holds the deleted rows as they were, `deletedMemberships` the memberships their
    /// tombstones keep (as they were before the save); `rows` reads the rows after the save.
    mutating func record(_ request: SaveRequest, replay: ReplayAnnotation?, insertedIDs: [ObjectID], resolve: (ObjectID?) -> ObjectID?,
                         deleted: [ObjectID: RowSnapshot], deletedMemberships: [ObjectID: [String: [ObjectID]]] = [:],
                         rows: (ObjectID) -> RowSnapshot?, members: (ObjectID, String) -> [ObjectID]) {
        guard let replay else {
            appendLocal(changes(of: request, insertedIDs: insertedIDs, resolve: resolve, deleted: deleted, deletedMemberships: deletedMemberships,
                                skipping: [], assignsPositions: true),
                        author: request.author, contextName: request.contextName)
            return
        }
        let incoming = replay.changeSet
        let incomingStamp = incoming.stamp
        var plainInserts = Set<ObjectID>(), resurrected = Set<ObjectID>()
        let inOrder = replay.originURIsInOrder.count == request.inserts.count ? replay.originURIsInOrder : nil
        for (index, id) in insertedIDs.enumerated() {
            let temporaryID = request.inserts[index].objectID
            guard let uri = inOrder?[index] ?? replay.originURIs[temporaryID] else { continue }
            map(uri, to: id)
            if replay.resurrected.contains(temporaryID) {
                unbury(uri)
                resurrected.insert(id)
            } else {
                plainInserts.insert(id)
            }
        }
        receive(incoming.timestamp)
        record(origin: incoming.origin, sequence: incoming.sequence, timestamp: incoming.timestamp, body: replay.body,
               quarantineReason: nil, retry: replay.isRetry)
        noteRestores(of: incoming.restoredURIs, by: ChangeSetMark(origin: incoming.origin, sequence: incoming.sequence))
        if let note = replay.leftInvalidNote, let index = records.lastIndex(where: { $0.origin == incoming.origin && $0.sequence == incoming.sequence }) {
            records[index].leftInvalid = note
        }
        let recording = ReplayRecording(changes(of: request, insertedIDs: insertedIDs, resolve: resolve, deleted: deleted,
                                                deletedMemberships: deletedMemberships, skipping: plainInserts, assignsPositions: false),
                                        replay: replay, resolve: resolve, plainInserts: plainInserts, resurrected: resurrected)
        for (id, properties) in recording.replayedWrites {
            for property in properties { setClock(of: id, property: property, to: incomingStamp) }
        }
        for (temporaryID, keys) in replay.positions {
            if let id = resolve(temporaryID) { setPositions(of: id, keys) }
        }
        for merge in replay.merges {
            alias(merge, at: incoming.timestamp)
            carried[merge.loserURI] = nil
        }
        for (uri, values) in replay.carried { carried[uri, default: [:]].merge(values) { _, new in new } }
        for (id, stamps) in recording.mergeStamps {
            for (property, stamp) in stamps { setClock(of: id, property: property, to: stamp) }
        }
        for entry in recording.replayedDeletes {
            bury(entry.change.uri, entity: entry.change.entity, values: entry.change.values, memberships: entry.change.added,
                 stamp: incomingStamp, row: entry.id)
        }
        var derived = recording.derived
        for id in recording.restored {
            guard let row = rows(id) else { continue }
            var joined: [String: [String]] = [:]
            if let entity = model.entity(named: id.entityName) {
                for relationship in model.joinTableRelationships(of: entity) {
                    let uris = members(id, relationship.name).map(uri(of:))
                    if !uris.isEmpty { joined[relationship.name] = uris.sorted() }
                }
            }
            derived.append(.restore(of: id, uri: uri(of: id), values: values(of: row, keepingNil: true), members: joined))
        }
        for tombstone in replay.tombstonesOnly {
            bury(tombstone.uri, entity: tombstone.entity, values: [:], stamp: incomingStamp, row: nil)
        }
        appendLocal(derived, author: "ferry-replay", contextName: nil, repairDeletes: replay.repairDeletes)
    }

    /// Records a received change set that changed no rows (see ``ReplicaStore/recordReceived(_:body:as:)``).
    mutating func recordReceived(_ changeSet: ChangeSet, body: String, as received: ReceivedRecord) {
        let stamp = changeSet.stamp
        receive(changeSet.timestamp)
        record(origin: changeSet.origin, sequence: changeSet.sequence, timestamp: changeSet.timestamp, body: body,
               quarantineReason: received.quarantineReason, retry: received.isRetry)
        if received.quarantineReason == nil {
            noteRestores(of: changeSet.restoredURIs, by: ChangeSetMark(origin: changeSet.origin, sequence: changeSet.sequence))
        }
        for (id, properties) in received.writes where !id.isTemporaryID {
            for property in properties { setClock(of: id, property: property, to: stamp) }
        }
        for tombstone in received.tombstones {
            bury(tombstone.uri, entity: tombstone.entity, values: [:], stamp: stamp, row: nil)
        }
        appendLocal([], author: "ferry-replay", contextName: nil, repairDeletes: received.repairDeletes)
    }

    /// The change set's line, signed when the store has a key. (Signing with a valid Ed25519 key
    /// does not fail; were it to, the line stays unsigned, and peers refuse it visibly.)
    private func signedLine(_ changeSet: ChangeSet) -> String {
        guard let signer, let line = try? ChangeSetCodec.encode(changeSet, signedWith: signer) else { return ChangeSetCodec.encode(changeSet) }
        return line
    }

    /// Appends `changes` (and deletes of objects that never reached the store) as a new
    /// change set of this store, stamping its clocks and tombstones (nothing when empty).
    private mutating func appendLocal(_ changes: [RecordedChange], author: String?, contextName: String?,
                                      repairDeletes: [DeletedObject] = []) {
        guard !changes.isEmpty || !repairDeletes.isEmpty else { return }
        let timestamp = tick()
        let stamp = WriteStamp(timestamp: timestamp, origin: store)
        let sequence = vector[store, default: 0] + 1
        let changeSet = ChangeSet(origin: store, sequence: sequence, timestamp: timestamp, author: author, contextName: contextName,
                                  modelHash: modelHash, dependencies: vector.filter { $0.key != store },
                                  changes: changes.map(\.change) + repairDeletes.map { ObjectChange(kind: .delete, uri: $0.uri, entity: $0.entity) })
        record(origin: store, sequence: sequence, timestamp: timestamp, body: signedLine(changeSet), quarantineReason: nil, retry: false)
        noteRestores(of: changeSet.restoredURIs, by: ChangeSetMark(origin: store, sequence: sequence))
        for deleted in repairDeletes {
            bury(deleted.uri, entity: deleted.entity, values: [:], stamp: stamp, row: nil)
        }
        for entry in changes {
            setPositions(of: entry.id, entry.change.positions)
            switch entry.change.kind {
            case .insert, .merge:
                continue
            case .update, .restore:
                for property in entry.clocked { setClock(of: entry.id, property: property, to: stamp) }
            case .delete:
                bury(entry.change.uri, entity: entry.change.entity, values: entry.change.values, memberships: entry.change.added,
                     stamp: stamp, row: entry.id)
            }
        }
    }

    /// The recorded changes of a save, object by object: inserts (not those `skipped`),
    /// updates, objects whose only change is to a to-many set, then deletes with their last values.
    private func changes(of request: SaveRequest, insertedIDs: [ObjectID], resolve: (ObjectID?) -> ObjectID?,
                         deleted: [ObjectID: RowSnapshot], deletedMemberships: [ObjectID: [String: [ObjectID]]],
                         skipping skipped: Set<ObjectID>, assignsPositions: Bool) -> [RecordedChange] {
        var result: [RecordedChange] = []
        let known = positions
        var membership = RecordedMembership.collect(request, model: model, resolve: resolve, uri: { uri(of: $0) },
                                                    assignsPositions: assignsPositions) { id, relationship in known[id]?[relationship] ?? [:] }
        for id in insertedIDs where skipped.contains(id) { membership[id] = nil }  // recorded by the change set's text
        for (index, id) in insertedIDs.enumerated() where !skipped.contains(id) {
            let insert = request.inserts[index]
            let row = RowSnapshot(objectID: id, version: 1, attributes: insert.attributes, toOne: insert.toOne.map(resolve))
            let members = membership.removeValue(forKey: id)
            result.append(RecordedChange(id: id, change: ObjectChange(kind: .insert, uri: uri(of: id), entity: id.entityName,
                                                                       values: values(of: row, keepingNil: false), added: members?.added ?? [:],
                                                                       positions: members?.positions ?? [:]),
                                         clocked: []))
        }
        for update in request.updates {
            guard let entity = model.entity(named: update.objectID.entityName) else { continue }
            var values: [String: ChangeValue] = [:]
            for (index, value) in update.attributes {
                guard case .attribute(let attribute) = entity.properties[index], attribute.isReplicated else { continue }
                values[attribute.name] = value.map(ChangeValue.attribute) ?? .null
            }
            for (index, target) in update.toOne {
                guard case .relationship(let relationship) = entity.properties[index], model.isRecorded(relationship, in: entity) else { continue }
                values[relationship.name] = resolve(target).map { .object(uri(of: $0)) } ?? .null
            }
            let members = membership.removeValue(forKey: update.objectID)
            guard !values.isEmpty || members != nil else { continue }
            result.append(RecordedChange(id: update.objectID,
                                         change: ObjectChange(kind: .update, uri: uri(of: update.objectID), entity: update.objectID.entityName,
                                                              values: values, added: members?.added ?? [:], removed: members?.removed ?? [:],
                                                              positions: members?.positions ?? [:]),
                                         clocked: Array(values.keys) + (members?.clockKeys ?? [])))
        }
        for (id, members) in membership.sorted(by: { $0.key.uriString < $1.key.uriString }) {
            result.append(RecordedChange(id: id, change: ObjectChange(kind: .update, uri: uri(of: id), entity: id.entityName,
                                                                      added: members.added, removed: members.removed, positions: members.positions),
                                         clocked: members.clockKeys))
        }
        for delete in request.deletes {
            let values = deleted[delete.objectID].map { self.values(of: $0, keepingNil: false) } ?? [:]
            let memberships = (deletedMemberships[delete.objectID] ?? [:]).mapValues { $0.map(uri(of:)).sorted() }
            result.append(RecordedChange(id: delete.objectID, change: ObjectChange(kind: .delete, uri: uri(of: delete.objectID),
                                                                                   entity: delete.objectID.entityName, values: values,
                                                                                   added: memberships),
                                         clocked: []))
        }
        return result
    }

    /// A row's recorded values (attributes and recorded to-ones), nils as `.null` or left out.
    private func values(of row: RowSnapshot, keepingNil: Bool) -> [String: ChangeValue] {
        guard let entity = model.entity(named: row.objectID.entityName) else { return [:] }
        var values: [String: ChangeValue] = [:]
        for (index, property) in entity.properties.enumerated() {
            switch property {
            case .attribute(let attribute) where attribute.isReplicated:
                if let value = row.attributes[index] { values[attribute.name] = .attribute(value) } else if keepingNil { values[attribute.name] = .null }
            case .relationship(let relationship) where !relationship.isToMany && model.isRecorded(relationship, in: entity):
                if let target = row.toOne[index] {
                    values[relationship.name] = .object(uri(of: target))
                } else if keepingNil {
                    values[relationship.name] = .null
                }
            default:
                continue
            }
        }
        return values
    }

}

// MARK: - Migration

extension InMemoryHistory {
    /// The history and merge metadata of a store migrated by `migration` (as `SQLiteStore`'s
    /// migration renames its `Z_FERRY_*` tables): change sets are kept as they came (they name
    /// their version); every object ID, URI and property name of a renamed entity or property
    /// takes the new name; the metadata of removed entities' objects goes.
    func migrated(by migration: LightweightMigration, modelHash: String) -> InMemoryHistory {
        let versions = migration.versions
        var next = InMemoryHistory(store: store, model: versions.destination, modelHash: modelHash)
        let renameEntity = { (old: String) -> String? in versions.destinationEntity(ofSource: old) }
        func id(_ old: ObjectID) -> ObjectID? {
            guard let entity = renameEntity(old.entityName) else { return nil }
            return entity == old.entityName ? old : ObjectID(entityName: entity, kind: old.kind)
        }
        func uri(_ old: String) -> String { ObjectURIComponents.renamingEntity(of: old, renameEntity) }
        /// A clock key (a property, `relationship member`, or `relationship@ member`) of an object of `entity` (old name).
        func key(_ old: String, of entity: String) -> String {
            for separator in ["@ ", " "] {
                guard let range = old.range(of: separator) else { continue }
                let property = String(old[..<range.lowerBound])
                let renamed = versions.destinationProperty(ofSource: property, inSourceEntity: entity) ?? property
                return renamed + separator + uri(String(old[range.upperBound...]))
            }
            return versions.destinationProperty(ofSource: old, inSourceEntity: entity) ?? old
        }
        func properties<Value>(_ values: [String: Value], of entity: String) -> [String: Value] {
            Dictionary(values.map { (key($0.key, of: entity), $0.value) }, uniquingKeysWith: { first, _ in first })
        }
        next.lastTimestamp = lastTimestamp
        next.records = records
        next.nextRank = nextRank
        next.vector = vector
        next.purged = purged
        next.horizon = horizon
        next.horizonTime = horizonTime
        next.purgeMarks = purgeMarks
        next.held = held
        for (row, stamps) in clocks {
            guard let renamed = id(row) else { continue }
            next.clocks[renamed] = properties(stamps, of: row.entityName)
        }
        for (row, relationships) in positions {
            guard let renamed = id(row) else { continue }
            next.positions[renamed] = properties(relationships, of: row.entityName).mapValues { members in
                Dictionary(members.map { (uri($0.key), $0.value) }, uniquingKeysWith: { first, _ in first })
            }
        }
        for (origin, row) in rowsByOrigin {
            guard let renamed = id(row) else { continue }
            next.rowsByOrigin[uri(origin)] = renamed
            next.originsByRow[renamed] = uri(origin)
        }
        for (buried, tombstone) in tombstones {
            var moved = tombstone
            moved.entity = renameEntity(tombstone.entity) ?? tombstone.entity
            next.tombstones[uri(buried)] = moved
        }
        for (alias, survivor) in aliases { next.aliases[uri(alias)] = uri(survivor) }
        for (alias, time) in aliasTimes { next.aliasTimes[uri(alias)] = time }
        for (survivor, values) in carried {
            next.carried[uri(survivor)] = Dictionary(values.map { property, value in
                var moved = value
                moved.entity = renameEntity(value.entity) ?? value.entity
                return (versions.destinationProperty(ofSource: property, inSourceEntity: value.entity) ?? property, moved)
            }, uniquingKeysWith: { first, _ in first })
        }
        for (restored, marks) in restores { next.restores[uri(restored)] = marks }
        return next
    }
}
