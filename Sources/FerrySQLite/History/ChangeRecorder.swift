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
    let layout: StoreLayout
    let store: UUID

    /// The last values of rows about to be deleted, read before the delete.
    func snapshots(of deletes: [SaveRequest.Delete], in db: Database) throws -> [ObjectID: RowSnapshot] {
        var result: [ObjectID: RowSnapshot] = [:]
        let box = UUIDBox(value: store)
        for delete in deletes {
            guard let plan = layout.plans[delete.objectID.entityName], let key = delete.objectID.primaryKey else { continue }
            let sql = "SELECT \(layout.selectList(ofTable: plan.table, alias: "t0")) FROM \(plan.table) t0 WHERE t0.Z_PK = ?"
            if let row = try Row.fetchOne(db.cachedStatement(sql: sql), arguments: [key]), let snapshot = layout.snapshot(from: row, store: box) {
                result[delete.objectID] = snapshot
            }
        }
        return result
    }

    /// Builds and appends the change set of a local save; returns it (nil when
    /// the save changed nothing that is recorded, e.g. only transient values).
    @discardableResult
    func recordLocalSave(_ request: SaveRequest, insertedIDs: [ObjectID], resolve: (ObjectID?) -> ObjectID?,
                         tombstones: [ObjectID: RowSnapshot], in db: Database) throws -> ChangeSet? {
        var names = OriginNames(layout: layout, db: db)
        var changes: [ObjectChange] = []
        changes.reserveCapacity(request.inserts.count + request.updates.count + request.deletes.count)
        var membership: [ObjectID: (added: [String: [String]], removed: [String: [String]])] = [:]
        for change in request.toManyChanges {
            guard let source = resolve(change.source) else { continue }
            let added = try change.added.compactMap(resolve).map { try names.uri(of: $0) }
            let removed = try change.removed.compactMap(resolve).map { try names.uri(of: $0) }
            if !added.isEmpty { membership[source, default: ([:], [:])].added[change.relationship, default: []] += added }
            if !removed.isEmpty { membership[source, default: ([:], [:])].removed[change.relationship, default: []] += removed }
        }

        for (insert, id) in zip(request.inserts, insertedIDs) {
            guard let plan = layout.plans[id.entityName] else { continue }
            var values: [String: ChangeValue] = [:]
            for property in plan.recordedProperties {
                if property.isToOne {
                    if let target = resolve(insert.toOne[property.index]) { values[property.name] = .object(try names.uri(of: target)) }
                } else if let value = insert.attributes[property.index] {
                    values[property.name] = .attribute(value)
                }
            }
            let members = membership.isEmpty ? nil : membership.removeValue(forKey: id)
            changes.append(ObjectChange(kind: .insert, uri: try names.uri(of: id), entity: id.entityName, values: values,
                                        added: members?.added ?? [:], removed: [:]))
        }
        var clocked: [(id: ObjectID, property: String)] = []
        for update in request.updates {
            guard let plan = layout.plans[update.objectID.entityName] else { continue }
            var values: [String: ChangeValue] = [:]
            for (index, value) in update.attributes {
                guard case .attribute(let attribute) = plan.entity.properties[index], !attribute.isTransient else { continue }
                values[attribute.name] = value.map(ChangeValue.attribute) ?? .null
            }
            for (index, target) in update.toOne {
                guard case .relationship(let relationship) = plan.entity.properties[index],
                      layout.model.isRecorded(relationship, in: plan.entity) else { continue }
                values[relationship.name] = try resolve(target).map { .object(try names.uri(of: $0)) } ?? .null
            }
            let members = membership.removeValue(forKey: update.objectID)
            guard !values.isEmpty || members != nil else { continue }
            for name in values.keys { clocked.append((update.objectID, name)) }
            for (relationship, uris) in (members?.added ?? [:]).merging(members?.removed ?? [:], uniquingKeysWith: +) {
                for uri in uris { clocked.append((update.objectID, Self.membershipKey(relationship, uri))) }
            }
            changes.append(ObjectChange(kind: .update, uri: try names.uri(of: update.objectID), entity: update.objectID.entityName,
                                        values: values, added: members?.added ?? [:], removed: members?.removed ?? [:]))
        }
        // Membership changes of objects that had no other change (only their to-many set changed).
        for (id, members) in membership.sorted(by: { $0.key.uriString < $1.key.uriString }) {
            for (relationship, uris) in members.added.merging(members.removed, uniquingKeysWith: +) {
                for uri in uris { clocked.append((id, Self.membershipKey(relationship, uri))) }
            }
            changes.append(ObjectChange(kind: .update, uri: try names.uri(of: id), entity: id.entityName,
                                        added: members.added, removed: members.removed))
        }
        var deleted: [(id: ObjectID, uri: String, values: [String: ChangeValue])] = []
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
            let uri = try names.uri(of: delete.objectID)
            deleted.append((delete.objectID, uri, values))
            changes.append(ObjectChange(kind: .delete, uri: uri, entity: delete.objectID.entityName, values: values))
        }
        guard !changes.isEmpty else { return nil }

        let log = HistoryLog(db: db, store: store)
        let timestamp = try log.tick()
        let changeSet = ChangeSet(origin: store, sequence: try log.lastSequence(of: store) + 1, timestamp: timestamp,
                                  author: request.author, contextName: request.contextName, modelHash: layout.model.versionHash,
                                  dependencies: try log.vector().filter { $0.key != store }, changes: changes)
        try log.append(changeSet, status: HistorySchema.applied, reason: nil)
        for (id, property) in clocked {
            guard let root = layout.plans[id.entityName]?.rootNumber, let key = id.primaryKey else { continue }
            try log.setClock(root: root, key: key, property: property, timestamp: timestamp, origin: store)
        }
        for entry in deleted {
            guard let root = layout.plans[entry.id.entityName]?.rootNumber, let key = entry.id.primaryKey else { continue }
            try log.bury(uri: entry.uri, entity: entry.id.entityName, values: entry.values, timestamp: timestamp, origin: store)
            try log.forgetClocks(root: root, key: key)
        }
        return changeSet
    }

    /// The clock key of one membership fact: relationship name, a space, member URI.
    static func membershipKey(_ relationship: String, _ member: String) -> String { relationship + " " + member }
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

    mutating func uri(of id: ObjectID) throws -> String {
        if hasForeignObjects == nil {
            hasForeignObjects = try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM Z_FERRY_OBJECT)") ?? false
        }
        guard hasForeignObjects == true else { return localURI(of: id) }
        if let known = cache[id] { return known }
        var uri = localURI(of: id)
        if let root = layout.plans[id.entityName]?.rootNumber, let key = id.primaryKey,
           let mapped = try String.fetchOne(db.cachedStatement(sql: "SELECT Z_URI FROM Z_FERRY_OBJECT WHERE Z_ROOT = ? AND Z_PK = ?"),
                                            arguments: [root, key]) {
            uri = mapped
        }
        cache[id] = uri
        return uri
    }

    /// The object's own URI, from its entity's cached prefix.
    private func localURI(of id: ObjectID) -> String {
        guard let plan = layout.plans[id.entityName], let key = id.primaryKey else { return id.uriString }
        return plan.uriPrefix + String(key)
    }
}
