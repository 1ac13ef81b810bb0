import GRDB
import FerryModel
import FerryStore

/// A fetch request compiled to one SQL statement over an entity's root table.
///
/// Values are always bound as parameters. Key paths through to-one
/// relationships become `LEFT JOIN`s. Comparisons are two-valued, matching the
/// in-memory evaluator: `==` is `IS`, `!=` is `IS NOT` (so nil != 'x' holds),
/// and ordering comparisons with NULL are false. ANY/ALL/NONE and @count on
/// to-many relationships become correlated `EXISTS` / `COUNT(*)` subqueries,
/// each compiled by a nested query with its own alias namespace.
struct SQLQuery {
    let layout: StoreLayout
    let entity: EntityDescription
    /// The alias of the entity's table (`t0` at the top level).
    let baseAlias: String
    private(set) var joins: [String] = []
    private var joinAliases: [String: String] = [:]
    private(set) var arguments: [DatabaseValue] = []
    private var subqueryCount = 0
    /// For the outer statement of an aggregate fetch (``SQLAggregateQuery``): the result's columns
    /// by name, which key paths then name instead of the entity's properties.
    var resultColumns: [String: (column: String, property: PropertyDescription)]?

    init(layout: StoreLayout, entity: EntityDescription, baseAlias: String = "t0") {
        self.layout = layout
        self.entity = entity
        self.baseAlias = baseAlias
    }

    /// `SELECT <columns> FROM … WHERE … ORDER BY … LIMIT … OFFSET …`.
    static func select(_ columns: String, for request: FerryStore.FetchRequest, layout: StoreLayout) throws -> (sql: String, arguments: StatementArguments) {
        try select(for: request, layout: layout) { _ in columns }
    }

    /// How to read one key path's value from a row of a ``selectValues(_:for:layout:)`` statement.
    enum ValueReader {
        /// An attribute of this type at this position.
        case attribute(position: Int, type: AttributeType)
        /// A to-one destination: its Z_PK and Z_ENT at these positions.
        case object(keyPosition: Int, entityPosition: Int)
    }

    /// The statement behind a dictionary fetch: the values at `keyPaths`, joining
    /// to-one hops (and a to-one's destination, for its entity number).
    static func selectValues(_ keyPaths: [String], for request: FerryStore.FetchRequest, layout: StoreLayout)
        throws -> (sql: String, arguments: StatementArguments, readers: [ValueReader]) {
        var readers: [ValueReader] = []
        let (sql, arguments) = try select(for: request, layout: layout) { query in
            var columns: [String] = []
            for keyPath in keyPaths {
                let path = try ResolvedKeyPath.resolve(keyPath, from: query.entity, in: layout.model)
                switch path.final {
                case .attribute(let attribute):
                    let (column, _) = try query.columnExpression(keyPath)
                    readers.append(.attribute(position: columns.count, type: attribute.type))
                    columns.append(column)
                case .relationship(let relationship):
                    let alias = try query.aliasAfterHops(path.hops + [relationship], keyPath: keyPath)
                    readers.append(.object(keyPosition: columns.count, entityPosition: columns.count + 1))
                    columns += ["\(alias).Z_PK", "\(alias).Z_ENT"]
                }
            }
            return columns.isEmpty ? "t0.Z_PK" : columns.joined(separator: ", ")
        }
        return (sql, arguments, readers)
    }

    private static func select(for request: FerryStore.FetchRequest, layout: StoreLayout,
                               columns: (inout SQLQuery) throws -> String) throws -> (sql: String, arguments: StatementArguments) {
        guard let entity = layout.model.entity(named: request.entityName), let table = layout.table(of: entity) else {
            throw QueryError.unknownEntity(request.entityName)
        }
        var query = SQLQuery(layout: layout, entity: entity)
        let selected = try columns(&query)
        var conditions: [String] = []
        if let filter = layout.entityFilter(for: entity, includesSubentities: request.includesSubentities, alias: "t0") {
            conditions.append(filter)
        }
        if let predicate = request.predicate { conditions.append(try query.compile(predicate)) }
        var order: [String] = []
        for descriptor in request.sortDescriptors {
            let expression = try query.sortExpression(descriptor)
            order.append(expression + (descriptor.ascending ? " ASC" : " DESC"))
        }
        order.append("t0.Z_PK ASC")
        var sql = "SELECT \(selected) FROM \(table) t0"
        if !query.joins.isEmpty { sql += " " + query.joins.joined(separator: " ") }
        if !conditions.isEmpty { sql += " WHERE " + conditions.map { "(\($0))" }.joined(separator: " AND ") }
        sql += " ORDER BY " + order.joined(separator: ", ")
        if request.fetchLimit > 0 || request.fetchOffset > 0 {
            sql += " LIMIT \(request.fetchLimit > 0 ? request.fetchLimit : -1) OFFSET \(max(request.fetchOffset, 0))"
        }
        return (sql, StatementArguments(query.arguments))
    }

    mutating func compile(_ predicate: FetchPredicate) throws -> String {
        switch predicate {
        case .alwaysTrue: return "1"
        case .alwaysFalse: return "0"
        case .and(let parts):
            guard !parts.isEmpty else { return "1" }
            return try parts.map { "(\(try compile($0)))" }.joined(separator: " AND ")
        case .or(let parts):
            guard !parts.isEmpty else { return "0" }
            return try parts.map { "(\(try compile($0)))" }.joined(separator: " OR ")
        case .not(let inner):
            return "NOT (\(try compile(inner)))"
        case .comparison(let keyPath, let op, let value):
            return try comparison(keyPath, op, value)
        case .keyPathComparison(let keyPath, let op, let otherKeyPath):
            let (left, leftProperty) = try columnExpression(keyPath)
            let (right, rightProperty) = try columnExpression(otherKeyPath)
            // Decimals are stored as text: compare them (and anything beside them) as numbers.
            let numeric = leftProperty.attribute?.type == .decimal || rightProperty.attribute?.type == .decimal
            let (l, r) = numeric ? ("CAST(\(left) AS REAL)", "CAST(\(right) AS REAL)") : (left, right)
            switch op {
            case .equal: return "\(l) IS \(r)"
            case .notEqual: return "\(l) IS NOT \(r)"
            default: return "ifnull(\(l) \(op.sqlOperator) \(r), 0)"
            }
        case .stringMatch(let keyPath, let op, let pattern, let options):
            let (column, _) = try columnExpression(keyPath)
            arguments.append(SQLFunctions.code(of: op).databaseValue)
            arguments.append(Int64(options.rawValue).databaseValue)
            arguments.append(pattern.databaseValue)
            return "ferry_match(?, ?, \(column), ?)"
        case .membership(let keyPath, let values):
            let (column, final) = try columnExpression(keyPath)
            var parts: [String] = []
            let present = values.filter { $0 != .null }
            if !present.isEmpty {
                for value in present {
                    switch value {
                    case .attribute(let constant): arguments.append(bindable(constant, for: final))
                    case .object(let id): arguments.append((id.primaryKey ?? -1).databaseValue)
                    case .null: continue
                    }
                }
                // (Not `ifnull(… IN …, 0)`, which no index serves; the NULL test keeps NOT right.)
                parts.append("(\(column) IN (\(present.map { _ in "?" }.joined(separator: ", "))) AND \(column) IS NOT NULL)")
            }
            if present.count != values.count { parts.append("\(column) IS NULL") }
            return parts.isEmpty ? "0" : parts.joined(separator: " OR ")
        case .quantified(let quantifier, let keyPath, let inner):
            let (from, link, alias, destination) = try toManySource(keyPath)
            var nested = SQLQuery(layout: layout, entity: destination, baseAlias: alias)
            let condition = try nested.compile(inner)
            arguments += nested.arguments
            let fromClause = ([from] + nested.joins).joined(separator: " ")
            switch quantifier {
            case .any: return "EXISTS (SELECT 1 FROM \(fromClause) WHERE \(link) AND (\(condition)))"
            case .all: return "NOT EXISTS (SELECT 1 FROM \(fromClause) WHERE \(link) AND NOT (\(condition)))"
            case .none: return "NOT EXISTS (SELECT 1 FROM \(fromClause) WHERE \(link) AND (\(condition)))"
            }
        case .selfIn(let ids):
            // Group the keys by entity; IDs of other stores or of entities outside this table never match.
            var keysByEntity: [Int: [Int64]] = [:]
            for id in ids where id.storeIdentifier == layout.storeIdentifier {
                guard let key = id.primaryKey, let idEntity = layout.model.entity(named: id.entityName),
                      idEntity.isKind(of: entity.rootName), let number = layout.number(of: id.entityName) else { continue }
                keysByEntity[number, default: []].append(key)
            }
            guard !keysByEntity.isEmpty else { return "0" }
            var groups: [String] = []
            for (number, keys) in keysByEntity.sorted(by: { $0.key < $1.key }) {
                arguments.append(Int64(number).databaseValue)
                arguments += keys.map(\.databaseValue)
                groups.append("(\(baseAlias).Z_ENT = ? AND \(baseAlias).Z_PK IN (\(keys.map { _ in "?" }.joined(separator: ", "))))")
            }
            return groups.joined(separator: " OR ")
        case .aggregate(let function, let keyPath, let key, let op, let value):
            let (from, link, alias, destination) = try toManySource(keyPath)
            guard let column = layout.column(of: key, in: destination) else {
                throw QueryError.unknownKey(entity: destination.name, key: key, keyPath: key)
            }
            let isDecimal = destination.attribute(named: key)?.type == .decimal
            let operand = isDecimal ? "CAST(\(alias).\(column) AS REAL)" : "\(alias).\(column)"
            let call = switch function {
            case .sum: "TOTAL(\(operand))"
            case .avg: "AVG(\(operand))"
            case .min: "MIN(\(operand))"
            case .max: "MAX(\(operand))"
            }
            let aggregate = "(SELECT \(call) FROM \(from) WHERE \(link))"
            switch value {
            case .null:
                switch op {
                case .equal: return "\(aggregate) IS NULL"
                case .notEqual: return "\(aggregate) IS NOT NULL"
                default: return "0"
                }
            case .attribute(let constant):
                arguments.append(ValueCodec.databaseValue(constant.numericValue.map(AttributeValue.double) ?? constant))
            case .object:
                return "0"
            }
            switch op {
            case .equal: return "\(aggregate) IS ?"
            case .notEqual: return "\(aggregate) IS NOT ?"
            default: return "ifnull(\(aggregate) \(op.sqlOperator) ?, 0)"
            }
        case .subqueryCount(let keyPath, let inner, let op, let number):
            let (from, link, alias, destination) = try toManySource(keyPath)
            var nested = SQLQuery(layout: layout, entity: destination, baseAlias: alias)
            let condition = try nested.compile(inner)
            arguments += nested.arguments
            arguments.append(number.databaseValue)
            let fromClause = ([from] + nested.joins).joined(separator: " ")
            return "(SELECT COUNT(*) FROM \(fromClause) WHERE \(link) AND (\(condition))) \(op.sqlOperator) ?"
        case .count(let keyPath, let op, let number):
            let (from, link, _, _) = try toManySource(keyPath)
            arguments.append(number.databaseValue)
            return "(SELECT COUNT(*) FROM \(from) WHERE \(link)) \(op.sqlOperator) ?"
        }
    }

    /// The FROM clause and correlation condition that list the members of the
    /// to-many relationship at `keyPath`, joining to-one hops in this query first.
    private mutating func toManySource(_ keyPath: String) throws -> (from: String, link: String, alias: String, destination: EntityDescription) {
        let path = try ToManyKeyPath.resolve(keyPath, from: entity, in: layout.model)
        let owner = try aliasAfterHops(path.hops, keyPath: keyPath)
        subqueryCount += 1
        let alias = "\(baseAlias)s\(subqueryCount)"
        guard let source = layout.memberSource(of: path.relationship, in: path.owner, alias: alias) else {
            throw QueryError.unknownKey(entity: path.owner.name, key: path.relationship.name, keyPath: keyPath)
        }
        let family = source.familyFilter.map { " AND \($0)" } ?? ""
        return (source.from, "\(source.ownerColumn) = \(owner).Z_PK\(family)", alias, path.destination)
    }

    private mutating func comparison(_ keyPath: String, _ op: ComparisonOperator, _ value: PredicateValue) throws -> String {
        let (column, final) = try columnExpression(keyPath)
        let isDecimal = final.attribute?.type == .decimal
        let bound: DatabaseValue
        switch value {
        case .null:
            switch op {
            case .equal: return "\(column) IS NULL"
            case .notEqual: return "\(column) IS NOT NULL"
            default: return "0"
            }
        case .attribute(let attributeValue):
            bound = bindable(attributeValue, for: final)
        case .object(let id):
            bound = (id.primaryKey ?? -1).databaseValue
        }
        if isDecimal && op != .equal && op != .notEqual {
            arguments.append(bound)
            return "ifnull(CAST(\(column) AS REAL) \(op.sqlOperator) CAST(? AS REAL), 0)"
        }
        arguments.append(bound)
        switch op {
        case .equal: return "\(column) IS ?"
        case .notEqual: return "\(column) IS NOT ?"
        default: return "ifnull(\(column) \(op.sqlOperator) ?, 0)"
        }
    }

    /// Encodes a constant the way the column stores it (e.g. a decimal as its text).
    private func bindable(_ value: AttributeValue, for property: PropertyDescription) -> DatabaseValue {
        guard let attribute = property.attribute, let converted = AttributeValue.coerce(value, to: attribute.type) else {
            return ValueCodec.databaseValue(value)
        }
        return ValueCodec.databaseValue(converted)
    }

    mutating func sortExpression(_ descriptor: FetchSortDescriptor) throws -> String {
        let (column, final) = try columnExpression(descriptor.keyPath)
        switch final.attribute?.type {
        case .decimal?: return "CAST(\(column) AS REAL)"
        case .string? where descriptor.caseInsensitive: return "\(column) COLLATE ferry_casefold"
        default: return column
        }
    }

    /// The qualified column at the end of a key path, adding joins for its hops.
    mutating func columnExpression(_ keyPath: String) throws -> (String, PropertyDescription) {
        if let resultColumns {
            guard let named = resultColumns[keyPath] else { throw QueryError.unknownKey(entity: "result", key: keyPath, keyPath: keyPath) }
            return (named.column, named.property)
        }
        let path = try ResolvedKeyPath.resolve(keyPath, from: entity, in: layout.model)
        let alias = try aliasAfterHops(path.hops, keyPath: keyPath)
        guard let column = layout.column(of: path.final.name, in: path.finalEntity) else {
            throw QueryError.unknownKey(entity: path.finalEntity.name, key: path.final.name, keyPath: keyPath)
        }
        return ("\(alias).\(column)", path.final)
    }

    /// The alias of the table reached by following to-one `hops`, joining as needed.
    mutating func aliasAfterHops(_ hops: [RelationshipDescription], keyPath: String) throws -> String {
        var alias = baseAlias
        var current = entity
        var prefix = ""
        for hop in hops {
            prefix += hop.name + "."
            guard let column = layout.column(of: hop.name, in: current),
                  let destination = layout.model.entity(named: hop.destinationEntityName),
                  let table = layout.table(of: destination) else {
                throw QueryError.unknownKey(entity: current.name, key: hop.name, keyPath: keyPath)
            }
            if let existing = joinAliases[prefix] {
                alias = existing
            } else {
                let next = "\(baseAlias)t\(joinAliases.count + 1)"
                joins.append("LEFT JOIN \(table) \(next) ON \(next).Z_PK = \(alias).\(column)")
                joinAliases[prefix] = next
                alias = next
            }
            current = destination
        }
        return alias
    }
}

extension ComparisonOperator {
    var sqlOperator: String {
        switch self {
        case .equal: "="
        case .notEqual: "<>"
        case .less: "<"
        case .lessOrEqual: "<="
        case .greater: ">"
        case .greaterOrEqual: ">="
        }
    }
}
