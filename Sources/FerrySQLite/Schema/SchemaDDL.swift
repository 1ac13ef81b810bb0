import FerryModel
import FerryStore

/// The SQL that creates (or extends) the tables a mapping describes.
enum SchemaDDL {
    static let metadataTables = [
        "CREATE TABLE Z_PRIMARYKEY (Z_ENT INTEGER PRIMARY KEY, Z_NAME VARCHAR, Z_SUPER INTEGER, Z_MAX INTEGER)",
        "CREATE TABLE Z_METADATA (Z_VERSION INTEGER PRIMARY KEY, Z_UUID VARCHAR(255), Z_PLIST BLOB)",
        "CREATE TABLE Z_MODELCACHE (Z_CONTENT BLOB)",
    ]

    /// SQLite column type per attribute type. Decimals are TEXT so that no
    /// digit is lost (a NUMERIC column would turn them into doubles).
    static func columnType(_ type: AttributeType) -> String {
        switch type {
        case .integer16, .integer32, .integer64, .boolean: "INTEGER"
        case .double, .float: "FLOAT"
        case .decimal: "TEXT"
        case .string, .uri: "VARCHAR"
        case .date: "TIMESTAMP"
        case .binaryData, .uuid, .transformable: "BLOB"
        }
    }

    /// Columns a table needs, by name, with their types, for every entity stored in it.
    static func columns(ofTable table: String, mapping: SchemaMapping, model: ManagedObjectModel) -> [(name: String, type: String)] {
        var result: [String: String] = [:]
        for (name, entityMapping) in mapping.entities where entityMapping.table == table {
            guard let entity = model.entity(named: name) else { continue }
            for property in entity.properties where property.isPersistent {
                switch property {
                case .attribute(let attribute):
                    if let column = entityMapping.columns[attribute.name] { result[column] = columnType(attribute.type) }
                case .relationship(let relationship):
                    if let column = entityMapping.columns[relationship.name] { result[column] = "INTEGER" }
                    if let column = entityMapping.entityColumns[relationship.name] { result[column] = "INTEGER" }
                    if let column = entityMapping.orderColumns[relationship.name] { result[column] = "INTEGER" }
                }
            }
        }
        return result.keys.sorted().map { ($0, result[$0] ?? "") }
    }

    /// Statements creating every table of the mapping that `existing` lacks, and
    /// adding the columns existing tables lack.
    /// `existingIndexes` (names) are not created again.
    static func statements(mapping: SchemaMapping, model: ManagedObjectModel,
                           existingColumns: [String: Set<String>], existingIndexes: Set<String> = []) -> [String] {
        var statements: [String] = []
        let tables = Set(mapping.entities.values.map(\.table)).sorted()
        for table in tables {
            let columns = self.columns(ofTable: table, mapping: mapping, model: model)
            if let present = existingColumns[table] {
                for column in columns where !present.contains(column.name) {
                    statements.append("ALTER TABLE \(table) ADD COLUMN \(column.name) \(column.type)")
                }
            } else {
                let definitions = ["Z_PK INTEGER PRIMARY KEY", "Z_ENT INTEGER", "Z_OPT INTEGER"]
                    + columns.map { "\($0.name) \($0.type)" }
                statements.append("CREATE TABLE \(table) (\(definitions.joined(separator: ", ")))")
            }
        }
        for join in mapping.joinTables.values.sorted(by: { $0.table < $1.table }) where existingColumns[join.table] == nil {
            var definitions = ["\(join.canonicalColumn) INTEGER", "\(join.otherColumn) INTEGER"]
            if let order = join.canonicalOrderColumn { definitions.append("\(order) INTEGER") }
            if let order = join.otherOrderColumn { definitions.append("\(order) INTEGER") }
            definitions.append("PRIMARY KEY (\(join.canonicalColumn), \(join.otherColumn))")
            statements.append("CREATE TABLE \(join.table) (\(definitions.joined(separator: ", ")))")
            statements.append("CREATE INDEX IF NOT EXISTS \(join.table)_\(join.otherColumn)_INDEX ON \(join.table) (\(join.otherColumn))")
        }
        statements += indexes(mapping: mapping, model: model, except: existingIndexes)
        return statements
    }

    /// Indexes on foreign keys, on `Z_ENT` of shared tables, and on attributes marked indexed.
    static func indexes(mapping: SchemaMapping, model: ManagedObjectModel, except existing: Set<String> = []) -> [String] {
        var indexed: Set<[String]> = []
        for (name, entityMapping) in mapping.entities {
            guard let entity = model.entity(named: name) else { continue }
            if !entity.subentityNames.isEmpty || entity.parentName != nil { indexed.insert([entityMapping.table, "Z_ENT"]) }
            for property in entity.properties where property.isPersistent {
                guard let column = entityMapping.columns[property.name] else { continue }
                switch property {
                case .relationship: indexed.insert([entityMapping.table, column])
                case .attribute(let attribute) where attribute.isIndexed: indexed.insert([entityMapping.table, column])
                default: continue
                }
            }
        }
        return indexed.sorted { $0.joined() < $1.joined() }.filter { !existing.contains("\($0[0])_\($0[1])_INDEX") }.map { pair in
            "CREATE INDEX IF NOT EXISTS \(pair[0])_\(pair[1])_INDEX ON \(pair[0]) (\(pair[1]))"
        }
    }
}
