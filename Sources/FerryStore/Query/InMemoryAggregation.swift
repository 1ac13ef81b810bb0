import Foundation
import FerryModel

extension PersistentStore {
    /// Groups ``fetchValues(_:keyPaths:)`` in memory (see ``InMemoryAggregation``).
    public func fetchAggregates(_ request: FetchRequest) throws -> [[FetchedValue?]] {
        try InMemoryAggregation.run(request, on: self)
    }
}

/// Aggregate fetches computed in Swift, for stores without a query language of their own
/// (``InMemoryStore``): the same results as the SQLite store's `GROUP BY` statement, with these
/// rules — groups in the order their first object comes (primary-key order) unless sorted;
/// `@sum` of nothing is 0; `@avg`, `@min` and `@max` of nothing are nil; nil values are skipped.
package enum InMemoryAggregation {
    package static func run(_ request: FetchRequest, on store: some PersistentStore) throws -> [[FetchedValue?]] {
        let plan = try AggregatePlan(request, in: store.model)
        var base = request
        base.sortDescriptors = []
        base.fetchLimit = 0
        base.fetchOffset = 0
        base.expressions = []
        base.propertiesToGroupBy = []
        base.propertiesToFetch = []
        base.havingPredicate = nil
        base.returnsDistinctResults = false
        let sources = Array(Set(plan.expressions.compactMap(\.expression.keyPath))).sorted()
        let rows = try store.fetchValues(base, keyPaths: plan.groupBy + sources)
        let groupWidth = plan.groupBy.count
        var order: [[FetchedValue?]] = []
        var members: [[FetchedValue?]: [Int]] = [:]
        for (position, row) in rows.enumerated() {
            let key = Array(row.prefix(groupWidth))
            if members[key] == nil { order.append(key) }
            members[key, default: []].append(position)
        }
        // Without groups, one row over all matches, even none (a count of 0).
        if groupWidth == 0 && order.isEmpty {
            order = [[]]
            members[[]] = []
        }
        // Each expression's column in `rows` (nil for a count of objects).
        let columns = plan.expressions.map { entry in entry.expression.keyPath.flatMap { sources.firstIndex(of: $0) }.map { groupWidth + $0 } }
        var results: [[FetchedValue?]] = try order.map { key in
            let positions = members[key] ?? []
            return try plan.groupKeyPositions.map { key[$0] } + zip(plan.expressions, columns).map { entry, column in
                let values = positions.map { position in column.flatMap { rows[position][$0] } }
                return try aggregate(entry.expression, sourceType: entry.sourceType, values: values, rows: positions.count, entity: request.entityName)
            }
        }
        let names = request.aggregateColumnNames
        if let having = request.havingPredicate {
            let evaluator = PredicateEvaluator()
            results = try results.filter { try evaluator.evaluate(having, on: GroupSubject(names: names, values: $0)) }
        }
        if !request.sortDescriptors.isEmpty {
            let keyed = results.enumerated().map { offset, row in
                (offset, row, request.sortDescriptors.map { descriptor in
                    names.firstIndex(of: descriptor.keyPath).map { GroupSubject.keyPathValue(row[$0]) } ?? .null
                })
            }
            results = keyed.sorted { lhs, rhs in
                PredicateEvaluator.precedes(lhs.2, rhs.2, by: request.sortDescriptors) ?? (lhs.0 < rhs.0)
            }.map(\.1)
        }
        let start = min(max(request.fetchOffset, 0), results.count)
        let window = results[start...]
        return Array(request.fetchLimit > 0 ? window.prefix(request.fetchLimit) : window)
    }

    private static func aggregate(_ expression: FetchExpression, sourceType: AttributeType?, values: [FetchedValue?], rows: Int,
                                  entity: String) throws(QueryError) -> FetchedValue? {
        let present: [AttributeValue] = values.compactMap { value in
            if case .attribute(let attribute)? = value { return attribute }
            return nil
        }
        switch expression.function {
        case .count:
            return .attribute(.integer(Int64(expression.keyPath == nil ? rows : present.count)))
        case .sum:
            switch expression.resultType(for: sourceType) {
            case .integer64:
                var total: Int64 = 0
                for case .integer(let value) in present {
                    let (sum, overflow) = total.addingReportingOverflow(value)
                    // (SQLite's SUM fails the same way.)
                    guard !overflow else {
                        throw QueryError.invalidAggregate(entity: entity, name: expression.name,
                                                          reason: "overflows a 64-bit integer: sum a Double or Decimal attribute instead")
                    }
                    total = sum
                }
                return .attribute(.integer(total))
            case .decimal:
                return .attribute(.decimal(present.reduce(Decimal(0)) { $0 + decimal($1) }))
            default:
                return .attribute(.double(present.reduce(0) { $0 + ($1.numericValue ?? 0) }))
            }
        case .avg:
            guard !present.isEmpty else { return nil }
            if sourceType == .decimal {
                return .attribute(.decimal(present.reduce(Decimal(0)) { $0 + decimal($1) } / Decimal(present.count)))
            }
            return .attribute(.double(present.reduce(0) { $0 + ($1.numericValue ?? 0) } / Double(present.count)))
        case .min:
            return present.min { AttributeValue.compare($0, $1) == .orderedAscending }.map(FetchedValue.attribute)
        case .max:
            return present.max { AttributeValue.compare($0, $1) == .orderedAscending }.map(FetchedValue.attribute)
        }
    }

    private static func decimal(_ value: AttributeValue) -> Decimal {
        if case .decimal(let decimal) = value { return decimal }
        return Decimal(value.numericValue ?? 0)
    }
}

/// One result row of an aggregate fetch, as the having predicate sees it: its columns by name.
struct GroupSubject: PredicateSubject {
    let names: [String]
    let values: [FetchedValue?]

    /// (A group is no object; `SELF` comparisons never match it.)
    var objectID: ObjectID { Self.noObject }
    private static let noObject = ObjectID.permanent(entityName: "", store: UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)), primaryKey: 0)

    func value(at keyPath: String) throws -> KeyPathValue {
        guard let index = names.firstIndex(of: keyPath) else {
            throw QueryError.unknownKey(entity: "group", key: keyPath, keyPath: keyPath)
        }
        return Self.keyPathValue(values[index])
    }

    func members(at keyPath: String) throws -> [GroupSubject] {
        throw QueryError.typeMismatch(entity: "group", keyPath: keyPath, expected: "a group column", value: "a to-many relationship (not in a grouped result)")
    }

    static func keyPathValue(_ value: FetchedValue?) -> KeyPathValue {
        switch value {
        case .attribute(let attribute)?: .attribute(attribute)
        case .object(let id)?: .object(id)
        case nil: .null
        }
    }
}
