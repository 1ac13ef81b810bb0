import Foundation
import GRDB
import FerryModel
import FerryStore

extension SQLiteStore {
    /// `ferry dump`'s lines, exactly as ``StoreDump`` writes them, streamed from SQL in URI order
    /// with memory that does not grow with the store: one query per concrete entity computes each
    /// object's origin URI, its to-one targets' and its to-many members' URIs, and sorts by URI
    /// (SQLite's sorter spills to temporary files); the per-entity streams are merged by URI here.
    /// `progress` is called with the number of lines written so far, every 10,000 lines.
    public func streamDump(progress: ((Int) -> Void)? = nil, _ emit: (String) throws -> Void) throws {
        let layout = self.layout
        try read { db in
            let plans = try DumpPlan.plans(layout: layout, db: db)
            var streams: [(plan: DumpPlan, cursor: RowCursor, head: (uri: String, line: String)?)] = []
            for plan in plans {
                let cursor = try Row.fetchCursor(db, sql: plan.sql)
                streams.append((plan, cursor, try cursor.next().map(plan.line)))
            }
            var written = 0
            while true {
                // The stream whose next object has the smallest URI (byte order, as SQLite sorted each one).
                var next: Int?
                for index in streams.indices {
                    guard let head = streams[index].head else { continue }
                    if let best = next, let bestHead = streams[best].head,
                       !head.uri.utf8.lexicographicallyPrecedes(bestHead.uri.utf8) { continue }
                    next = index
                }
                guard let index = next, let head = streams[index].head else { break }
                try emit(head.line)
                written += 1
                if written % 10_000 == 0 { progress?(written) }
                streams[index].head = try streams[index].cursor.next().map(streams[index].plan.line)
            }
        }
    }
}

/// One concrete entity's dump query and how to turn its rows into lines.
private struct DumpPlan {
    let entity: EntityDescription
    let sql: String
    /// ``linePrefix(_:)`` of the entity.
    let prefix: [UInt8]
    /// Per persistent property, sorted by name: its JSON key (quoted, with the colon) and where its value is.
    let properties: [(key: String, source: Source)]

    enum Source {
        /// A stored attribute: its column in the row, and its type.
        case attribute(column: Int, type: AttributeType)
        /// An attribute with no column (none stored): always null.
        case null
        /// A to-one: the column holding the target's origin URI (null when none).
        case uri(column: Int)
        /// A to-many: the column holding the members' URIs joined by U+001F, in order.
        case members(column: Int)
    }

    static func plans(layout: StoreLayout, db: Database) throws -> [DumpPlan] {
        let singles = try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM Z_FERRY_OBJECT)") ?? true
        let runs = try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM Z_FERRY_RANGE)") ?? true
        // `Z_ENT` → entity name, for an expression giving the number.
        let entityNames = layout.entityNames.sorted { $0.key < $1.key }.map { "WHEN \($0.key) THEN '\($0.value)'" }.joined(separator: " ")
        var plans: [DumpPlan] = []
        for entity in layout.model.entities where !entity.isAbstract {
            guard let plan = layout.plans[entity.name] else { continue }
            func uri(root: Int, key: String, entityNumber: String?, entityName: String) -> String {
                let name = entityNumber.map { "CASE \($0) \(entityNames) END" } ?? "'\(entityName)'"
                let own = "'x-coredata://\(layout.storeIdentifier.uuidString)/' || \(name) || '/p' || \(key)"
                // A single entry wins over a run; neither: the object was born here (each probe only when its table has rows).
                var choices: [String] = []
                if singles { choices.append("(SELECT o.Z_URI FROM Z_FERRY_OBJECT o WHERE o.Z_ROOT = \(root) AND o.Z_PK = \(key))") }
                if runs {
                    choices.append("""
                        (SELECT CASE WHEN \(key) < r.Z_PK + r.Z_COUNT THEN r.Z_PREFIX || (r.Z_FIRST + \(key) - r.Z_PK) END \
                        FROM Z_FERRY_RANGE r WHERE r.Z_ROOT = \(root) AND r.Z_PK <= \(key) ORDER BY r.Z_PK DESC LIMIT 1)
                        """)
                }
                return choices.isEmpty ? own : "coalesce(\(choices.joined(separator: ", ")), \(own))"
            }
            var columns = ["\(uri(root: plan.rootNumber, key: "t.Z_PK", entityNumber: nil, entityName: entity.name)) AS u"]
            var properties: [(key: String, source: Source)] = []
            let tableColumns = layout.selectColumns[plan.table] ?? []
            // In name order (byte order), as the generic dump sorts its keys.
            let persistent = entity.properties.enumerated().filter { $0.element.isPersistent }
                .sorted { $0.element.name.utf8.lexicographicallyPrecedes($1.element.name.utf8) }
            for (index, property) in persistent {
                var key = ""
                JSONValue.appendQuoted(property.name, to: &key)
                key += ":"
                switch property {
                case .attribute(let attribute):
                    if let position = plan.readPositions[index] {
                        columns.append("t.\(tableColumns[position])")
                        properties.append((key, .attribute(column: columns.count - 1, type: attribute.type)))
                    } else {
                        properties.append((key, .null))
                    }
                case .relationship(let relationship) where !relationship.isToMany:
                    guard let position = plan.readPositions[index], let destination = layout.model.entity(named: relationship.destinationEntityName),
                          let destinationRoot = layout.plans[destination.name]?.rootNumber else {
                        properties.append((key, .null))
                        continue
                    }
                    let foreignKey = "t.\(tableColumns[position])"
                    let entityNumber = plan.entityColumnPositions[index].map { "t.\(tableColumns[$0])" }
                    columns.append("CASE WHEN \(foreignKey) IS NULL THEN NULL ELSE "
                                   + uri(root: destinationRoot, key: foreignKey, entityNumber: entityNumber, entityName: destination.name) + " END")
                    properties.append((key, .uri(column: columns.count - 1)))
                case .relationship(let relationship):
                    guard let destination = layout.model.entity(named: relationship.destinationEntityName),
                          let destinationRoot = layout.plans[destination.name]?.rootNumber,
                          let source = layout.memberSource(of: relationship, in: entity, alias: "d") else {
                        properties.append((key, .members(column: -1)))
                        continue
                    }
                    let member = uri(root: destinationRoot, key: "d.Z_PK", entityNumber: "d.Z_ENT", entityName: destination.name)
                    let family = source.familyFilter.map { " AND \($0)" } ?? ""
                    // Ordered ones in their order (as the store reads them); the others by URI, byte order.
                    let order = relationship.isOrdered ? (source.orderColumn.map { "\($0), " } ?? "") + "d.Z_PK" : "m"
                    columns.append("""
                        (SELECT group_concat(m, char(31)) FROM (SELECT \(member) AS m FROM \(source.from) \
                        WHERE \(source.ownerColumn) = t.Z_PK\(family) ORDER BY \(order)))
                        """)
                    properties.append((key, .members(column: columns.count - 1)))
                }
            }
            let number = plan.number
            let sql = "SELECT \(columns.joined(separator: ", ")) FROM \(plan.table) t WHERE t.Z_ENT = \(number) ORDER BY u"
            plans.append(DumpPlan(entity: entity, sql: sql, prefix: linePrefix(entity), properties: properties))
        }
        return plans
    }

    /// The row's URI and its line: `{"entity":…,"uri":…,"values":{…}}` (``StoreDump``'s form),
    /// written as bytes (the dump's cost is mostly here and in SQLite).
    func line(_ row: Row) -> (uri: String, line: String) {
        let uri: String = row[0]
        var line: [UInt8] = []
        line.reserveCapacity(256)
        line.append(contentsOf: prefix)
        Self.appendQuoted(uri, to: &line)
        line.append(contentsOf: Self.valuesOpening)
        for (index, property) in properties.enumerated() {
            if index > 0 { line.append(0x2C) }
            line.append(contentsOf: property.key.utf8)
            switch property.source {
            case .attribute(let column, let type):
                switch ValueCodec.attributeValue(row[column], as: type) {
                case .integer(let value)?: line.append(contentsOf: String(value).utf8)
                case .string(let value)?: Self.appendQuoted(value, to: &line)
                case let value: line.append(contentsOf: AttributeJSON.encode(value).text.utf8)
                }
            case .null:
                line.append(contentsOf: Self.null)
            case .uri(let column):
                if let target: String = row[column] { Self.appendQuoted(target, to: &line) } else { line.append(contentsOf: Self.null) }
            case .members(let column):
                line.append(0x5B)
                if column >= 0, let joined: String = row[column], !joined.isEmpty {
                    Self.appendMembers(joined, to: &line)
                }
                line.append(0x5D)
            }
        }
        line.append(contentsOf: Self.closing)
        return (uri, String(decoding: line, as: UTF8.self))
    }

    private static let valuesOpening = Array(#","values":{"#.utf8)
    private static let null = Array("null".utf8)
    private static let closing = Array("}}".utf8)

    /// `{"entity":"<name>","uri":`, the same for every line of the entity.
    static func linePrefix(_ entity: EntityDescription) -> [UInt8] {
        var text = #"{"entity":"#
        JSONValue.appendQuoted(entity.name, to: &text)
        text += #","uri":"#
        return Array(text.utf8)
    }

    /// `text` as a JSON string literal, as ``JSONValue`` writes it (only `"`, `\` and control
    /// characters escaped).
    static func appendQuoted(_ text: String, to line: inout [UInt8]) {
        var text = text
        let plain = text.withUTF8 { bytes -> Bool in
            for byte in bytes where byte < 0x20 || byte == 0x22 || byte == 0x5C { return false }
            line.append(0x22)
            line.append(contentsOf: bytes)
            line.append(0x22)
            return true
        }
        if !plain {
            var quoted = ""
            JSONValue.appendQuoted(text, to: &quoted)
            line.append(contentsOf: quoted.utf8)
        }
    }

    /// Member URIs joined by U+001F, as JSON strings separated by commas.
    static func appendMembers(_ joined: String, to line: inout [UInt8]) {
        var joined = joined
        let plain = joined.withUTF8 { bytes -> Bool in
            for byte in bytes where (byte < 0x20 && byte != 0x1F) || byte == 0x22 || byte == 0x5C { return false }
            line.append(0x22)
            for byte in bytes {
                if byte == 0x1F {
                    line.append(0x22)
                    line.append(0x2C)
                    line.append(0x22)
                } else {
                    line.append(byte)
                }
            }
            line.append(0x22)
            return true
        }
        if !plain {
            for (position, member) in joined.utf8.split(separator: 0x1F, omittingEmptySubsequences: false).enumerated() {
                if position > 0 { line.append(0x2C) }
                appendQuoted(String(decoding: member, as: UTF8.self), to: &line)
            }
        }
    }
}
