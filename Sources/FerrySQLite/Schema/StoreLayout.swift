import GRDB
import FerryModel
import FerryStore

/// The mapping turned into ready-to-use SQL and decoding plans, built once
/// when the store opens.
final class StoreLayout: Sendable {
    let model: ManagedObjectModel
    /// The model's version hash (a SHA-256 over every entity), worked out once: every save records it.
    let modelVersionHash: String
    let mapping: SchemaMapping
    /// The store's UUID: object IDs of other stores never match a row here.
    let storeIdentifier: UUID
    let entityNames: [Int: String]
    /// Per root table: the columns a fetch selects, in order (`Z_PK`, `Z_ENT`, `Z_OPT` first).
    let selectColumns: [String: [String]]
    let plans: [String: EntityPlan]

    /// How to write and read one entity's rows (a class, so lookups do not copy it).
    final class EntityPlan: Sendable {
        let entity: EntityDescription
        let rootNumber: Int
        let number: Int
        let table: String
        /// Property index → position in the table's select list (nil: not stored).
        let readPositions: [Int?]
        /// To-one index → position of the destination-entity column, if any.
        let entityColumnPositions: [Int: Int]
        /// `INSERT INTO … (Z_PK, Z_ENT, Z_OPT, …) VALUES (?, ?, 1, …)`.
        let insertSQL: String
        /// The same INSERT with ``bulkInsertRows`` rows of placeholders: SQLite's cost per
        /// statement run (setting up, halting and resetting the program) is about half of a
        /// one-row insert, so a save's runs of inserts go `bulkInsertRows` rows at a time.
        let bulkInsertSQL: String
        /// Rows per ``bulkInsertSQL``: up to 32, fewer for wide entities (at most
        /// ``bulkInsertParameterLimit`` placeholders per statement); 1 means no bulk statement.
        let bulkInsertRows: Int
        /// Placeholders allowed in one bulk statement: SQLite's default limit before 3.32 was 999.
        static let bulkInsertParameterLimit = 999
        /// What each insert placeholder after Z_PK and Z_ENT holds.
        let insertSlots: [InsertSlot]
        /// The properties change sets record (attributes and recorded to-ones), sorted by name.
        let recordedProperties: [RecordedProperty]
        /// `x-coredata://<store>/<Entity>/p`: an object URI without its key.
        let uriPrefix: String
        /// The start of a recorded insert of this entity, up to the key (``ChangeSetWriter/insertHead(entity:uriPrefix:)``).
        let insertHead: [UInt8]
        /// ``uriPrefix`` as written inside a JSON string.
        let uriBytes: [UInt8]

        init(entity: EntityDescription, rootNumber: Int, number: Int, table: String, readPositions: [Int?],
             entityColumnPositions: [Int: Int], insertSQL: String, insertSlots: [InsertSlot],
             recordedProperties: [RecordedProperty], uriPrefix: String) {
            self.entity = entity
            self.rootNumber = rootNumber
            self.number = number
            self.table = table
            self.readPositions = readPositions
            self.entityColumnPositions = entityColumnPositions
            self.insertSQL = insertSQL
            self.insertSlots = insertSlots
            let rows = min(32, max(1, Self.bulkInsertParameterLimit / (2 + insertSlots.count)))
            self.bulkInsertRows = rows
            self.bulkInsertSQL = Self.repeatingValues(of: insertSQL, rows: rows)
            self.recordedProperties = recordedProperties
            self.uriPrefix = uriPrefix
            self.insertHead = ChangeSetWriter.insertHead(entity: entity.name, uriPrefix: uriPrefix)
            self.uriBytes = ChangeSetWriter.uriBytes(uriPrefix)
        }

        /// `INSERT INTO t (…) VALUES (row)` with its `(row)` written `rows` times.
        private static func repeatingValues(of insertSQL: String, rows: Int) -> String {
            guard let values = insertSQL.range(of: " VALUES ") else { return insertSQL }
            let row = insertSQL[values.upperBound...]
            return insertSQL[..<values.upperBound] + repeatElement(row, count: rows).joined(separator: ", ")
        }
    }

    /// A property change sets record, by index in its entity.
    struct RecordedProperty: Sendable {
        let index: Int
        let name: String
        let isToOne: Bool
        /// `"name":`, as a recorded insert's values key.
        let jsonKey: [UInt8]

        init(index: Int, name: String, isToOne: Bool) {
            self.index = index
            self.name = name
            self.isToOne = isToOne
            self.jsonKey = ChangeSetWriter.key(name)
        }
    }

    enum InsertSlot: Sendable {
        case attribute(Int)
        case toOne(Int)
        case toOneEntity(Int)
    }

    init(model: ManagedObjectModel, mapping: SchemaMapping, storeIdentifier: UUID) {
        self.model = model
        self.modelVersionHash = model.versionHash
        self.mapping = mapping
        self.storeIdentifier = storeIdentifier
        self.entityNames = mapping.entityNamesByNumber
        var selects: [String: [String]] = [:]
        for table in Set(mapping.entities.values.map(\.table)) {
            selects[table] = ["Z_PK", "Z_ENT", "Z_OPT"] + SchemaDDL.columns(ofTable: table, mapping: mapping, model: model).map(\.name)
        }
        self.selectColumns = selects
        var plans: [String: EntityPlan] = [:]
        for entity in model.entities {
            guard let entityMapping = mapping.entities[entity.name], let select = selects[entityMapping.table] else { continue }
            let position = Dictionary(uniqueKeysWithValues: select.enumerated().map { ($1, $0) })
            var readPositions: [Int?] = []
            var entityPositions: [Int: Int] = [:]
            var insertColumns: [String] = []
            var slots: [InsertSlot] = []
            for (index, property) in entity.properties.enumerated() {
                let column = property.isPersistent ? entityMapping.columns[property.name] : nil
                readPositions.append(column.flatMap { position[$0] })
                guard let column else { continue }
                insertColumns.append(column)
                switch property {
                case .attribute: slots.append(.attribute(index))
                case .relationship: slots.append(.toOne(index))
                }
                if let entityColumn = entityMapping.entityColumns[property.name] {
                    entityPositions[index] = position[entityColumn]
                    insertColumns.append(entityColumn)
                    slots.append(.toOneEntity(index))
                }
            }
            let columns = (["Z_PK", "Z_ENT", "Z_OPT"] + insertColumns).joined(separator: ", ")
            let placeholders = (["?", "?", "1"] + insertColumns.map { _ in "?" }).joined(separator: ", ")
            plans[entity.name] = EntityPlan(
                entity: entity, rootNumber: mapping.entities[entity.rootName]?.number ?? entityMapping.number,
                number: entityMapping.number, table: entityMapping.table,
                readPositions: readPositions, entityColumnPositions: entityPositions,
                insertSQL: "INSERT INTO \(entityMapping.table) (\(columns)) VALUES (\(placeholders))",
                insertSlots: slots,
                recordedProperties: entity.properties.enumerated().compactMap { index, property -> RecordedProperty? in
                    switch property {
                    case .attribute(let attribute) where attribute.isReplicated:
                        return RecordedProperty(index: index, name: attribute.name, isToOne: false)
                    case .relationship(let relationship) where !relationship.isToMany && model.isRecorded(relationship, in: entity):
                        return RecordedProperty(index: index, name: relationship.name, isToOne: true)
                    default:
                        return nil
                    }
                }.sorted { $0.name.utf8.lexicographicallyPrecedes($1.name.utf8) },
                uriPrefix: "x-coredata://\(storeIdentifier.uuidString)/\(entity.name)/p")
        }
        self.plans = plans
    }

    func table(of entity: EntityDescription) -> String? { mapping.entities[entity.name]?.table }

    func column(of property: String, in entity: EntityDescription) -> String? {
        mapping.entities[entity.name]?.columns[property]
    }

    func number(of entityName: String) -> Int? { mapping.entities[entityName]?.number }

    /// The `Z_ENT` condition selecting `entity` (and its subentities), or nil when
    /// the whole table matches.
    func entityFilter(for entity: EntityDescription, includesSubentities: Bool, alias: String) -> String? {
        if includesSubentities {
            if entity.parentName == nil { return nil }
            return "\(alias).Z_ENT IN (\(mapping.family(of: entity).map(String.init).joined(separator: ", ")))"
        }
        return "\(alias).Z_ENT = \(number(of: entity.name) ?? -1)"
    }

    /// The members of a to-many relationship of a row, in order for ordered relationships, read
    /// on `db` (inside a save's transaction, they include its writes).
    func members(of id: ObjectID, relationship name: String, in db: Database) throws -> [ObjectID] {
        guard let entity = model.entity(named: id.entityName), let relationship = entity.relationship(named: name), relationship.isToMany,
              let key = id.primaryKey, let source = memberSource(of: relationship, in: entity, alias: "d") else { return [] }
        let family = source.familyFilter.map { " AND \($0)" } ?? ""
        let order = source.orderColumn.map { "\($0), " } ?? ""
        let sql = "SELECT d.Z_PK, d.Z_ENT FROM \(source.from) WHERE \(source.ownerColumn) = ?\(family) ORDER BY \(order)d.Z_PK"
        return try Row.fetchAll(db.cachedStatement(sql: sql), arguments: [key]).compactMap { row -> ObjectID? in
            guard let name = entityNames[row[1]] else { return nil }
            return .permanent(entityName: name, store: storeIdentifier, primaryKey: row[0])
        }
    }

    /// How SQL lists the members of a to-many relationship of `owner`, with the
    /// destination table under `alias`: the FROM clause, the qualified column
    /// that holds the owner's `Z_PK`, the order column for ordered relationships,
    /// and the `Z_ENT` condition for the destination's family. Nil for to-one.
    struct MemberSource {
        var from: String
        var ownerColumn: String
        var orderColumn: String?
        var familyFilter: String?
    }

    func memberSource(of relationship: RelationshipDescription, in owner: EntityDescription, alias: String) -> MemberSource? {
        guard let destination = model.entity(named: relationship.destinationEntityName), let table = table(of: destination) else { return nil }
        let family = entityFilter(for: destination, includesSubentities: true, alias: alias)
        switch model.storage(of: relationship, in: owner) {
        case .foreignKey:
            return nil
        case .inverseOfForeignKey(let inverse):
            guard let column = column(of: inverse.name, in: destination) else { return nil }
            let order = mapping.entities[destination.name]?.orderColumns[inverse.name].map { "\(alias).\($0)" }
            return MemberSource(from: "\(table) \(alias)", ownerColumn: "\(alias).\(column)", orderColumn: order, familyFilter: family)
        case .joinTable(let joinKey, let sourceIsCanonical):
            guard let join = mapping.joinTables[SchemaMapping.joinKey(joinKey)] else { return nil }
            let (mine, theirs) = sourceIsCanonical ? (join.canonicalColumn, join.otherColumn) : (join.otherColumn, join.canonicalColumn)
            let joinAlias = alias + "j"
            let order = (sourceIsCanonical ? join.canonicalOrderColumn : join.otherOrderColumn).map { "\(joinAlias).\($0)" }
            return MemberSource(from: "\(join.table) \(joinAlias) JOIN \(table) \(alias) ON \(alias).Z_PK = \(joinAlias).\(theirs)",
                                ownerColumn: "\(joinAlias).\(mine)", orderColumn: order, familyFilter: family)
        }
    }

    /// The select list of a table, qualified with `alias`.
    func selectList(ofTable table: String, alias: String) -> String {
        (selectColumns[table] ?? []).map { "\(alias).\($0)" }.joined(separator: ", ")
    }

    /// Decodes one row selected with ``selectList(ofTable:alias:)``.
    func snapshot(from row: Row, store: UUIDBox) -> RowSnapshot? {
        let number: Int = row[1]
        guard let name = entityNames[number], let plan = plans[name] else { return nil }
        let key: Int64 = row[0]
        let version: Int64 = row[2]
        let count = plan.readPositions.count
        var attributes = [AttributeValue?](repeating: nil, count: count)
        var toOne = [ObjectID?](repeating: nil, count: count)
        for (index, property) in plan.entity.properties.enumerated() {
            guard let position = plan.readPositions[index] else { continue }
            let stored: DatabaseValue = row[position]
            switch property {
            case .attribute(let attribute):
                attributes[index] = ValueCodec.attributeValue(stored, as: attribute.type)
            case .relationship(let relationship):
                guard case .int64(let target) = stored.storage else { continue }
                var destination = relationship.destinationEntityName
                if let entityPosition = plan.entityColumnPositions[index], case .int64(let entityNumber) = (row[entityPosition] as DatabaseValue).storage,
                   let concrete = entityNames[Int(entityNumber)] {
                    destination = concrete
                }
                toOne[index] = .permanent(entityName: destination, store: store.value, primaryKey: target)
            }
        }
        return RowSnapshot(objectID: .permanent(entityName: name, store: store.value, primaryKey: key),
                           version: version, attributes: attributes, toOne: toOne)
    }
}

/// The store UUID, passed to decoding without capturing the store.
struct UUIDBox: Sendable {
    let value: UUID
}

import Foundation
