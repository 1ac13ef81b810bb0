import GRDB
import FerryModel
import FerryStore

/// An aggregate fetch (``FetchRequest/expressions``, ``FetchRequest/propertiesToGroupBy``,
/// ``FetchRequest/havingPredicate``) compiled to one statement:
///
/// ```sql
/// SELECT g0, e0, … FROM (
///     SELECT <group columns> AS g…, <aggregates> AS e…, MIN(t0.Z_PK) AS z_first
///     FROM <root table> t0 LEFT JOIN … WHERE <entity filter> AND <predicate> GROUP BY <group columns>)
/// WHERE <having> ORDER BY <sorts>, z_first LIMIT … OFFSET …
/// ```
///
/// The results match ``InMemoryAggregation`` row for row: groups come in the order of their
/// first object (`z_first`) unless sorted, ties too; `@sum` of nothing is 0. Integer and
/// floating-point aggregates are SQLite's own (`SUM`, `TOTAL`, `AVG`, `MIN`, `MAX`); decimals,
/// stored as text, are aggregated exactly by `ferry_decimal_aggregate`.
struct SQLAggregateQuery {
    let sql: String
    let arguments: StatementArguments
    /// How to read each result column (group keys, then expressions) from a row.
    let readers: [SQLQuery.ValueReader]

    init(_ request: FerryStore.FetchRequest, plan: AggregatePlan, layout: StoreLayout) throws {
        guard let entity = layout.model.entity(named: request.entityName), let table = layout.table(of: entity) else {
            throw QueryError.unknownEntity(request.entityName)
        }
        var inner = SQLQuery(layout: layout, entity: entity)
        var selected: [String] = []
        var grouped: [String] = []
        var readers: [SQLQuery.ValueReader] = []
        /// The outer statement's columns by result name, for the having predicate and sorts.
        var named: [String: (column: String, property: PropertyDescription)] = [:]
        var outerColumns: [String] = []
        /// Per group-by key path, its columns in the inner statement.
        var groupColumns: [[String]] = []
        for (index, (keyPath, path)) in zip(plan.groupBy, plan.groupByPaths).enumerated() {
            switch path.final {
            case .attribute:
                let (column, _) = try inner.columnExpression(keyPath)
                selected.append("\(column) AS g\(index)")
                grouped.append(column)
                groupColumns.append(["g\(index)"])
            case .relationship(let relationship):
                let alias = try inner.aliasAfterHops(path.hops + [relationship], keyPath: keyPath)
                selected += ["\(alias).Z_PK AS g\(index)", "\(alias).Z_ENT AS g\(index)e"]
                grouped.append("\(alias).Z_PK")
                groupColumns.append(["g\(index)", "g\(index)e"])
            }
        }
        // The result shows the group keys the request fetches (all of them by default).
        for (keyPath, position) in zip(plan.groupKeys, plan.groupKeyPositions) {
            let property = plan.groupByPaths[position].final
            switch property {
            case .attribute(let attribute):
                readers.append(.attribute(position: outerColumns.count, type: attribute.type))
            case .relationship:
                readers.append(.object(keyPosition: outerColumns.count, entityPosition: outerColumns.count + 1))
            }
            outerColumns += groupColumns[position]
            named[keyPath] = ("g\(position)", property)
        }
        for (index, entry) in plan.expressions.enumerated() {
            let expression = entry.expression
            var operand: String?
            if let keyPath = expression.keyPath { operand = try inner.columnExpression(keyPath).0 }
            selected.append("\(Self.call(expression, sourceType: entry.sourceType, operand: operand)) AS e\(index)")
            let resultType = expression.resultType(for: entry.sourceType)
            readers.append(.attribute(position: outerColumns.count, type: resultType))
            outerColumns.append("e\(index)")
            named[expression.name] = ("e\(index)", .attribute(AttributeDescription(name: expression.name, type: resultType)))
        }
        selected.append("MIN(t0.Z_PK) AS z_first")

        var conditions: [String] = []
        if let filter = layout.entityFilter(for: entity, includesSubentities: request.includesSubentities, alias: "t0") {
            conditions.append(filter)
        }
        if let predicate = request.predicate { conditions.append(try inner.compile(predicate)) }
        var innerSQL = "SELECT \(selected.joined(separator: ", ")) FROM \(table) t0"
        if !inner.joins.isEmpty { innerSQL += " " + inner.joins.joined(separator: " ") }
        if !conditions.isEmpty { innerSQL += " WHERE " + conditions.map { "(\($0))" }.joined(separator: " AND ") }
        if !grouped.isEmpty { innerSQL += " GROUP BY " + grouped.joined(separator: ", ") }

        // The outer statement names the result's columns; key paths there are result names.
        var outer = SQLQuery(layout: layout, entity: entity, baseAlias: "r")
        outer.resultColumns = named
        var sql = "SELECT \(outerColumns.joined(separator: ", ")) FROM (\(innerSQL))"
        if let having = request.havingPredicate {
            sql += " WHERE " + (try outer.compile(having))
        }
        var order: [String] = []
        for descriptor in request.sortDescriptors {
            order.append(try outer.sortExpression(descriptor) + (descriptor.ascending ? " ASC" : " DESC"))
        }
        order.append("z_first ASC")
        sql += " ORDER BY " + order.joined(separator: ", ")
        if request.fetchLimit > 0 || request.fetchOffset > 0 {
            sql += " LIMIT \(request.fetchLimit > 0 ? request.fetchLimit : -1) OFFSET \(max(request.fetchOffset, 0))"
        }
        self.sql = sql
        self.arguments = StatementArguments(inner.arguments + outer.arguments)
        self.readers = readers
    }

    /// The SQL of one expression over `operand` (the column it reads; nil counts rows).
    private static func call(_ expression: FetchExpression, sourceType: AttributeType?, operand: String?) -> String {
        guard let operand else { return "COUNT(*)" }
        if sourceType == .decimal, expression.function != .count {
            let call = "ferry_decimal_aggregate(\(DecimalAggregate.code(of: expression.function)), \(operand))"
            // (An aggregate over no rows is NULL without a step; a sum of nothing is 0.)
            return expression.function == .sum ? "COALESCE(\(call), '0')" : call
        }
        switch expression.function {
        case .count: return "COUNT(\(operand))"
        case .sum: return sourceType?.isInteger == true ? "COALESCE(SUM(\(operand)), 0)" : "TOTAL(\(operand))"
        case .avg: return "AVG(\(operand))"
        case .min: return "MIN(\(operand))"
        case .max: return "MAX(\(operand))"
        }
    }
}
