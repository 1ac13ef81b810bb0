import GRDB
import FerryModel
import FerryStore

/// A fetch request compiled to one SQL statement over an entity's root table.
///
/// Values are always bound as parameters. Key paths through to-one
/// relationships become `LEFT JOIN`s. Comparisons are two-valued, matching the
/// in-memory evaluator: `==` is `IS`, `!=` is `IS NOT` (so nil != 'x' holds),
/// and ordering comparisons with NULL are false.
struct SQLQuery {
    let layout: StoreLayout
    let entity: EntityDescription
    private(set) var joins: [String] = []
    private var joinAliases: [String: String] = [:]
    private(set) var arguments: [DatabaseValue] = []

    init(layout: StoreLayout, entity: EntityDescription) {
        self.layout = layout
        self.entity = entity
    }

    /// `SELECT <columns> FROM … WHERE … ORDER BY … LIMIT … OFFSET …`.
    static func select(_ columns: String, for request: FerryStore.FetchRequest, layout: StoreLayout) throws -> (sql: String, arguments: StatementArguments) {
        guard let entity = layout.model.entity(named: request.entityName), let table = layout.table(of: entity) else {
            throw QueryError.unknownEntity(request.entityName)
        }
        var query = SQLQuery(layout: layout, entity: entity)
        var conditions: [String] = []
        if let filter = layout.entityFilter(for: entity, includesSubentities: request.includesSubentities, alias: "t0") {
            conditions.append(filter)
        }
        if let predicate = request.predicate { conditions.append(try query.compile(predicate)) }
        var order: [String] = []
        for descriptor in request.sortDescriptors {
            let expression = try query.sortExpression(descriptor.keyPath)
            order.append(expression + (descriptor.ascending ? " ASC" : " DESC"))
        }
        order.append("t0.Z_PK ASC")
        var sql = "SELECT \(columns) FROM \(table) t0"
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
        case .stringMatch(let keyPath, let op, let pattern, let options):
            let (column, _) = try columnExpression(keyPath)
            arguments.append(op.rawValue.databaseValue)
            arguments.append(Int64(options.rawValue).databaseValue)
            arguments.append(pattern.databaseValue)
            return "ifnull(ferry_match(?, ?, \(column), ?), 0)"
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
                parts.append("ifnull(\(column) IN (\(present.map { _ in "?" }.joined(separator: ", "))), 0)")
            }
            if present.count != values.count { parts.append("\(column) IS NULL") }
            return parts.isEmpty ? "0" : parts.joined(separator: " OR ")
        }
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

    private mutating func sortExpression(_ keyPath: String) throws -> String {
        let (column, final) = try columnExpression(keyPath)
        return final.attribute?.type == .decimal ? "CAST(\(column) AS REAL)" : column
    }

    /// The qualified column at the end of a key path, adding joins for its hops.
    private mutating func columnExpression(_ keyPath: String) throws -> (String, PropertyDescription) {
        let path = try ResolvedKeyPath.resolve(keyPath, from: entity, in: layout.model)
        var alias = "t0"
        var current = entity
        var prefix = ""
        for hop in path.hops {
            prefix += hop.name + "."
            guard let column = layout.column(of: hop.name, in: current),
                  let destination = layout.model.entity(named: hop.destinationEntityName),
                  let table = layout.table(of: destination) else {
                throw QueryError.unknownKey(entity: current.name, key: hop.name, keyPath: keyPath)
            }
            if let existing = joinAliases[prefix] {
                alias = existing
            } else {
                let next = "t\(joinAliases.count + 1)"
                joins.append("LEFT JOIN \(table) \(next) ON \(next).Z_PK = \(alias).\(column)")
                joinAliases[prefix] = next
                alias = next
            }
            current = destination
        }
        guard let column = layout.column(of: path.final.name, in: path.finalEntity) else {
            throw QueryError.unknownKey(entity: path.finalEntity.name, key: path.final.name, keyPath: keyPath)
        }
        return ("\(alias).\(column)", path.final)
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
