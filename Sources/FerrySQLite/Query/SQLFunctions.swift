import GRDB
import GRDBSQLite
import FerryStore

/// SQL functions and collations Ferry registers on every connection of a store.
enum SQLFunctions {
    /// Registers the functions and collations on a connection.
    static func register(on db: Database) throws {
        let code = sqlite3_create_function_v2(db.sqliteConnection, "ferry_match", 4, SQLITE_UTF8 | SQLITE_DETERMINISTIC,
                                              nil, ferryMatch, nil, nil, nil)
        guard code == SQLITE_OK else {
            throw DatabaseError(resultCode: ResultCode(rawValue: code), message: "cannot register ferry_match")
        }
        db.add(collation: caseFold)
    }

    /// `COLLATE ferry_casefold`: the order of case-insensitive sorts, the same
    /// Unicode case folding the in-memory sort uses.
    static let caseFold = DatabaseCollation("ferry_casefold") { lhs, rhs in
        PredicateEvaluator.caseInsensitiveOrder(lhs, rhs)
    }

    /// The integer that names a string operator in `ferry_match` calls.
    static func code(of op: StringOperator) -> Int64 {
        switch op {
        case .equal: 0
        case .beginsWith: 1
        case .contains: 2
        case .endsWith: 3
        case .like: 4
        case .matches: 5
        }
    }

    static func stringOperator(code: Int64) -> StringOperator? {
        switch code {
        case 0: .equal
        case 1: .beginsWith
        case 2: .contains
        case 3: .endsWith
        case 4: .like
        case 5: .matches
        default: nil
        }
    }
}

/// `ferry_match(operator, options, value, pattern)`: the predicate string
/// operators (BEGINSWITH, CONTAINS, ENDSWITH, LIKE, MATCHES, `==[cd]`) with
/// Unicode case and diacritic folding — the same code the in-memory evaluator
/// runs, so SQL and memory agree. A value that is not text does not match.
///
/// It is registered through SQLite's C API and reads the value's bytes in
/// place: when the deciding bytes are ASCII the answer comes from
/// ``ASCIIStringMatching`` without building Swift strings, which keeps
/// `name BEGINSWITH[c] 'jo'` about as cheap as SQLite's own LIKE.
private func ferryMatch(_ context: OpaquePointer?, _ count: Int32, _ arguments: UnsafeMutablePointer<OpaquePointer?>?) {
    guard count == 4, let arguments,
          sqlite3_value_type(arguments[2]) == SQLITE_TEXT, sqlite3_value_type(arguments[3]) == SQLITE_TEXT,
          let op = SQLFunctions.stringOperator(code: sqlite3_value_int64(arguments[0])) else {
        sqlite3_result_int(context, 0)
        return
    }
    let options = StringOptions(rawValue: Int(sqlite3_value_int64(arguments[1])))
    // sqlite3_value_text before sqlite3_value_bytes, as SQLite's documentation asks.
    let textStart = sqlite3_value_text(arguments[2])
    let text = UnsafeBufferPointer(start: textStart, count: Int(sqlite3_value_bytes(arguments[2])))
    let patternStart = sqlite3_value_text(arguments[3])
    let pattern = UnsafeBufferPointer(start: patternStart, count: Int(sqlite3_value_bytes(arguments[3])))
    let matched = ASCIIStringMatching.match(text, pattern, op, caseInsensitive: options.contains(.caseInsensitive))
        ?? PredicateEvaluator.match(String(decoding: text, as: UTF8.self), op, String(decoding: pattern, as: UTF8.self), options)
    sqlite3_result_int(context, matched ? 1 : 0)
}
