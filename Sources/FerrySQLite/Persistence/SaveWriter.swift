import Foundation
import GRDB
import GRDBSQLite
import FerryModel
import FerryStore

/// Writes one ``SaveRequest`` inside the caller's transaction: primary keys,
/// inserts, updates (optimistic locking on `Z_OPT`), relationship rows and
/// order, then deletes. Any conflict aborts the whole transaction.
struct SaveWriter {
    let layout: StoreLayout
    let store: UUID
    let signing: ChangeSetSigning

    /// Writes `request` in the caller's transaction, recorded as a local save or as `replay`;
    /// `compressedBody` is the replayed change set's body, compressed before the transaction
    /// began (nil: short enough to stay text, or no replay).
    func write(_ request: SaveRequest, replay: ReplayAnnotation? = nil, compressedBody: [UInt8]? = nil, in db: Database) throws -> SaveResult {
        let insertedIDs = try allocatePrimaryKeys(for: request.inserts, in: db)
        let permanent = InsertedIDs(request.inserts, permanentIDs: insertedIDs)
        let resolve = permanent.resolve
        // A large local save's change-set text is written on another thread while the rows are.
        let signer: (any ChangeSetSigner)? = if case .key(let key) = signing { key } else { nil }
        // (Not for a replay: its change set's text is the one received.)
        var insertText: InsertTextInAdvance?
        if replay == nil {
            insertText = try InsertTextInAdvance.start(request, permanent: permanent, layout: layout, signer: signer) {
                try IdentityMap(db: db).isEmpty()
            }
        }

        try insertRows(request, insertedIDs: insertedIDs, resolve: resolve, in: db)

        var conflicts: [String] = []
        var updatedVersions: [Int64] = []
        for update in request.updates {
            guard let plan = layout.plans[update.objectID.entityName], let key = update.objectID.primaryKey else { continue }
            let mapping = layout.mapping.entities[update.objectID.entityName]
            var assignments: [String] = []
            var values: [DatabaseValue] = []
            for (index, value) in update.attributes.sorted(by: { $0.key < $1.key }) {
                guard let column = mapping?.columns[plan.entity.properties[index].name] else { continue }
                assignments.append("\(column) = ?")
                values.append(ValueCodec.databaseValue(value))
            }
            for (index, target) in update.toOne.sorted(by: { $0.key < $1.key }) {
                let name = plan.entity.properties[index].name
                guard let column = mapping?.columns[name] else { continue }
                let resolved = resolve(target)
                assignments.append("\(column) = ?")
                values.append(resolved?.primaryKey?.databaseValue ?? .null)
                if let entityColumn = mapping?.entityColumns[name] {
                    assignments.append("\(entityColumn) = ?")
                    values.append(resolved.flatMap { layout.number(of: $0.entityName) }.map { Int64($0).databaseValue } ?? .null)
                }
            }
            assignments.append("Z_OPT = Z_OPT + 1")
            values.append(key.databaseValue)
            values.append(update.expectedVersion.databaseValue)
            try db.execute(sql: "UPDATE \(plan.table) SET \(assignments.joined(separator: ", ")) WHERE Z_PK = ? AND Z_OPT = ?",
                           arguments: StatementArguments(values))
            if db.changesCount == 0 {
                conflicts.append(update.objectID.uriString)
            } else {
                updatedVersions.append(update.expectedVersion + 1)
            }
        }

        let recorder = ChangeRecorder(layout: layout, store: store, signing: signing)
        let memberships = try recorder.memberships(of: request.deletes, in: db)
        for change in request.toManyChanges {
            try writeToManyChange(change, resolve: resolve, in: db)
        }

        let tombstones = try recorder.snapshots(of: request.deletes, in: db)
        for delete in request.deletes {
            guard let plan = layout.plans[delete.objectID.entityName], let key = delete.objectID.primaryKey else { continue }
            try db.cachedStatement(sql: "DELETE FROM \(plan.table) WHERE Z_PK = ? AND Z_OPT = ?").execute(arguments: [key, delete.expectedVersion])
            if db.changesCount == 0 {
                conflicts.append(delete.objectID.uriString)
                continue
            }
            for join in layout.mapping.joinTables.values {
                if plan.entity.isKind(of: join.canonicalEntity) {
                    try db.execute(sql: "DELETE FROM \(join.table) WHERE \(join.canonicalColumn) = ?", arguments: [key])
                }
                if plan.entity.isKind(of: join.otherEntity) {
                    try db.execute(sql: "DELETE FROM \(join.table) WHERE \(join.otherColumn) = ?", arguments: [key])
                }
            }
        }
        guard conflicts.isEmpty else {
            _ = insertText?.take()  // (lets the thread end before the transaction is rolled back)
            throw SaveError.conflict(objectURIs: conflicts)
        }
        let recorded = try recorder.record(request, replay: replay, insertedIDs: insertedIDs, resolve: resolve, tombstones: tombstones,
                                           memberships: memberships, insertText: insertText, compressedBody: compressedBody, in: db)
        return SaveResult(permanentIDs: insertedIDs, updatedVersions: updatedVersions, recordedSequence: recorded)
    }

    /// The insert's values in the order of the plan's placeholders (for GRDB's checked first binding).
    private func insertValues(key: Int64, plan: StoreLayout.EntityPlan, insert: SaveRequest.Insert,
                              resolve: (ObjectID?) -> ObjectID?) -> [DatabaseValue] {
        var values: [DatabaseValue] = [key.databaseValue, Int64(plan.number).databaseValue]
        values.reserveCapacity(plan.insertSlots.count + 2)
        for slot in plan.insertSlots {
            switch slot {
            case .attribute(let index):
                values.append(ValueCodec.databaseValue(insert.attributes[index]))
            case .toOne(let index):
                values.append(resolve(insert.toOne[index])?.primaryKey?.databaseValue ?? .null)
            case .toOneEntity(let index):
                values.append(resolve(insert.toOne[index]).flatMap { layout.number(of: $0.entityName) }.map { Int64($0).databaseValue } ?? .null)
            }
        }
        return values
    }

    /// Inserts the rows of `request.inserts`. Each run of inserts of one entity goes
    /// ``StoreLayout/EntityPlan/bulkInsertRows`` rows per statement, the rest of the run one
    /// row per statement; an entity's first row in the transaction goes through GRDB, which
    /// prepares and checks its statement.
    private func insertRows(_ request: SaveRequest, insertedIDs: [ObjectID], resolve: (ObjectID?) -> ObjectID?,
                            in db: Database) throws {
        var checked: Set<Int> = []  // entities whose statement GRDB ran in this transaction
        var plans = PlanCache(layout: layout)
        var index = insertedIDs.startIndex
        while index < insertedIDs.endIndex {
            let entityName = insertedIDs[index].entityName
            guard let plan = plans.plan(for: entityName), let key = insertedIDs[index].primaryKey else { index += 1; continue }
            // The run: this insert and the following ones of the same entity (all with keys).
            var end = index + 1
            while end < insertedIDs.endIndex && insertedIDs[end].entityName == entityName && insertedIDs[end].primaryKey != nil { end += 1 }
            if !checked.contains(plan.number) {
                // First use in this transaction: GRDB checks and binds the arguments.
                let statement = try db.cachedStatement(sql: plan.insertSQL)
                statement.setUncheckedArguments(StatementArguments(insertValues(key: key, plan: plan, insert: request.inserts[index], resolve: resolve)))
                try statement.execute()
                checked.insert(plan.number)
                index += 1
            }
            if plan.bulkInsertRows > 1, end - index >= plan.bulkInsertRows {
                let bulk = try db.cachedStatement(sql: plan.bulkInsertSQL).sqliteStatement
                while end - index >= plan.bulkInsertRows {
                    try bindAndRun(bulk, sql: plan.bulkInsertSQL, rows: index..<(index + plan.bulkInsertRows), plan: plan,
                                   request: request, insertedIDs: insertedIDs, resolve: resolve)
                    index += plan.bulkInsertRows
                }
            }
            if index < end {
                let single = try db.cachedStatement(sql: plan.insertSQL).sqliteStatement
                for row in index..<end {
                    try bindAndRun(single, sql: plan.insertSQL, rows: row..<(row + 1), plan: plan,
                                   request: request, insertedIDs: insertedIDs, resolve: resolve)
                }
            }
            index = end
        }
    }

    /// Rebinds a statement GRDB already prepared (``StoreLayout/EntityPlan/insertSQL`` or its
    /// bulk form), straight from the values of the inserts at `rows`, and steps it once with the C API.
    ///
    /// This skips GRDB's per-statement bookkeeping (transaction observers, the
    /// authorizer's region tracking), which is safe here: the statement is a
    /// plain INSERT inside the save's open transaction, and Ferry registers no
    /// transaction observer on its pool. It removes ~10% of a bulk insert.
    private func bindAndRun(_ handle: OpaquePointer, sql: String, rows: Range<Int>, plan: StoreLayout.EntityPlan,
                            request: SaveRequest, insertedIDs: [ObjectID], resolve: (ObjectID?) -> ObjectID?) throws {
        sqlite3_reset(handle)
        var binder = ValueBinder(statement: handle)
        func bind(_ insert: SaveRequest.Insert, key: Int64?) {
            binder.bind(key)
            binder.bind(Int64(plan.number))
            for slot in plan.insertSlots {
                switch slot {
                case .attribute(let index):
                    binder.bind(insert.attributes[index])
                case .toOne(let index):
                    binder.bind(resolve(insert.toOne[index])?.primaryKey)
                case .toOneEntity(let index):
                    binder.bind(resolve(insert.toOne[index]).flatMap { layout.number(of: $0.entityName) }.map(Int64.init))
                }
            }
        }
        for row in rows { bind(request.inserts[row], key: insertedIDs[row].primaryKey) }
        try binder.run(sql: sql)
    }

    /// `Z_MAX` of the root entity's `Z_PRIMARYKEY` row hands out the keys, in insertion order.
    private func allocatePrimaryKeys(for inserts: [SaveRequest.Insert], in db: Database) throws -> [ObjectID] {
        // Each insert's root table, by position; counted per root (entity number of the root).
        var plans = PlanCache(layout: layout)
        var roots: [Int] = []
        roots.reserveCapacity(inserts.count)
        var countByRoot: [Int: Int64] = [:]
        var run = (root: -1, count: Int64(0))
        for index in inserts.indices {
            let entityName = inserts[index].objectID.entityName
            guard let plan = plans.plan(for: entityName) else {
                throw SaveError.storeFailed("entity '\(entityName)' is not in this store's model")
            }
            if plan.rootNumber != run.root {
                if run.count > 0 { countByRoot[run.root, default: 0] += run.count }
                run = (plan.rootNumber, 0)
            }
            run.count += 1
            roots.append(plan.rootNumber)
        }
        if run.count > 0 { countByRoot[run.root, default: 0] += run.count }
        var next: [Int: Int64] = [:]
        for (root, count) in countByRoot {
            // Cached statements: every save that inserts runs these two, and compiling them cost about
            // a tenth of a one-object save (W4).
            let max = try Int64.fetchOne(db.cachedStatement(sql: "SELECT Z_MAX FROM Z_PRIMARYKEY WHERE Z_ENT = ?"), arguments: [root]) ?? 0
            try db.cachedStatement(sql: "UPDATE Z_PRIMARYKEY SET Z_MAX = ? WHERE Z_ENT = ?").execute(arguments: [max + count, root])
            next[root] = max + 1
        }
        var ids: [ObjectID] = []
        ids.reserveCapacity(inserts.count)
        var current = (root: -1, key: Int64(0))
        for index in inserts.indices {
            let root = roots[index]
            if root != current.root {
                if current.root >= 0 { next[current.root] = current.key }
                current = (root, next[root] ?? 1)
            }
            ids.append(.permanent(entityName: inserts[index].objectID.entityName, store: store, primaryKey: current.key))
            current.key += 1
        }
        return ids
    }

    private func writeToManyChange(_ change: SaveRequest.ToManyChange, resolve: (ObjectID?) -> ObjectID?, in db: Database) throws {
        guard let source = resolve(change.source), let sourceKey = source.primaryKey,
              let entity = layout.model.entity(named: source.entityName),
              let relationship = entity.relationship(named: change.relationship) else { return }
        switch layout.model.storage(of: relationship, in: entity) {
        case .foreignKey:
            return
        case .inverseOfForeignKey(let inverse):
            guard let members = change.orderedMembers, let destination = layout.model.entity(named: relationship.destinationEntityName),
                  let table = layout.table(of: destination),
                  let column = layout.mapping.entities[destination.name]?.orderColumns[inverse.name] else { return }
            for (position, member) in members.compactMap(resolve).enumerated() {
                guard let key = member.primaryKey else { continue }
                try db.execute(sql: "UPDATE \(table) SET \(column) = ? WHERE Z_PK = ?", arguments: [position, key])
            }
        case .joinTable(let joinKey, let sourceIsCanonical):
            guard let join = layout.mapping.joinTables[SchemaMapping.joinKey(joinKey)] else { return }
            let (mine, theirs) = sourceIsCanonical ? (join.canonicalColumn, join.otherColumn) : (join.otherColumn, join.canonicalColumn)
            let insertSQL = "INSERT OR IGNORE INTO \(join.table) (\(mine), \(theirs)) VALUES (?, ?)"
            for member in change.added.compactMap(resolve) {
                guard let key = member.primaryKey else { continue }
                try db.cachedStatement(sql: insertSQL).execute(arguments: [sourceKey, key])
            }
            for member in change.removed.compactMap(resolve) {
                guard let key = member.primaryKey else { continue }
                try db.execute(sql: "DELETE FROM \(join.table) WHERE \(mine) = ? AND \(theirs) = ?", arguments: [sourceKey, key])
            }
            let orderColumn = sourceIsCanonical ? join.canonicalOrderColumn : join.otherOrderColumn
            if let orderColumn, let members = change.orderedMembers {
                for (position, member) in members.compactMap(resolve).enumerated() {
                    guard let key = member.primaryKey else { continue }
                    try db.execute(sql: "UPDATE \(join.table) SET \(orderColumn) = ? WHERE \(mine) = ? AND \(theirs) = ?",
                                   arguments: [position, sourceKey, key])
                }
            }
        }
    }
}
