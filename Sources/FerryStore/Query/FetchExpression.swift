import Foundation
import FerryModel

/// A computed column of a dictionary fetch (Core Data's `NSExpressionDescription` with a
/// function expression): `@count`, `@sum`, `@avg`, `@min` or `@max` over the matching objects,
/// or over each group when the request has ``FetchRequest/propertiesToGroupBy``.
///
/// ```swift
/// var request = FetchRequest(entityName: "Order")
/// request.propertiesToGroupBy = ["customer.name"]
/// request.propertiesToFetch = ["customer.name"]
/// request.expressions = [.sum("total", as: "revenue"), .count(as: "orders")]
/// request.havingPredicate = .comparison(keyPath: "revenue", .greater, .attribute(.double(1000)))
/// request.sortDescriptors = [FetchSortDescriptor("revenue", ascending: false)]
/// let rows = try context.fetchDictionaries(request)   // [["customer.name": …, "revenue": …, "orders": …], …]
/// ```
public struct FetchExpression: Sendable, Hashable {
    /// The aggregate function.
    public enum Function: String, Sendable, Hashable, CaseIterable {
        case count, sum, avg, min, max
    }

    /// The key of the result in each dictionary; also the name sort descriptors and
    /// ``FetchRequest/havingPredicate`` use for it.
    public var name: String
    /// The function.
    public var function: Function
    /// The attribute it reads (through to-one relationships); nil counts the objects.
    public var keyPath: String?

    /// Creates an expression.
    public init(name: String, function: Function, keyPath: String?) {
        self.name = name
        self.function = function
        self.keyPath = keyPath
    }

    /// `@count`: the number of objects (or, with a key path, of objects with a value there).
    public static func count(_ keyPath: String? = nil, as name: String) -> FetchExpression {
        FetchExpression(name: name, function: .count, keyPath: keyPath)
    }

    /// `@sum` of a number attribute; 0 when nothing has a value.
    public static func sum(_ keyPath: String, as name: String) -> FetchExpression {
        FetchExpression(name: name, function: .sum, keyPath: keyPath)
    }

    /// `@avg` of a number attribute (a Double; a Decimal for Decimal attributes); nil when nothing has a value.
    public static func avg(_ keyPath: String, as name: String) -> FetchExpression {
        FetchExpression(name: name, function: .avg, keyPath: keyPath)
    }

    /// `@min` of any stored attribute (in the order sorts use); nil when nothing has a value.
    public static func min(_ keyPath: String, as name: String) -> FetchExpression {
        FetchExpression(name: name, function: .min, keyPath: keyPath)
    }

    /// `@max` of any stored attribute (in the order sorts use); nil when nothing has a value.
    public static func max(_ keyPath: String, as name: String) -> FetchExpression {
        FetchExpression(name: name, function: .max, keyPath: keyPath)
    }

    /// The type of the result for an attribute of `type` (nil for a count of objects).
    package func resultType(for type: AttributeType?) -> AttributeType {
        switch function {
        case .count: return .integer64
        case .sum:
            guard let type else { return .integer64 }
            switch type {
            case .integer16, .integer32, .integer64: return .integer64
            case .decimal: return .decimal
            default: return .double
            }
        case .avg:
            return type == .decimal ? .decimal : .double
        case .min, .max:
            return type ?? .integer64
        }
    }
}

/// An aggregate request checked against the model: its group keys, each expression's
/// attribute type, and the names sort descriptors and the having predicate may use.
package struct AggregatePlan: Sendable {
    /// The key paths whose values form the groups (``FetchRequest/propertiesToGroupBy``), in order.
    package let groupBy: [String]
    /// Each of ``groupBy`` resolved: its to-one hops, and what it ends at (an attribute, or a to-one).
    package let groupByPaths: [ResolvedKeyPath]
    /// The key paths of the result's group columns (``FetchRequest/propertiesToFetch``, or every
    /// group-by key path when it is empty), in order: each one of ``groupBy``.
    package let groupKeys: [String]
    /// The position in ``groupBy`` of each of ``groupKeys``.
    package let groupKeyPositions: [Int]
    /// Each expression with the type of the attribute it reads (nil for a count of objects).
    package let expressions: [(expression: FetchExpression, sourceType: AttributeType?)]

    /// Checks `request` for an aggregate fetch.
    package init(_ request: FetchRequest, in model: ManagedObjectModel) throws(QueryError) {
        var plain = request
        plain.sortDescriptors = []
        plain.propertiesToFetch = []
        let entity = try plain.validated(in: model)
        func refuse(_ name: String, _ reason: String) -> QueryError {
            QueryError.invalidAggregate(entity: entity.name, name: name, reason: reason)
        }
        var groupPaths: [String: ResolvedKeyPath] = [:]
        for keyPath in request.propertiesToGroupBy + request.propertiesToFetch {
            let path = try ResolvedKeyPath.resolve(keyPath, from: entity, in: model)
            if let attribute = path.final.attribute, attribute.isTransient {
                throw refuse(keyPath, "is a transient attribute, whose values are never stored: group by a stored attribute or to-one")
            }
            groupPaths[keyPath] = path
        }
        if !request.propertiesToGroupBy.isEmpty {
            for keyPath in request.propertiesToFetch where !request.propertiesToGroupBy.contains(keyPath) {
                throw refuse(keyPath, "is fetched but not grouped by: a grouped fetch returns only what propertiesToGroupBy names, and expressions")
            }
        } else if !request.propertiesToFetch.isEmpty {
            throw refuse(request.propertiesToFetch[0],
                         "is fetched beside expressions without propertiesToGroupBy: group by it, or fetch it without expressions")
        }
        groupBy = request.propertiesToGroupBy
        groupByPaths = groupBy.compactMap { groupPaths[$0] }
        groupKeys = request.aggregateGroupKeys
        groupKeyPositions = groupKeys.compactMap { request.propertiesToGroupBy.firstIndex(of: $0) }
        var names = Set(groupKeys)
        var expressions: [(FetchExpression, AttributeType?)] = []
        for expression in request.expressions {
            guard !expression.name.isEmpty else {
                throw refuse("@\(expression.function.rawValue)", "has no name: give each expression a name, the key of its result")
            }
            guard names.insert(expression.name).inserted else {
                throw refuse(expression.name, "names two columns of the result: give each expression a name of its own, not a fetched key path's")
            }
            guard let keyPath = expression.keyPath else {
                guard expression.function == .count else {
                    throw refuse(expression.name,
                                 "is @\(expression.function.rawValue) without a key path: only @count counts objects; name the attribute to read")
                }
                expressions.append((expression, nil))
                continue
            }
            let path = try ResolvedKeyPath.resolve(keyPath, from: entity, in: model)
            guard let attribute = path.final.attribute, !attribute.isTransient else {
                throw refuse(expression.name,
                             "reads '\(keyPath)', which is not a stored attribute: @\(expression.function.rawValue) reads a stored attribute (through to-ones)")
            }
            if expression.function == .sum || expression.function == .avg, !attribute.type.isNumeric {
                throw refuse(expression.name,
                             "is @\(expression.function.rawValue) of '\(keyPath)', a \(attribute.type.xcodeName) attribute: it needs a number attribute")
            }
            expressions.append((expression, attribute.type))
        }
        self.expressions = expressions
        for descriptor in request.sortDescriptors where !names.contains(descriptor.keyPath) {
            throw refuse(descriptor.keyPath, "is a sort key that is not in the result: sort by a fetched key path or an expression name")
        }
        if let having = request.havingPredicate { try Self.checkHaving(having, entity: entity.name) }
    }

    /// A having predicate compares the result's columns: comparisons, string matches, membership
    /// and their combinations. To-many conditions and `SELF` have no meaning there.
    private static func checkHaving(_ predicate: FetchPredicate, entity: String) throws(QueryError) {
        switch predicate {
        case .alwaysTrue, .alwaysFalse, .comparison, .keyPathComparison, .stringMatch, .membership:
            return
        case .and(let parts), .or(let parts):
            for part in parts { try checkHaving(part, entity: entity) }
        case .not(let inner):
            try checkHaving(inner, entity: entity)
        case .quantified(_, let keyPath, _), .count(let keyPath, _, _), .subqueryCount(let keyPath, _, _, _), .aggregate(_, let keyPath, _, _, _):
            throw QueryError.invalidAggregate(entity: entity, name: keyPath,
                                              reason: "is a to-many condition in the having predicate, which compares the result's columns only: " +
                                                  "filter objects with the request's predicate")
        case .selfIn:
            throw QueryError.invalidAggregate(entity: entity, name: "SELF",
                                              reason: "names objects in the having predicate, which compares the result's columns only: " +
                                                  "filter objects with the request's predicate")
        }
    }
}

extension FetchRequest {
    /// The group keys an aggregate fetch returns: ``propertiesToFetch``, or every group-by key path.
    var aggregateGroupKeys: [String] { propertiesToFetch.isEmpty ? propertiesToGroupBy : propertiesToFetch }

    /// The keys of an aggregate fetch's result, in column order: its group keys, then the
    /// expressions' names (no model needed; ``AggregatePlan`` checks that they are distinct).
    var aggregateColumnNames: [String] { aggregateGroupKeys + expressions.map(\.name) }
}
