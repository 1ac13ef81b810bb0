import GRDB
import FerryModel
import FerryStore

/// How a store made with one model version becomes a store of another, inferred the way Core
/// Data's lightweight migration infers a mapping model: entities and properties are matched by
/// name, or by the new one's Renaming ID (`renamingIdentifier`, `elementID` in Xcode's file);
/// what is matched keeps its rows, columns and values; what is new is added; what is gone is
/// removed. Every rule is in docs/STORE.md ("Migration"). A difference no rule covers is refused,
/// named, before anything is written; the whole migration runs in the open's one transaction.
struct SchemaMigration {
    /// What the migration does, inferred by the rules every store shares.
    private let inferred: LightweightMigration
    /// How the stored shape's entities and properties correspond to the new model's.
    private var versions: ModelVersionMapping { inferred.versions }
    /// New entity name → old entity name, for every entity the old model had and the new one keeps.
    private var entityMatches: [String: String] { versions.entityMatches }
    /// New entity name → (new property name → old property name), for kept persistent properties.
    private var propertyMatches: [String: [String: String]] { versions.propertyMatches }
    /// Old entities with no counterpart: their objects are deleted.
    private var removedEntities: [String] { versions.removedEntities }
    /// (new entity, old property) pairs with no counterpart: their values are dropped.
    private var removedProperties: [(entity: String, property: String)] { versions.removedProperties }

    /// For each to-one made to-many: the table and the column its destinations were kept in
    /// (taken out of the mapping by ``apply(to:in:)``, copied to the join table and dropped by ``finish(_:mapping:model:)``).
    private var convertedColumns: [(reference: LightweightMigration.PropertyReference, table: String, column: String)] = []

    /// Every change, in words, for the report (``MigrationReport/changes``).
    var changes: [String] { inferred.changes }

    /// What the migration would delete, in words. Empty when it loses nothing.
    var losses: [String] { inferred.losses }

    /// Infers the migration from a store made with `old` to `model`.
    /// - Throws: ``StoreError/incompatibleModel(path:differences:)`` naming every difference no rule covers.
    init(from old: ModelSignature, to model: ManagedObjectModel, path: String) throws(StoreError) {
        let previousModel: ManagedObjectModel
        do {
            previousModel = try old.model()
        } catch {
            throw StoreError.cannotOpen(path: path, reason: "the model shape stored in the file cannot be read back (\(error)); the file is damaged",
                                        cause: error)
        }
        inferred = LightweightMigration(from: previousModel, to: model)
        guard inferred.problems.isEmpty else { throw StoreError.incompatibleModel(path: path, differences: inferred.problems) }
    }

    // MARK: - Applying

    /// Rewrites `mapping` and the file to match: renames in the mapping only (no row is
    /// rewritten), removed entities' rows deleted and removed properties' columns and join tables
    /// dropped. New entities and properties are left to ``SchemaMapping/extend(for:)`` and
    /// ``SchemaDDL``, which the caller runs next; ``finish(_:mapping:model:)`` then moves changed
    /// types to new columns and fills defaults.
    mutating func apply(to mapping: inout SchemaMapping, in db: Database) throws {
        var columnsToDrop: [(table: String, column: String)] = []
        // To-ones made to-many: their column leaves the mapping (the join table takes its place).
        for reference in inferred.toManyConversions {
            guard let oldEntity = entityMatches[reference.entity], let entity = mapping.entities[oldEntity],
                  let oldName = propertyMatches[reference.entity]?[reference.property], let column = entity.columns[oldName] else { continue }
            convertedColumns.append((reference, entity.table, column))
            for (name, other) in mapping.entities where other.table == entity.table && other.columns[oldName] == column {
                mapping.entities[name]?.columns[oldName] = nil
                if let entityColumn = other.entityColumns[oldName] { columnsToDrop.append((entity.table, entityColumn)) }
                mapping.entities[name]?.entityColumns[oldName] = nil
            }
        }
        var tablesToDrop: [String] = []
        let removedTables = removedEntities.compactMap { mapping.entities[$0]?.table }
        // Removed entities: their rows, their join tables, their key counters.
        for name in removedEntities {
            guard let entity = mapping.entities[name] else { continue }
            try db.execute(sql: "DELETE FROM \(entity.table) WHERE Z_ENT = ?", arguments: [entity.number])
            try db.execute(sql: "DELETE FROM Z_PRIMARYKEY WHERE Z_ENT = ?", arguments: [entity.number])
            for (key, join) in mapping.joinTables where join.canonicalEntity == name || join.otherEntity == name {
                tablesToDrop.append(join.table)
                mapping.joinTables[key] = nil
            }
            mapping.entities[name] = nil
        }
        // Removed properties: columns that no remaining entity uses, and join tables.
        for (entityName, property) in removedProperties {
            guard let oldEntity = entityMatches[entityName], let entity = mapping.entities[oldEntity] else { continue }
            for column in [entity.columns[property], entity.entityColumns[property], entity.orderColumns[property]].compactMap({ $0 }) {
                columnsToDrop.append((entity.table, column))
            }
            mapping.entities[oldEntity]?.columns[property] = nil
            mapping.entities[oldEntity]?.entityColumns[property] = nil
            mapping.entities[oldEntity]?.orderColumns[property] = nil
            if let join = mapping.joinTables["\(oldEntity).\(property)"] {
                tablesToDrop.append(join.table)
                mapping.joinTables["\(oldEntity).\(property)"] = nil
            }
        }
        // Renames: the mapping's keys follow the new names; tables and columns keep theirs.
        let versions = self.versions
        let newEntity = { (old: String) -> String in versions.destinationEntity(ofSource: old) ?? old }
        var renamedEntities: [String: SchemaMapping.EntityMapping] = [:]
        for (name, entity) in mapping.entities {
            let newName = newEntity(name)
            var moved = entity
            let newProperty = { (old: String) -> String in versions.destinationProperty(ofSource: old, inSourceEntity: name) ?? old }
            moved.columns = Dictionary(uniqueKeysWithValues: entity.columns.map { (newProperty($0.key), $0.value) })
            moved.entityColumns = Dictionary(uniqueKeysWithValues: entity.entityColumns.map { (newProperty($0.key), $0.value) })
            moved.orderColumns = Dictionary(uniqueKeysWithValues: entity.orderColumns.map { (newProperty($0.key), $0.value) })
            moved.parent = entity.parent.map(newEntity)
            renamedEntities[newName] = moved
            if newName != name {
                try db.execute(sql: "UPDATE Z_PRIMARYKEY SET Z_NAME = ? WHERE Z_ENT = ?", arguments: [newName, entity.number])
            }
        }
        mapping.entities = renamedEntities
        var renamedJoins: [String: SchemaMapping.JoinTableMapping] = [:]
        for (key, join) in mapping.joinTables {
            let parts = key.split(separator: ".", maxSplits: 1).map(String.init)
            guard parts.count == 2 else { renamedJoins[key] = join; continue }
            let newRelationship = versions.destinationProperty(ofSource: parts[1], inSourceEntity: parts[0]) ?? parts[1]
            var moved = join
            moved.canonicalEntity = newEntity(join.canonicalEntity)
            moved.otherEntity = newEntity(join.otherEntity)
            renamedJoins["\(newEntity(parts[0])).\(newRelationship)"] = moved
        }
        mapping.joinTables = renamedJoins
        // Drop what nothing uses any more (a column may be shared by subentities that keep it).
        for (table, column) in columnsToDrop where !mapping.usedColumns(in: table).contains(column) {
            try db.execute(sql: "DROP INDEX IF EXISTS \(table)_\(column)_INDEX")
            try db.execute(sql: "ALTER TABLE \(table) DROP COLUMN \(column)")
        }
        // And the tables of entities that are all gone.
        let usedTables = Set(mapping.entities.values.map(\.table))
        for table in Set(tablesToDrop + removedTables).sorted() where !usedTables.contains(table) {
            try db.execute(sql: "DROP TABLE IF EXISTS \(table)")
        }
    }

    /// Renames properties in the merge metadata too: the last-write clocks, ordered members'
    /// positions and merged duplicates' carried values are kept by property name, and a renamed
    /// property's must follow it (else an older write made before the rename would win against
    /// the stored value: a test says so).
    func renameHistoryProperties(_ db: Database, mapping: SchemaMapping, model: ManagedObjectModel) throws {
        guard try db.tableExists("Z_FERRY_CLOCK") else { return }
        for entity in model.entities.sorted(by: { $0.name < $1.name }) {
            guard let matches = propertyMatches[entity.name], let table = mapping.entities[entity.name]?.table,
                  let root = mapping.entities[entity.rootName]?.number else { continue }
            let family = mapping.family(of: entity)
            // Rows of this entity (or its subentities), looked up per metadata row by primary key: cost
            // in proportion to the metadata, not to the table (a subquery over the table read all of
            // a 1,000,000-row one for every rename: 0.3 s).
            let rows = "EXISTS (SELECT 1 FROM \(table) t WHERE t.Z_PK = %@.Z_PK AND t.Z_ENT IN (\(family.map(String.init).joined(separator: ", "))))"
            let names = ([entity.name] + entity.subentityNames).map { "'\($0)'" }.joined(separator: ", ")
            for (new, old) in matches.sorted(by: { $0.key < $1.key })
            where new != old && model.declaringEntityName(ofProperty: new, in: entity) == entity.name {
                try db.execute(sql: "UPDATE OR REPLACE Z_FERRY_CLOCK SET Z_PROPERTY = ? WHERE Z_ROOT = ? AND Z_PROPERTY = ? AND "
                                   + rows.replacingOccurrences(of: "%@", with: "Z_FERRY_CLOCK"), arguments: [new, root, old])
                try db.execute(sql: "UPDATE OR REPLACE Z_FERRY_POSITION SET Z_RELATIONSHIP = ? WHERE Z_ROOT = ? AND Z_RELATIONSHIP = ? AND "
                                   + rows.replacingOccurrences(of: "%@", with: "Z_FERRY_POSITION"), arguments: [new, root, old])
                try db.execute(sql: "UPDATE OR REPLACE Z_FERRY_CARRIED SET Z_PROPERTY = ? WHERE Z_PROPERTY = ? AND Z_ENTITY IN (\(names))",
                               arguments: [new, old])
            }
        }
    }

    /// Renames entities in the merge metadata: an object's URI names its entity, so every URI the
    /// store keeps of an object of a renamed entity (the identity map and its runs, positions,
    /// aliases, carried values, restores, tombstones) takes the new name, as change sets made
    /// with the earlier version are translated (``ObjectURIComponents/renamingEntity(of:_:)``).
    func renameHistoryEntities(_ db: Database) throws {
        guard try db.tableExists("Z_FERRY_OBJECT") else { return }
        // `x-coredata://` (13) and a store UUID (36) and `/`: the entity starts at character 51.
        let columns: [(table: String, column: String)] = [
            ("Z_FERRY_OBJECT", "Z_URI"), ("Z_FERRY_RANGE", "Z_PREFIX"), ("Z_FERRY_POSITION", "Z_MEMBER"), ("Z_FERRY_ALIAS", "Z_URI"),
            ("Z_FERRY_ALIAS", "Z_SURVIVOR"), ("Z_FERRY_CARRIED", "Z_URI"), ("Z_FERRY_RESTORE", "Z_URI"), ("Z_FERRY_TOMBSTONE", "Z_URI"),
        ]
        for (new, old) in entityMatches.sorted(by: { $0.key < $1.key }) where new != old {
            for (table, column) in columns {
                try db.execute(sql: """
                    UPDATE OR REPLACE \(table) SET \(column) = substr(\(column), 1, 50) || ? || substr(\(column), 51 + ?)
                    WHERE substr(\(column), 51, ?) = ?
                    """, arguments: [new, old.utf8.count, old.utf8.count + 2, old + "/p"])
            }
            for table in ["Z_FERRY_CARRIED", "Z_FERRY_TOMBSTONE"] {
                try db.execute(sql: "UPDATE \(table) SET Z_ENTITY = ? WHERE Z_ENTITY = ?", arguments: [new, old])
            }
        }
    }

    /// After the new columns exist: moves retyped attributes' values to columns of their new
    /// type, and gives stored nils of newly required attributes the model's default.
    func finish(_ db: Database, mapping: inout SchemaMapping, model: ManagedObjectModel) throws {
        for (reference, type) in inferred.retypedAttributes {
            let (entityName, attribute) = (reference.entity, reference.property)
            guard let entity = mapping.entities[entityName], let old = entity.columns[attribute],
                  let description = model.entity(named: entityName) else { continue }
            let column = mapping.uniqueName("Z" + attribute.uppercased(), in: entity.table)
            try db.execute(sql: "ALTER TABLE \(entity.table) ADD COLUMN \(column) \(SchemaDDL.columnType(type))")
            let cast = type == .decimal ? "CAST(\(old) AS TEXT)" : "CAST(\(old) AS REAL)"
            try db.execute(sql: "UPDATE \(entity.table) SET \(column) = \(cast) WHERE \(old) IS NOT NULL")
            // Every entity that inherits the attribute reads the new column.
            for name in [entityName] + description.subentityNames where mapping.entities[name]?.columns[attribute] == old {
                mapping.entities[name]?.columns[attribute] = column
            }
            if !mapping.usedColumns(in: entity.table).contains(old) {
                try db.execute(sql: "DROP INDEX IF EXISTS \(entity.table)_\(old)_INDEX")
                try db.execute(sql: "ALTER TABLE \(entity.table) DROP COLUMN \(old)")
            }
        }
        for (reference, value) in inferred.defaultsToFill {
            let (entityName, attribute) = (reference.entity, reference.property)
            guard let entity = mapping.entities[entityName], let column = entity.columns[attribute],
                  let description = model.entity(named: entityName) else { continue }
            let numbers = mapping.family(of: description)
            let placeholders = numbers.map { _ in "?" }.joined(separator: ", ")
            try db.execute(sql: "UPDATE \(entity.table) SET \(column) = ? WHERE \(column) IS NULL AND Z_ENT IN (\(placeholders))",
                           arguments: StatementArguments([ValueCodec.databaseValue(value)] + numbers.map(\.databaseValue)))
        }
        // To-ones made to-many: each object's destination becomes its one member, then the old column goes.
        for (reference, table, column) in convertedColumns {
            guard let description = model.entity(named: reference.entity), let relationship = description.relationship(named: reference.property),
                  case .joinTable(let key, true) = model.storage(of: relationship, in: description),
                  let join = mapping.joinTables["\(key.entityName).\(key.relationshipName)"] else { continue }
            let family = mapping.family(of: description).map(String.init).joined(separator: ", ")
            try db.execute(sql: "INSERT INTO \(join.table) (\(join.canonicalColumn), \(join.otherColumn)) " +
                                "SELECT Z_PK, \(column) FROM \(table) WHERE \(column) IS NOT NULL AND Z_ENT IN (\(family))")
            if !mapping.usedColumns(in: table).contains(column) {
                try db.execute(sql: "DROP INDEX IF EXISTS \(table)_\(column)_INDEX")
                try db.execute(sql: "ALTER TABLE \(table) DROP COLUMN \(column)")
            }
        }
        for reference in inferred.derivationsToCompute {
            try derive(reference.property, of: reference.entity, in: db, mapping: mapping, model: model)
        }
    }

    /// Computes a derived attribute for every stored object of an entity, in one statement, as a
    /// save would (the string forms and sums through the same Swift code: `SQLFunctions`).
    private func derive(_ attributeName: String, of entityName: String, in db: Database, mapping: SchemaMapping, model: ManagedObjectModel) throws {
        guard let description = model.entity(named: entityName), let attribute = description.attribute(named: attributeName),
              let form = attribute.derivation?.form, let entity = mapping.entities[entityName],
              let column = entity.columns[attributeName] else { return }
        let table = entity.table
        /// The destination's mapping and entity of one of the entity's relationships.
        func destination(of name: String) -> (RelationshipDescription, EntityDescription, SchemaMapping.EntityMapping)? {
            guard let relationship = description.relationship(named: name), let target = model.entity(named: relationship.destinationEntityName),
                  let stored = mapping.entities[target.name] else { return nil }
            return (relationship, target, stored)
        }
        var arguments: [DatabaseValue] = []
        let value: String
        switch form {
        case .value(let path), .uppercase(let path), .lowercase(let path), .canonical(let path):
            var source: String
            if let name = path.relationship {
                guard let key = entity.columns[name], let (_, _, target) = destination(of: name),
                      let sourceColumn = target.columns[path.attribute] else { return }
                source = "(SELECT d.\(sourceColumn) FROM \(target.table) d WHERE d.Z_PK = \(table).\(key))"
            } else {
                guard let sourceColumn = entity.columns[path.attribute] else { return }
                source = "\(table).\(sourceColumn)"
            }
            if let code = SQLFunctions.code(ofStringForm: form) { source = "ferry_derive_string(\(code), \(source))" }
            value = source
        case .count(let name), .sum(let name, _):
            guard let (relationship, target, stored) = destination(of: name) else { return }
            let members: String
            switch model.storage(of: relationship, in: description) {
            case .inverseOfForeignKey(let inverse):
                guard let key = stored.columns[inverse.name] else { return }
                let family = mapping.family(of: target).map(String.init).joined(separator: ", ")
                members = "FROM \(stored.table) m WHERE m.\(key) = \(table).Z_PK AND m.Z_ENT IN (\(family))"
            case .joinTable(let key, let sourceIsCanonical):
                guard let join = mapping.joinTables["\(key.entityName).\(key.relationshipName)"] else { return }
                let (own, other) = sourceIsCanonical ? (join.canonicalColumn, join.otherColumn) : (join.otherColumn, join.canonicalColumn)
                members = "FROM \(join.table) j JOIN \(stored.table) m ON m.Z_PK = j.\(other) WHERE j.\(own) = \(table).Z_PK"
            case .foreignKey:
                return
            }
            if case .sum(_, let sourceName) = form {
                guard let sourceColumn = stored.columns[sourceName], let sourceType = target.attribute(named: sourceName)?.type else { return }
                value = "COALESCE((SELECT ferry_derive_sum(m.\(sourceColumn), '\(sourceType.xcodeName)', '\(attribute.type.xcodeName)') \(members)), ?)"
                arguments.append(ValueCodec.databaseValue(DerivedSum().value(as: attribute.type)))
            } else {
                value = "(SELECT COUNT(*) \(members))"
            }
        case .now:
            return
        }
        let family = mapping.family(of: description).map(String.init).joined(separator: ", ")
        try db.execute(sql: "UPDATE \(table) SET \(column) = \(value) WHERE Z_ENT IN (\(family))", arguments: StatementArguments(arguments))
    }
}

/// What opening a store with another model version did (``SQLiteStore/migration``).
public struct MigrationReport: Sendable, Equatable {
    /// The version hash of the model the store was made with.
    public let fromVersionHash: String
    /// The version hash of the model it was opened with.
    public let toVersionHash: String
    /// Each change, in words ("renamed Note.stars to rating", "removed entity Tag", …).
    public let changes: [String]
    /// How long the migration took, to the durable commit of the open's transaction.
    public internal(set) var seconds: Double
}
