/// Parses Core Data's predicate format strings into a ``PredicateSyntax``.
///
/// Grammar (keywords case-insensitive):
/// ```
/// predicate   := or
/// or          := and (("OR" | "||") and)*
/// and         := not (("AND" | "&&") not)*
/// not         := ("NOT" | "!") not | primary
/// primary     := "(" predicate ")" | TRUEPREDICATE | FALSEPREDICATE | comparison
/// comparison  := [ANY|SOME|ALL|NONE] expression operator ["[" c|d|cd|n "]"] expression
/// operator    := = == != <> < <= =< > >= => BEGINSWITH CONTAINS ENDSWITH LIKE MATCHES IN BETWEEN
/// expression  := value ("." (key | @count | @sum | @avg | @min | @max))*
/// value       := key | SELF | $VAR | %@ | %K | %d | %i | %f | %s | string | number
///              | TRUE | YES | FALSE | NO | NIL | NULL | "{" [expression ("," expression)*] "}"
///              | SUBQUERY "(" expression "," $VAR "," predicate ")" | "(" expression ")"
/// ```
struct PredicateParser {
    private let tokens: [PredicateToken]
    private var index = 0
    /// The next format argument's index (`%@`, `%K`, `%d` … consume them in order).
    private var nextArgument = 0

    init(tokens: [PredicateToken]) {
        self.tokens = tokens
    }

    /// Parses `source`; the result also tells how many format arguments it uses.
    static func parse(_ source: String) throws(PredicateSyntaxError) -> (syntax: PredicateSyntax, argumentCount: Int) {
        let tokens = try PredicateLexer.tokens(of: source)
        try checkNesting(tokens)
        var parser = PredicateParser(tokens: tokens)
        let syntax = try parser.parsePredicate()
        guard parser.current.kind == .end else {
            throw parser.error("unexpected \(parser.describe(parser.current)) after a complete predicate; join predicates with AND or OR")
        }
        return (syntax, parser.nextArgument)
    }

    /// How deep parentheses, braces and chains of NOT may nest. The parser recurses
    /// once per level, so without a bound a hostile predicate of a few thousand `(`
    /// would overflow the stack; no real predicate comes near it.
    static let maximumNesting = 100

    /// Refuses predicates nested deeper than ``maximumNesting``, before any recursion.
    private static func checkNesting(_ tokens: [PredicateToken]) throws(PredicateSyntaxError) {
        var depth = 0
        var negations = 0
        for token in tokens {
            switch token.kind {
            case .symbol("("), .symbol("{"): depth += 1
            case .symbol(")"), .symbol("}"): depth = max(0, depth - 1)
            default: break
            }
            if token.kind == .keyword("NOT") || token.kind == .symbol("!") { negations += 1 } else { negations = 0 }
            if depth > maximumNesting || negations > maximumNesting {
                throw PredicateSyntaxError(position: token.position,
                                           message: "the predicate nests more than \(maximumNesting) levels deep (parentheses, braces or NOT); simplify it")
            }
        }
    }

    // MARK: - Token access

    private var current: PredicateToken { tokens[min(index, tokens.count - 1)] }

    private mutating func advance() -> PredicateToken {
        let token = current
        if index < tokens.count - 1 { index += 1 }
        return token
    }

    private func isKeyword(_ word: String) -> Bool { current.kind == .keyword(word) }
    private func isSymbol(_ symbol: String) -> Bool { current.kind == .symbol(symbol) }

    private mutating func expect(_ symbol: String, _ context: String) throws(PredicateSyntaxError) {
        guard isSymbol(symbol) else { throw error("expected '\(symbol)' \(context), found \(describe(current))") }
        _ = advance()
    }

    private func error(_ message: String, at position: Int? = nil) -> PredicateSyntaxError {
        PredicateSyntaxError(position: position ?? current.position, message: message)
    }

    private func describe(_ token: PredicateToken) -> String {
        switch token.kind {
        case .identifier(let name): "'\(name)'"
        case .keyword(let word): "'\(word)'"
        case .string(let value): "the string '\(value)'"
        case .integer(let value): "the number \(value)"
        case .decimal(let text): "the number \(text)"
        case .formatSpecifier(let c): "'%\(c)'"
        case .variable(let name): "'$\(name)'"
        case .collectionOperator(let op): "'@\(op)'"
        case .symbol(let symbol): "'\(symbol)'"
        case .end: "the end of the predicate"
        }
    }

    // MARK: - Predicates

    private mutating func parsePredicate() throws(PredicateSyntaxError) -> PredicateSyntax {
        var parts = [try parseAnd()]
        while isKeyword("OR") || isSymbol("||") {
            _ = advance()
            parts.append(try parseAnd())
        }
        return parts.count == 1 ? parts[0] : .or(parts)
    }

    private mutating func parseAnd() throws(PredicateSyntaxError) -> PredicateSyntax {
        var parts = [try parseNot()]
        while isKeyword("AND") || isSymbol("&&") {
            _ = advance()
            parts.append(try parseNot())
        }
        return parts.count == 1 ? parts[0] : .and(parts)
    }

    private mutating func parseNot() throws(PredicateSyntaxError) -> PredicateSyntax {
        if isKeyword("NOT") || isSymbol("!") {
            _ = advance()
            return .not(try parseNot())
        }
        return try parsePrimary()
    }

    private mutating func parsePrimary() throws(PredicateSyntaxError) -> PredicateSyntax {
        if isKeyword("TRUEPREDICATE") { _ = advance(); return .constant(true) }
        if isKeyword("FALSEPREDICATE") { _ = advance(); return .constant(false) }
        if isSymbol("(") {
            // A parenthesis opens either a grouped predicate or a grouped expression
            // (`(a) == 1`); try the predicate first and fall back. When both fail,
            // report the error that got further into the text.
            let saved = (index, nextArgument)
            _ = advance()
            var predicateError: PredicateSyntaxError?
            do {
                let inner = try parsePredicate()
                if isSymbol(")") {
                    _ = advance()
                    if !isComparisonOperatorAhead() { return inner }
                } else {
                    let opened = saved.0 < tokens.count ? tokens[saved.0].position : 0
                    predicateError = error("expected ')' to close the parenthesis opened at offset \(opened), found \(describe(current))")
                }
            } catch {
                predicateError = error
            }
            (index, nextArgument) = saved
            do {
                return .comparison(try parseComparison())
            } catch {
                if let predicateError, predicateError.position > error.position { throw predicateError }
                throw error
            }
        }
        return .comparison(try parseComparison())
    }

    /// Whether the previous token is a comparison operator (so a `[` opens options, not an index).
    private func isComparisonOperatorBefore() -> Bool {
        guard index > 0 else { return false }
        switch tokens[index - 1].kind {
        case .symbol(let s): return ["=", "==", "!=", "<>", "<", "<=", "=<", ">", ">=", "=>"].contains(s)
        case .keyword(let k): return ["BEGINSWITH", "CONTAINS", "ENDSWITH", "LIKE", "MATCHES", "IN", "BETWEEN"].contains(k)
        default: return false
        }
    }

    private func isComparisonOperatorAhead() -> Bool {
        switch current.kind {
        case .symbol(let s): ["=", "==", "!=", "<>", "<", "<=", "=<", ">", ">=", "=>"].contains(s)
        case .keyword(let k): ["BEGINSWITH", "CONTAINS", "ENDSWITH", "LIKE", "MATCHES", "IN", "BETWEEN"].contains(k)
        default: false
        }
    }

    private mutating func parseComparison() throws(PredicateSyntaxError) -> ComparisonSyntax {
        var modifier: ComparisonSyntax.Modifier?
        switch current.kind {
        case .keyword("ANY"), .keyword("SOME"): modifier = .any
        case .keyword("ALL"): modifier = .all
        case .keyword("NONE"): modifier = .notAny
        default: break
        }
        if modifier != nil { _ = advance() }
        let lhs = try parseExpression()
        let position = current.position
        let op: ComparisonSyntax.Operator
        switch current.kind {
        case .symbol("="), .symbol("=="): op = .equal
        case .symbol("!="), .symbol("<>"): op = .notEqual
        case .symbol("<"): op = .less
        case .symbol("<="), .symbol("=<"): op = .lessOrEqual
        case .symbol(">"): op = .greater
        case .symbol(">="), .symbol("=>"): op = .greaterOrEqual
        case .keyword("BEGINSWITH"): op = .beginsWith
        case .keyword("CONTAINS"): op = .contains
        case .keyword("ENDSWITH"): op = .endsWith
        case .keyword("LIKE"): op = .like
        case .keyword("MATCHES"): op = .matches
        case .keyword("IN"): op = .in
        case .keyword("BETWEEN"): op = .between
        default:
            throw error("expected a comparison operator (==, !=, <, >, BEGINSWITH, CONTAINS, LIKE, IN, BETWEEN …) after \(lhs), found \(describe(current))")
        }
        _ = advance()
        let options = try parseOptions(for: op)
        let rhs = try parseExpression()
        return ComparisonSyntax(modifier: modifier, lhs: lhs, operator: op, options: options, rhs: rhs, position: position)
    }

    private mutating func parseOptions(for op: ComparisonSyntax.Operator) throws(PredicateSyntaxError) -> ComparisonSyntax.Options {
        guard isSymbol("[") else { return [] }
        let start = current.position
        _ = advance()
        guard case .identifier(let letters) = current.kind else {
            throw error("expected options such as [c], [d] or [cd] after the operator")
        }
        _ = advance()
        var options: ComparisonSyntax.Options = []
        for letter in letters.lowercased() {
            switch letter {
            case "c": options.insert(.caseInsensitive)
            case "d": options.insert(.diacriticInsensitive)
            case "n", "l": continue  // normalized / locale-sensitive: accepted, no effect
            default: throw error("unknown comparison option '\(letter)'; use c, d or cd", at: start)
            }
        }
        try expect("]", "to close the comparison options")
        return options
    }

    // MARK: - Expressions

    private mutating func parseExpression() throws(PredicateSyntaxError) -> ExpressionSyntax {
        var expression = try parseValue()
        if isSymbol("[") && !isComparisonOperatorBefore() {
            throw error("array index operators ([FIRST], [LAST], [SIZE], [n]) are not supported")
        }
        while isSymbol(".") {
            _ = advance()
            let position = current.position
            switch current.kind {
            case .identifier(let key):
                _ = advance()
                expression = try appendKey(key, to: expression, at: position)
            case .keyword(let word) where ["FIRST", "LAST", "SIZE"].contains(word):
                throw error("array index operators ([FIRST], [LAST], [SIZE]) are not supported")
            case .collectionOperator(let op):
                _ = advance()
                expression = .collectionOperator(op: op, base: expression, keys: [], position: position)
            default:
                throw error("expected a key after '.', found \(describe(current))")
            }
        }
        return expression
    }

    private func appendKey(_ key: String, to expression: ExpressionSyntax, at position: Int) throws(PredicateSyntaxError) -> ExpressionSyntax {
        switch expression {
        case .keyPath(let root, let keys, let start):
            return .keyPath(root: root, keys: keys + [key], position: start)
        case .collectionOperator(let op, let base, let keys, let start):
            return .collectionOperator(op: op, base: base, keys: keys + [key], position: start)
        default:
            throw error("'.\(key)' cannot follow \(expression)", at: position)
        }
    }

    private mutating func parseValue() throws(PredicateSyntaxError) -> ExpressionSyntax {
        let token = current
        let position = token.position
        switch token.kind {
        case .identifier(let key):
            _ = advance()
            return .keyPath(root: .implicit, keys: [key], position: position)
        case .keyword("SELF"):
            _ = advance()
            return .keyPath(root: .evaluatedObject, keys: [], position: position)
        case .variable(let name):
            _ = advance()
            return .keyPath(root: .variable(name), keys: [], position: position)
        case .collectionOperator(let op):
            // A leading operator, `@count` on the evaluated collection, or `@sum.key`.
            _ = advance()
            return .collectionOperator(op: op, base: .keyPath(root: .evaluatedObject, keys: [], position: position), keys: [], position: position)
        case .formatSpecifier(let specifier):
            _ = advance()
            let argument = nextArgument
            nextArgument += 1
            return specifier == "K" ? .keyPathArgument(index: argument, position: position)
                : .argument(index: argument, specifier: specifier, position: position)
        case .string(let value):
            _ = advance()
            return .string(value, position: position)
        case .integer(let value):
            _ = advance()
            return .integer(value, position: position)
        case .decimal(let text):
            _ = advance()
            return .decimal(text, position: position)
        case .symbol("-"):
            _ = advance()
            switch current.kind {
            case .integer(let value): _ = advance(); return .integer(-value, position: position)
            case .decimal(let text): _ = advance(); return .decimal("-" + text, position: position)
            default: throw error("expected a number after '-'")
            }
        case .keyword("TRUE"), .keyword("YES"):
            _ = advance()
            return .boolean(true, position: position)
        case .keyword("FALSE"), .keyword("NO"):
            _ = advance()
            return .boolean(false, position: position)
        case .keyword("NIL"), .keyword("NULL"):
            _ = advance()
            return .null(position: position)
        case .symbol("{"):
            _ = advance()
            var elements: [ExpressionSyntax] = []
            if !isSymbol("}") {
                elements.append(try parseExpression())
                while isSymbol(",") {
                    _ = advance()
                    elements.append(try parseExpression())
                }
            }
            try expect("}", "to close the collection opened at offset \(position)")
            return .collection(elements, position: position)
        case .keyword("SUBQUERY"):
            _ = advance()
            try expect("(", "after SUBQUERY")
            let collection = try parseExpression()
            try expect(",", "after the SUBQUERY collection")
            guard case .variable(let variable) = current.kind else {
                throw error("expected the SUBQUERY variable ($x), found \(describe(current))")
            }
            _ = advance()
            try expect(",", "after the SUBQUERY variable")
            let predicate = try parsePredicate()
            try expect(")", "to close SUBQUERY")
            return .subquery(collection: collection, variable: variable, predicate: predicate, position: position)
        case .symbol("("):
            _ = advance()
            let inner = try parseExpression()
            try expect(")", "to close the parenthesis opened at offset \(position)")
            return inner
        case .end:
            throw error("the predicate ends where a value or key was expected")
        default:
            throw error("expected a key, a value or an argument, found \(describe(token))")
        }
    }
}

extension PredicateSyntaxError {
    /// The message with the source quoted and a caret under the offending character.
    func rendered(in source: String) -> String {
        "\(message) (at offset \(position))\n" + Self.quoted(source, caretAt: position)
    }

    /// The source indented, with a caret under the character at `position`.
    static func quoted(_ source: String, caretAt position: Int) -> String {
        "  \(source)\n  " + String(repeating: " ", count: max(0, min(position, source.count))) + "^"
    }
}
