/// A parsed predicate format string, before it is checked against a model.
///
/// Positions are character offsets in the source, kept so that the binding step
/// (which knows the entity, its keys and the arguments) can point at the
/// exact place of an unknown key or a type mismatch.
indirect enum PredicateSyntax: Equatable {
    /// `TRUEPREDICATE` / `FALSEPREDICATE`.
    case constant(Bool)
    case and([PredicateSyntax])
    case or([PredicateSyntax])
    case not(PredicateSyntax)
    case comparison(ComparisonSyntax)
}

/// `[ANY|ALL|NONE] lhs operator[options] rhs`.
struct ComparisonSyntax: Equatable {
    enum Modifier: String, Equatable {
        case any = "ANY", all = "ALL"
        /// `NONE`: no member matches (NOT ANY).
        case notAny = "NONE"
    }

    enum Operator: String, Equatable {
        case equal = "==", notEqual = "!=", less = "<", lessOrEqual = "<=", greater = ">", greaterOrEqual = ">="
        case beginsWith = "BEGINSWITH", contains = "CONTAINS", endsWith = "ENDSWITH", like = "LIKE", matches = "MATCHES"
        case `in` = "IN", between = "BETWEEN"

        var isStringOperator: Bool { [.beginsWith, .contains, .endsWith, .like, .matches].contains(self) }
    }

    /// `[c]` case-insensitive, `[d]` diacritic-insensitive.
    struct Options: OptionSet, Equatable {
        let rawValue: Int
        static let caseInsensitive = Options(rawValue: 1)
        static let diacriticInsensitive = Options(rawValue: 2)
    }

    var modifier: Modifier?
    var lhs: ExpressionSyntax
    var `operator`: Operator
    var options: Options
    var rhs: ExpressionSyntax
    /// Where the operator is.
    var position: Int
}

/// An expression on either side of a comparison.
indirect enum ExpressionSyntax: Equatable {
    /// Where a key path starts.
    enum Root: Equatable {
        /// The evaluated object, implicit (`name`).
        case implicit
        /// `SELF`.
        case evaluatedObject
        /// A subquery or template variable (`$x.name`).
        case variable(String)
    }

    /// A key path: a root and zero or more keys (`manager.name`, `SELF`, `$x.price`).
    case keyPath(root: Root, keys: [String], position: Int)
    /// `base.@count`, `base.@sum.key`, … — `op` is lower-case without `@`.
    case collectionOperator(op: String, base: ExpressionSyntax, keys: [String], position: Int)
    /// `SUBQUERY(collection, $variable, predicate)`.
    case subquery(collection: ExpressionSyntax, variable: String, predicate: PredicateSyntax, position: Int)
    /// `{a, b, c}`.
    case collection([ExpressionSyntax], position: Int)
    /// `%@`, `%d`, … — the n-th argument (0-based) and its specifier.
    case argument(index: Int, specifier: Character, position: Int)
    /// `%K` — the n-th argument, to be read as a key path.
    case keyPathArgument(index: Int, position: Int)
    case string(String, position: Int)
    case integer(Int64, position: Int)
    /// A number with a fraction or exponent, kept as written so no digit is lost.
    case decimal(String, position: Int)
    case boolean(Bool, position: Int)
    case null(position: Int)

    var position: Int {
        switch self {
        case .keyPath(_, _, let p), .collectionOperator(_, _, _, let p), .subquery(_, _, _, let p), .collection(_, let p),
             .argument(_, _, let p), .keyPathArgument(_, let p), .string(_, let p), .integer(_, let p), .decimal(_, let p),
             .boolean(_, let p), .null(let p):
            return p
        }
    }
}

// MARK: - Canonical text

extension PredicateSyntax: CustomStringConvertible {
    /// A normalised format string: keywords upper-case, `==` for equality,
    /// strings in double quotes, compound predicates in parentheses.
    var description: String {
        switch self {
        case .constant(let value): value ? "TRUEPREDICATE" : "FALSEPREDICATE"
        case .and(let parts): "(" + parts.map(\.description).joined(separator: " AND ") + ")"
        case .or(let parts): "(" + parts.map(\.description).joined(separator: " OR ") + ")"
        case .not(let inner): "NOT " + inner.description
        case .comparison(let comparison): comparison.description
        }
    }
}

extension ComparisonSyntax: CustomStringConvertible {
    var description: String {
        var options = ""
        if self.options.contains(.caseInsensitive) { options += "c" }
        if self.options.contains(.diacriticInsensitive) { options += "d" }
        let prefix = modifier.map { $0.rawValue + " " } ?? ""
        return "\(prefix)\(lhs) \(`operator`.rawValue)\(options.isEmpty ? "" : "[\(options)]") \(rhs)"
    }
}

extension ExpressionSyntax: CustomStringConvertible {
    var description: String {
        switch self {
        case .keyPath(let root, let keys, _):
            let head: [String]
            switch root {
            case .implicit: head = []
            case .evaluatedObject: head = ["SELF"]
            case .variable(let name): head = ["$" + name]
            }
            return (head + keys.map(Self.escapedKey)).joined(separator: ".")
        case .collectionOperator(let op, let base, let keys, _):
            return ([base.description, "@" + op] + keys.map(Self.escapedKey)).joined(separator: ".")
        case .subquery(let collection, let variable, let predicate, _):
            return "SUBQUERY(\(collection), $\(variable), \(predicate))"
        case .collection(let elements, _):
            return "{" + elements.map(\.description).joined(separator: ", ") + "}"
        case .argument(let index, let specifier, _):
            return "%\(specifier)#\(index)"
        case .keyPathArgument(let index, _):
            return "%K#\(index)"
        case .string(let value, _):
            var escaped = ""
            for c in value {
                switch c {
                case "\"": escaped += "\\\""
                case "\\": escaped += "\\\\"
                case "\n": escaped += "\\n"
                case "\t": escaped += "\\t"
                default: escaped.append(c)
                }
            }
            return "\"\(escaped)\""
        case .integer(let value, _): return String(value)
        case .decimal(let text, _): return text
        case .boolean(let value, _): return value ? "TRUE" : "FALSE"
        case .null: return "NIL"
        }
    }

    /// A key that is spelled like a keyword is written `#key`.
    static func escapedKey(_ key: String) -> String {
        PredicateLexer.keywords.contains(key.uppercased()) ? "#" + key : key
    }
}
