import Foundation
import GRDB
import FerryModel
import FerryStore

/// Turns one save into a change set and writes it, with the merge metadata,
/// in the save's own transaction: a save commits with its change set or not at all.
///
/// Objects are named by origin URI: their own URI for objects inserted here,
/// the URI they were born with for objects replayed from elsewhere
/// (`Z_FERRY_OBJECT`). Only recorded relationship sides appear
/// (``ManagedObjectModel/isRecorded(_:in:)``); transient properties never do.
struct ChangeRecorder {
    /// Bytes reserved per insert for a save's change-set text: enough for an insert with two
    /// origin URIs and a few short values (W1's average 225), so a large save's text is written
    /// without the buffer growing (each growth copies everything written so far).
    static let bytesPerInsert = 256
    let layout: StoreLayout
    let store: UUID
    /// How the change sets are signed.
    let signing: ChangeSetSigning

    /// The last values of rows about to be deleted, read before the delete.
    func snapshots(of deletes: [SaveRequest.Delete], in db: Database) throws -> [ObjectID: RowSnapshot] {
        var result: [ObjectID: RowSnapshot] = [:]
        for delete in deletes {
            if let snapshot = try snapshot(of: delete.objectID, in: db) { result[delete.objectID] = snapshot }
        }
        return result
    }

    /// The memberships the deletes' tombstones keep (``ManagedObjectModel/tombstoneMemberships(of:)``),
    /// by origin URI, read before the save changes any membership (a delete's Nullify rule removes them).
    func memberships(of deletes: [SaveRequest.Delete], in db: Database) throws -> [ObjectID: [String: [String]]] {
        var result: [ObjectID: [String: [String]]] = [:]
        var names = OriginNames(layout: layout, db: db)
        for delete in deletes {
            guard let entity = layout.plans[delete.objectID.entityName]?.entity else { continue }
            for relationship in layout.model.tombstoneMemberships(of: entity) {
                var uris: [String] = []
                for member in try layout.members(of: delete.objectID, relationship: relationship.name, in: db) {
                    uris.append(try names.uri(of: member))
                }
                if !uris.isEmpty { result[delete.objectID, default: [:]][relationship.name] = uris.sorted() }
            }
        }
        return result
    }

    /// One row's current values, read inside the transaction.
    private func snapshot(of id: ObjectID, in db: Database) throws -> RowSnapshot? {
        guard let plan = layout.plans[id.entityName], let key = id.primaryKey else { return nil }
        let sql = "SELECT \(layout.selectList(ofTable: plan.table, alias: "t0")) FROM \(plan.table) t0 WHERE t0.Z_PK = ?"
        guard let row = try Row.fetchOne(db.cachedStatement(sql: sql), arguments: [key]) else { return nil }
        return layout.snapshot(from: row, store: UUIDBox(value: store))
    }

    /// Records a save: a local save becomes a new change set of this store; a
    /// replaying save records the replayed change set, stamps its writes with
    /// its clock, and records whatever else the save did (delete propagation)
    /// as a new local change set.
    /// `insertText`, when given, is writing the inserts' text on another thread: it is used in
    /// place of writing them here (or, if it could not write them, they are written here).
    func record(_ request: SaveRequest, replay: ReplayAnnotation?, insertedIDs: [ObjectID], resolve: (ObjectID?) -> ObjectID?,
                tombstones: [ObjectID: RowSnapshot], memberships: [ObjectID: [String: [String]]] = [:],
                insertText: InsertTextInAdvance? = nil, compressedBody: [UInt8]? = nil, in db: Database) throws -> Int64? {
        let log = HistoryLog(db: db, store: store, modelHash: layout.modelVersionHash)
        guard let replay else {
            var names = OriginNames(layout: layout, db: db)
            if let written = insertText?.take() {
                // The inserts are all in `written` (the save has no to-many members); the other changes follow them.
                var none: ChangeSetWriter?
                let entries = try collect(request, insertedIDs: [], resolve: resolve, tombstones: tombstones, memberships: memberships, names: &names,
                                          insertsInto: &none)
                return try appendLocal(entries, writer: written.writer, compressedPrefix: written.compressed, signatureBegun: written.signature,
                                       contextName: request.contextName, log: log)
            }
            // A local save's inserts go straight into the change set's text; the other changes follow them.
            var writer: ChangeSetWriter? = ChangeSetWriter(capacity: request.inserts.count * Self.bytesPerInsert
                                                               + (request.updates.count + request.deletes.count) * 200,
                                                           author: request.author)
            let entries = try collect(request, insertedIDs: insertedIDs, resolve: resolve, tombstones: tombstones, memberships: memberships, names: &names,
                                      insertsInto: &writer)
            return try appendLocal(entries, writer: writer.take() ?? ChangeSetWriter(author: request.author), contextName: request.contextName, log: log)
        }
        let incoming = replay.changeSet
        // The commonest replay (see `DirectInsertReplay`) only inserts new objects: the change set's own
        // text records it all, so only the identity map, the clock and the log are written.
        let onlyNewObjects = replay.insertsNewObjectsOnly && request.updates.isEmpty && request.deletes.isEmpty && request.toManyChanges.isEmpty
        // Objects born elsewhere keep their origin URI; resurrected ones get their URI back.
        var names = OriginNames(layout: layout, db: db)
        var plainInserts = Set<ObjectID>()
        var resurrected = Set<ObjectID>()
        var newRows: [(uri: String, root: Int, key: Int64)] = []
        newRows.reserveCapacity(request.inserts.count)
        let inOrder = replay.originURIsInOrder.count == request.inserts.count ? replay.originURIsInOrder : nil
        var plans = PlanCache(layout: layout)  // (inserts come in runs of one entity: a lookup per run, not per object)
        for index in insertedIDs.indices {
            let id = insertedIDs[index], temporaryID = request.inserts[index].objectID
            guard let uri = inOrder?[index] ?? replay.originURIs[temporaryID], let root = plans.plan(for: id.entityName)?.rootNumber,
                  let key = id.primaryKey else { continue }
            if onlyNewObjects {
                newRows.append((uri, root, key))  // nothing else asks for their names or IDs
                continue
            }
            names.remember(uri, for: id)
            if replay.resurrected.contains(temporaryID) {
                try log.identity.map(uri: uri, root: root, key: key, replacing: true)
                try log.unbury(uri)
                resurrected.insert(id)
            } else {
                newRows.append((uri, root, key))
                plainInserts.insert(id)
            }
        }
        // As runs of consecutive URIs on consecutive rows: a row per object cost more than the rows they map.
        try log.identity.map(newRows)
        try log.receive(incoming.timestamp)
        try log.record(origin: incoming.origin, sequence: incoming.sequence, timestamp: incoming.timestamp,
                       body: replay.body, compressedBody: compressedBody, status: HistorySchema.applied, reason: replay.leftInvalidNote, retry: replay.isRetry)
        try log.noteRestores(of: incoming.restoredURIs, by: incoming.origin, sequence: incoming.sequence)
        if onlyNewObjects { return nil }
        // Plain inserts of the change set are recorded by its own text: no entries for them.
        var noWriter: ChangeSetWriter?
        let entries = try collect(request, insertedIDs: insertedIDs, resolve: resolve, tombstones: tombstones, memberships: memberships, names: &names,
                                  skipping: plainInserts, assignsPositions: false, insertsInto: &noWriter)
        let recording = ReplayRecording(entries, replay: replay, resolve: resolve, plainInserts: plainInserts, resurrected: resurrected)
        // The change set's writes carry its clock (plain inserts need none: every later write follows them).
        for (id, properties) in recording.replayedWrites {
            guard let root = layout.plans[id.entityName]?.rootNumber, let key = id.primaryKey else { continue }
            for property in properties {
                try log.setClock(root: root, key: key, property: property, timestamp: incoming.timestamp, origin: incoming.origin)
            }
        }
        // The change set's positions that won (already in the order the save wrote).
        for (temporaryID, positions) in replay.positions {
            guard let id = resolve(temporaryID), let root = layout.plans[id.entityName]?.rootNumber, let key = id.primaryKey else { continue }
            try storePositions(positions, root: root, key: key, log: log)
        }
        // Merged duplicates: the loser's URI now names the survivor; the clocks its values brought along.
        for merge in replay.merges {
            try log.alias(merge.loserURI, to: merge.survivorURI, at: incoming.timestamp)
            try log.forgetCarried(of: merge.loserURI)
            if let root = layout.plans[merge.loser.entityName]?.rootNumber, let key = merge.loser.primaryKey {
                try log.forgetClocks(root: root, key: key)
            }
        }
        for (uri, values) in replay.carried {
            for (property, carried) in values { try log.carry(property, of: uri, carried) }
        }
        for (id, stamps) in recording.mergeStamps {
            guard let root = layout.plans[id.entityName]?.rootNumber, let key = id.primaryKey else { continue }
            for (property, stamp) in stamps {
                try log.setClock(root: root, key: key, property: property, timestamp: stamp.timestamp, origin: stamp.origin)
            }
        }
        for entry in recording.replayedDeletes {
            try log.bury(uri: entry.change.uri, entity: entry.change.entity, values: entry.change.values, memberships: entry.change.added,
                         timestamp: incoming.timestamp, origin: incoming.origin)
            if let root = layout.plans[entry.id.entityName]?.rootNumber, let key = entry.id.primaryKey {
                try log.forgetClocks(root: root, key: key)
            }
        }
        var derived = recording.derived
        // Objects kept or brought back for a Deny rule: a restore with all their values.
        for id in recording.restored {
            guard let plan = layout.plans[id.entityName], let snapshot = try snapshot(of: id, in: db) else { continue }
            var values: [String: ChangeValue] = [:]
            for property in plan.recordedProperties {
                if property.isToOne {
                    values[property.name] = try snapshot.toOne[property.index].map { .object(try names.uri(of: $0)) } ?? .null
                } else {
                    values[property.name] = snapshot.attributes[property.index].map(ChangeValue.attribute) ?? .null
                }
            }
            var members: [String: [String]] = [:]
            for relationship in layout.model.joinTableRelationships(of: plan.entity) {
                let uris = try layout.members(of: id, relationship: relationship.name, in: db).map { try names.uri(of: $0) }
                if !uris.isEmpty { members[relationship.name] = uris.sorted() }
            }
            derived.append(.restore(of: id, uri: try names.uri(of: id), values: values, members: members))
        }
        for tombstone in replay.tombstonesOnly {
            try log.bury(uri: tombstone.uri, entity: tombstone.entity, values: [:], timestamp: incoming.timestamp, origin: incoming.origin)
        }
        try appendLocal(derived, writer: ChangeSetWriter(author: "ferry-replay"), repairDeletes: replay.repairDeletes, contextName: nil, log: log)
        return nil
    }

    private func storePositions(_ positions: [String: [String: String]], root: Int, key: Int64, log: HistoryLog) throws {
        for (relationship, keys) in positions {
            for (member, position) in keys {
                try log.setPosition(root: root, key: key, relationship: relationship, member: member, position: position)
            }
        }
    }

    /// Records a replayed change set that changed nothing here (every write lost,
    /// or it touched only deleted objects), or one that was quarantined.
    func recordReceived(_ changeSet: ChangeSet, body: String, compressedBody: [UInt8]? = nil, status: Int, reason: String?,
                        writes: [ObjectID: Set<String>], tombstones: [DeletedObject], repairDeletes: [DeletedObject], retry: Bool,
                        in db: Database) throws {
        let log = HistoryLog(db: db, store: store, modelHash: layout.modelVersionHash)
        try log.receive(changeSet.timestamp)
        try log.record(origin: changeSet.origin, sequence: changeSet.sequence, timestamp: changeSet.timestamp,
                       body: body, compressedBody: compressedBody, status: status, reason: reason, retry: retry)
        if status == HistorySchema.applied {
            try log.noteRestores(of: changeSet.restoredURIs, by: changeSet.origin, sequence: changeSet.sequence)
        }
        // Writes that won but wrote the value already here still move the clock,
        // so an older write arriving later cannot win against them.
        for (id, properties) in writes where !id.isTemporaryID {
            guard let root = layout.plans[id.entityName]?.rootNumber, let key = id.primaryKey else { continue }
            for property in properties {
                try log.setClock(root: root, key: key, property: property, timestamp: changeSet.timestamp, origin: changeSet.origin)
            }
        }
        for tombstone in tombstones {
            try log.bury(uri: tombstone.uri, entity: tombstone.entity, values: [:], timestamp: changeSet.timestamp, origin: changeSet.origin)
        }
        try appendLocal([], writer: ChangeSetWriter(author: "ferry-replay"), repairDeletes: repairDeletes, contextName: nil, log: log)
    }

    /// Appends `entries` (and deletes of objects that never reached the store)
    /// as a new change set of this store (nothing when empty).
    /// `writer` (begun with the save's author) may hold changes already (a local save's inserts),
    /// which come first; it is taken, so that the change set is finished in its buffer without a copy.
    /// `compressedPrefix`, when given, has compressed the writer's text so far (see ``CompressedPrefix``).
    @discardableResult
    private func appendLocal(_ entries: [RecordedChange], writer: consuming ChangeSetWriter, compressedPrefix: CompressedPrefix? = nil,
                             signatureBegun: (any PartialSignature)? = nil,
                             repairDeletes: [DeletedObject] = [], contextName: String?, log: HistoryLog) throws -> Int64? {
        guard !entries.isEmpty || !repairDeletes.isEmpty || !writer.isEmpty else { return nil }
        let timestamp = try log.tick()
        for entry in entries {
            if entry.change.kind == .insert && entry.change.added.isEmpty && entry.change.positions.isEmpty {
                writer.appendInsert(entity: entry.change.entity, uri: entry.change.uri, values: entry.insertValues)
            } else if entry.change.kind == .insert {
                var change = entry.change
                change.values = Dictionary(entry.insertValues, uniquingKeysWith: { first, _ in first })
                writer.append(change)
            } else {
                writer.append(entry.change)
            }
        }
        for deleted in repairDeletes { writer.append(ObjectChange(kind: .delete, uri: deleted.uri, entity: deleted.entity)) }
        // One read of the vector gives both this store's next number and the change set's dependencies.
        var dependencies = try log.vector()
        let sequence = (dependencies.removeValue(forKey: store) ?? 0) + 1
        let signer: (any ChangeSetSigner)?
        switch signing {
        case .unsigned: signer = nil
        case .key(let key):
            // A rotation (`ferry key rotate`) from another process while this one held the old key:
            // nothing more is signed with it (its change sets would be refused by every peer).
            let newest = try String.fetchOne(log.db.cachedStatement(sql: "SELECT Z_KEY FROM Z_FERRY_KEY WHERE Z_ORIGIN = ? ORDER BY Z_FROM DESC LIMIT 1"),
                                              arguments: [store.uuidString])
            guard newest == nil || newest == key.publicKey else {
                throw SigningKeyError("this store's key was rotated to \(newest ?? "") while this process held the old one; " +
                                      "open the store again (restart the daemon) to sign with the new key")
            }
            signer = key
        case .unavailable(let reason): throw SigningKeyError(reason)
        }
        let body = try writer.finishBytes(origin: store, sequence: sequence, timestamp: timestamp, contextName: contextName,
                                          modelHash: layout.modelVersionHash, dependencies: dependencies,
                                          signer: signer, begun: signatureBegun)
        try log.append(origin: store, sequence: sequence, timestamp: timestamp, bodyBytes: body, compressedPrefix: compressedPrefix,
                       status: HistorySchema.applied)
        try log.noteRestores(of: entries.filter { $0.change.kind == .restore }.map(\.change.uri), by: store, sequence: sequence)
        for deleted in repairDeletes {
            try log.bury(uri: deleted.uri, entity: deleted.entity, values: [:], timestamp: timestamp, origin: store)
        }
        for entry in entries {
            guard let root = layout.plans[entry.id.entityName]?.rootNumber, let key = entry.id.primaryKey else { continue }
            try storePositions(entry.change.positions, root: root, key: key, log: log)
            switch entry.change.kind {
            case .insert, .merge:
                continue
            case .update, .restore:
                for property in entry.clocked {
                    try log.setClock(root: root, key: key, property: property, timestamp: timestamp, origin: store)
                }
            case .delete:
                try log.bury(uri: entry.change.uri, entity: entry.change.entity, values: entry.change.values, memberships: entry.change.added,
                             timestamp: timestamp, origin: store)
                try log.forgetClocks(root: root, key: key)
            }
        }
        return sequence
    }

    /// The recorded changes of a save, object by object. With a `writer`, inserts without
    /// memberships are written into it (in order, before anything else) instead of being returned.
    private func collect(_ request: SaveRequest, insertedIDs: [ObjectID], resolve: (ObjectID?) -> ObjectID?,
                         tombstones: [ObjectID: RowSnapshot], memberships: [ObjectID: [String: [String]]], names: inout OriginNames,
                         skipping skipped: Set<ObjectID> = [], assignsPositions: Bool = true,
                         insertsInto writer: inout ChangeSetWriter?) throws -> [RecordedChange] {
        var entries: [RecordedChange] = []
        entries.reserveCapacity(request.inserts.count + request.updates.count + request.deletes.count)
        let log = HistoryLog(db: names.db, store: store, modelHash: layout.modelVersionHash)
        let layout = self.layout
        var membership = try RecordedMembership.collect(request, model: layout.model, resolve: resolve, uri: { try names.uri(of: $0) },
                                                         assignsPositions: assignsPositions) { id, relationship in
            guard let root = layout.plans[id.entityName]?.rootNumber, let key = id.primaryKey else { return [:] }
            return try log.positions(root: root, key: key, relationship: relationship)
        }
        var plans = PlanCache(layout: layout)
        for index in insertedIDs.indices {  // (by index: a `for … in` would copy each insert)
            let id = insertedIDs[index]
            // (A plain insert of a replayed change set is recorded by its text, memberships included.)
            if !skipped.isEmpty, skipped.contains(id) { membership[id] = nil; continue }
            guard let plan = plans.plan(for: id.entityName) else { continue }
            if var direct = writer, let key = id.primaryKey, membership.isEmpty || membership[id] == nil {
                writer = nil  // so `direct` holds the only reference and grows in place
                try writeInsert(request.inserts[index], key: key, plan: plan, resolve: resolve, names: &names, plans: &plans, into: &direct)
                writer = direct
                continue
            }
            var values: [(String, ChangeValue)] = []
            values.reserveCapacity(plan.recordedProperties.count)
            for property in plan.recordedProperties {
                if property.isToOne {
                    if let target = resolve(request.inserts[index].toOne[property.index]) { values.append((property.name, .object(try names.uri(of: target)))) }
                } else if let value = request.inserts[index].attributes[property.index] {
                    values.append((property.name, .attribute(value)))
                }
            }
            let members = membership.isEmpty ? nil : membership.removeValue(forKey: id)
            entries.append(RecordedChange(id: id, change: ObjectChange(kind: .insert, uri: try names.uri(of: id), entity: id.entityName,
                                                               added: members?.added ?? [:], removed: [:], positions: members?.positions ?? [:]),
                                          clocked: [], insertValues: values))
        }
        for update in request.updates {
            guard let plan = layout.plans[update.objectID.entityName] else { continue }
            var values: [String: ChangeValue] = [:]
            for (index, value) in update.attributes {
                guard case .attribute(let attribute) = plan.entity.properties[index], attribute.isReplicated else { continue }
                values[attribute.name] = value.map(ChangeValue.attribute) ?? .null
            }
            for (index, target) in update.toOne {
                guard case .relationship(let relationship) = plan.entity.properties[index],
                      layout.model.isRecorded(relationship, in: plan.entity) else { continue }
                values[relationship.name] = try resolve(target).map { .object(try names.uri(of: $0)) } ?? .null
            }
            let members = membership.removeValue(forKey: update.objectID)
            guard !values.isEmpty || members != nil else { continue }
            entries.append(RecordedChange(id: update.objectID,
                                 change: ObjectChange(kind: .update, uri: try names.uri(of: update.objectID), entity: update.objectID.entityName,
                                                      values: values, added: members?.added ?? [:], removed: members?.removed ?? [:],
                                                      positions: members?.positions ?? [:]),
                                 clocked: Array(values.keys) + (members?.clockKeys ?? [])))
        }
        // Objects whose only change is to a to-many set.
        for (id, members) in membership.sorted(by: { $0.key.uriString < $1.key.uriString }) {
            entries.append(RecordedChange(id: id, change: ObjectChange(kind: .update, uri: try names.uri(of: id), entity: id.entityName,
                                                              added: members.added, removed: members.removed, positions: members.positions),
                                 clocked: members.clockKeys))
        }
        for delete in request.deletes {
            guard let plan = layout.plans[delete.objectID.entityName] else { continue }
            var values: [String: ChangeValue] = [:]
            if let row = tombstones[delete.objectID] {
                for property in plan.recordedProperties {
                    if property.isToOne {
                        if let target = row.toOne[property.index] { values[property.name] = .object(try names.uri(of: target)) }
                    } else if let value = row.attributes[property.index] {
                        values[property.name] = .attribute(value)
                    }
                }
            }
            entries.append(RecordedChange(id: delete.objectID, change: ObjectChange(kind: .delete, uri: try names.uri(of: delete.objectID),
                                                                           entity: delete.objectID.entityName, values: values,
                                                                           added: memberships[delete.objectID] ?? [:]), clocked: []))
        }
        return entries
    }

    /// Writes one insert straight from its row values, with the entity's prepared byte pieces.
    private func writeInsert(_ insert: SaveRequest.Insert, key: Int64, plan: StoreLayout.EntityPlan, resolve: (ObjectID?) -> ObjectID?,
                             names: inout OriginNames, plans: inout PlanCache, into writer: inout ChangeSetWriter) throws {
        let keysAreURIs = try names.allLocal()
        _ = try Self.writeInsert(insert, key: key, plan: plan, resolve: resolve, keysAreURIs: keysAreURIs, plans: &plans, into: &writer) { target in
            try names.uri(of: target)
        }
    }

    /// Writes one insert from its row values. A reference is written from its target's key when
    /// `keysAreURIs` (every object of the store has its own URI), else named by `uri`; returns
    /// false, with the insert left half-written, when `uri` has no name for a target.
    /// (Also ``InsertTextInAdvance``'s writer, which has no store to ask.)
    static func writeInsert(_ insert: SaveRequest.Insert, key: Int64, plan: StoreLayout.EntityPlan, resolve: (ObjectID?) -> ObjectID?,
                            keysAreURIs: Bool, plans: inout PlanCache, into writer: inout ChangeSetWriter,
                            uri: (ObjectID) throws -> String?) rethrows -> Bool {
        writer.beginInsert(head: plan.insertHead, key: key)
        for property in plan.recordedProperties {
            if property.isToOne {
                guard let target = resolve(insert.toOne[property.index]) else { continue }
                writer.insertValue(key: property.jsonKey)
                if keysAreURIs, let targetPlan = plans.plan(for: target.entityName), let targetKey = target.primaryKey {
                    writer.uriValue(prefix: targetPlan.uriBytes, key: targetKey)
                } else if let name = try uri(target) {
                    writer.uriValue(name)
                } else {
                    return false
                }
            } else if let value = insert.attributes[property.index] {
                writer.insertValue(key: property.jsonKey)
                writer.attributeValue(value)
            }
        }
        writer.endInsert()
        return true
    }

}

/// Origin URIs of local rows, cached per save; skips the map entirely while
/// no object of another origin has arrived.
struct OriginNames {
    let layout: StoreLayout
    let db: Database
    private var hasForeignObjects: Bool?
    private var cache: [ObjectID: String] = [:]

    init(layout: StoreLayout, db: Database) {
        self.layout = layout
        self.db = db
    }

    /// Whether every object of the store has its own URI (none arrived from elsewhere yet).
    mutating func allLocal() throws -> Bool {
        if hasForeignObjects == nil {
            hasForeignObjects = try !IdentityMap(db: db).isEmpty()
        }
        return hasForeignObjects == false
    }

    mutating func uri(of id: ObjectID) throws -> String {
        if let known = cache[id] { return known }
        guard try !allLocal() else { return localURI(of: id) }
        var uri = localURI(of: id)
        if let root = layout.plans[id.entityName]?.rootNumber, let key = id.primaryKey,
           let mapped = try IdentityMap(db: db).uri(of: IdentityMap.Row(root: root, key: key)) {
            uri = mapped
        }
        cache[id] = uri
        return uri
    }

    /// Records a known origin URI (objects a replay just inserted).
    mutating func remember(_ uri: String, for id: ObjectID) {
        cache[id] = uri
    }

    /// The object's own URI, from its entity's cached prefix.
    private func localURI(of id: ObjectID) -> String {
        guard let plan = layout.plans[id.entityName], let key = id.primaryKey else { return id.uriString }
        return plan.uriPrefix + String(key)
    }
}
