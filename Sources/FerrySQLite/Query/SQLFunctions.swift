import GRDB
import FerryStore

/// SQL functions Ferry registers on every connection of a store.
enum SQLFunctions {
    /// `ferry_match(operator, options, value, pattern)`: the predicate string
    /// operators (BEGINSWITH, CONTAINS, ENDSWITH, LIKE, MATCHES, `==[cd]`) with
    /// Unicode case and diacritic folding — the same code the in-memory
    /// evaluator runs, so SQL and memory agree. NULL values do not match.
    static let match = DatabaseFunction("ferry_match", argumentCount: 4, pure: true) { arguments in
        guard case .string(let opName) = arguments[0].storage, let op = StringOperator(rawValue: opName),
              case .int64(let bits) = arguments[1].storage,
              case .string(let text) = arguments[2].storage,
              case .string(let pattern) = arguments[3].storage else { return false }
        return PredicateEvaluator.match(text, op, pattern, StringOptions(rawValue: Int(bits)))
    }

    /// `COLLATE ferry_casefold`: the order of case-insensitive sorts, the same
    /// Unicode case folding the in-memory sort uses.
    static let caseFold = DatabaseCollation("ferry_casefold") { lhs, rhs in
        PredicateEvaluator.caseInsensitiveOrder(lhs, rhs)
    }

    /// Registers the functions and collations on a connection.
    static func register(on db: Database) {
        db.add(function: match)
        db.add(collation: caseFold)
    }
}
