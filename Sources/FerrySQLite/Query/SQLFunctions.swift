import Foundation
import GRDB
import GRDBSQLite
import FerryModel
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
        db.add(function: deriveString)
        db.add(function: deriveSum)
        db.add(function: decimalAggregate)
    }

    /// `ferry_derive_string(form, text)`: a derived string (form 0 uppercase, 1 lowercase,
    /// 2 canonical), as a save derives it (``Derivation/Form/transform(_:)``); for migrations.
    static let deriveString = DatabaseFunction("ferry_derive_string", argumentCount: 2, pure: true) { values -> String? in
        guard let code = Int.fromDatabaseValue(values[0]), let text = String.fromDatabaseValue(values[1]) else { return nil }
        let path = Derivation.KeyPath(attribute: "")
        let form: Derivation.Form? = switch code { case 0: .uppercase(path); case 1: .lowercase(path); case 2: .canonical(path); default: nil }
        return form?.transform(text)
    }

    /// The code `ferry_derive_string` takes for a string form (nil for the other forms).
    static func code(ofStringForm form: Derivation.Form) -> Int? {
        switch form {
        case .uppercase: 0
        case .lowercase: 1
        case .canonical: 2
        case .value, .count, .sum, .now: nil
        }
    }

    /// `ferry_derive_sum(value, source type, derived type)`: a derived sum, as a save sums
    /// (``DerivedSum``); for migrations.
    static let deriveSum = DatabaseFunction("ferry_derive_sum", argumentCount: 3, pure: true, aggregate: DerivedSumAggregate.self)

    /// `ferry_decimal_aggregate(function, value)`: exact aggregates of decimals, for aggregate fetches.
    static let decimalAggregate = DatabaseFunction("ferry_decimal_aggregate", argumentCount: 2, pure: true, aggregate: DecimalAggregate.self)

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

/// The `ferry_derive_sum` aggregate.
struct DerivedSumAggregate: DatabaseAggregate {
    private var sum = DerivedSum()
    private var target: AttributeType?

    init() {}

    mutating func step(_ values: [DatabaseValue]) {
        guard let source = String.fromDatabaseValue(values[1]).flatMap(AttributeType.init(xcodeName:)) else { return }
        target = String.fromDatabaseValue(values[2]).flatMap(AttributeType.init(xcodeName:))
        sum.add(ValueCodec.attributeValue(values[0], as: source))
    }

    func finalize() -> DatabaseValueConvertible? {
        guard let target else { return nil }
        return ValueCodec.databaseValue(sum.value(as: target))
    }
}

/// The `ferry_decimal_aggregate(function, value)` aggregate: `@sum`, `@avg`, `@min` and `@max`
/// of a Decimal attribute, exactly (decimals are stored as text, which SQLite's own aggregates
/// would add as floating point and order as text). Its result is a decimal's text, as stored.
struct DecimalAggregate: DatabaseAggregate {
    private var function: FetchExpression.Function?
    private var total = Decimal(0)
    private var count = 0
    private var lowest: Decimal?
    private var highest: Decimal?

    init() {}

    /// The integer that names a function in `ferry_decimal_aggregate` calls.
    static func code(of function: FetchExpression.Function) -> Int {
        switch function {
        case .sum: 0
        case .avg: 1
        case .min: 2
        case .max: 3
        case .count: 4
        }
    }

    mutating func step(_ values: [DatabaseValue]) {
        if function == nil, let code = Int.fromDatabaseValue(values[0]) {
            function = FetchExpression.Function.allCases.first { Self.code(of: $0) == code }
        }
        guard case .decimal(let value)? = ValueCodec.attributeValue(values[1], as: .decimal) else { return }
        total += value
        count += 1
        if lowest.map({ value < $0 }) ?? true { lowest = value }
        if highest.map({ value > $0 }) ?? true { highest = value }
    }

    func finalize() -> DatabaseValueConvertible? {
        // Without a step (no rows) the function is not known: NULL, which the query turns into 0 for a sum.
        let result: Decimal? = switch function {
        case nil: nil
        case .sum?: total
        case .avg?: count == 0 ? nil : total / Decimal(count)
        case .min?: lowest
        case .max?: highest
        case .count?: Decimal(count)
        }
        return ValueCodec.databaseValue(result.map(AttributeValue.decimal))
    }
}
