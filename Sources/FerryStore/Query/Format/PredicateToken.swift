import FerryModel

/// One token of a predicate format string, with its offset (in characters) in the source.
struct PredicateToken: Equatable {
    enum Kind: Equatable {
        case identifier(String)
        /// A keyword, upper-cased (`AND`, `BEGINSWITH`, `NIL`, …). Keywords are case-insensitive.
        case keyword(String)
        case string(String)
        case integer(Int64)
        case decimal(String)
        /// `%@`, `%K`, `%d`, `%i`, `%f`, `%s` … — the letter after `%`.
        case formatSpecifier(Character)
        /// `$NAME`.
        case variable(String)
        /// `@count`, `@sum`, … (lower-cased).
        case collectionOperator(String)
        /// Punctuation and operators: `(` `)` `{` `}` `[` `]` `,` `.` `==` `!=` `<=` `&&` …
        case symbol(String)
        case end
    }

    var kind: Kind
    /// Zero-based character offset of the token's first character.
    var position: Int
}

/// Splits a predicate format string into tokens.
///
/// Keywords are recognised case-insensitively; a `#` before a word makes it an
/// identifier even when it is a keyword (`#NOT` is a key named NOT). Strings
/// take single or double quotes with `\` escapes (`\n`, `\t`, `\\`, `\'`,
/// `\"`, `\uXXXX`).
struct PredicateLexer {
    static let keywords: Set<String> = [
        "AND", "OR", "NOT", "TRUEPREDICATE", "FALSEPREDICATE", "BEGINSWITH", "CONTAINS", "ENDSWITH",
        "LIKE", "MATCHES", "IN", "BETWEEN", "ANY", "SOME", "ALL", "NONE", "NIL", "NULL", "TRUE", "FALSE",
        "YES", "NO", "SELF", "SUBQUERY", "FIRST", "LAST", "SIZE",
    ]

    private let characters: [Character]
    private var index = 0

    init(_ source: String) {
        characters = Array(source)
    }

    static func tokens(of source: String) throws(PredicateSyntaxError) -> [PredicateToken] {
        var lexer = PredicateLexer(source)
        var tokens: [PredicateToken] = []
        while true {
            let token = try lexer.next()
            tokens.append(token)
            if token.kind == .end { return tokens }
        }
    }

    private func peek(_ offset: Int = 0) -> Character? {
        index + offset < characters.count ? characters[index + offset] : nil
    }

    mutating func next() throws(PredicateSyntaxError) -> PredicateToken {
        while let c = peek(), c.isWhitespace { index += 1 }
        let start = index
        guard let c = peek() else { return PredicateToken(kind: .end, position: start) }

        if c == "'" || c == "\"" { return PredicateToken(kind: .string(try readString(quote: c)), position: start) }
        if c.isNumber || (c == "." && peek(1)?.isNumber == true) { return PredicateToken(kind: try readNumber(), position: start) }
        if c == "#", let next = peek(1), next.isLetter || next == "_" {
            index += 1
            return PredicateToken(kind: .identifier(readWord()), position: start)
        }
        if c.isLetter || c == "_" {
            let word = readWord()
            let upper = word.uppercased()
            return PredicateToken(kind: Self.keywords.contains(upper) ? .keyword(upper) : .identifier(word), position: start)
        }
        if c == "$" {
            index += 1
            guard let first = peek(), first.isLetter || first == "_" else {
                throw PredicateSyntaxError(position: start, message: "'$' must be followed by a variable name")
            }
            return PredicateToken(kind: .variable(readWord()), position: start)
        }
        if c == "@" {
            index += 1
            let word = readWord().lowercased()
            guard ["count", "sum", "avg", "min", "max"].contains(word) else {
                throw PredicateSyntaxError(position: start, message: "unknown collection operator '@\(word)'; use @count, @sum, @avg, @min or @max")
            }
            return PredicateToken(kind: .collectionOperator(word), position: start)
        }
        if c == "%" {
            index += 1
            guard let specifier = peek() else {
                throw PredicateSyntaxError(position: start, message: "'%' at the end; use %@, %K, %d, %i, %f or %s")
            }
            index += 1
            // %ld, %lld, %lu … are integers too.
            if specifier == "l" {
                while peek() == "l" { index += 1 }
                guard let letter = peek(), "diu".contains(letter) else {
                    throw PredicateSyntaxError(position: start, message: "unsupported format specifier; use %@, %K, %d, %i, %f or %s")
                }
                index += 1
                return PredicateToken(kind: .formatSpecifier("d"), position: start)
            }
            guard "@KdifsuDgGeE".contains(specifier) else {
                throw PredicateSyntaxError(position: start, message: "unsupported format specifier '%\(specifier)'; use %@, %K, %d, %i, %f or %s")
            }
            return PredicateToken(kind: .formatSpecifier(specifier), position: start)
        }
        for symbol in ["==", "!=", "<>", "<=", ">=", "=<", "=>", "&&", "||"] where matches(symbol) {
            index += symbol.count
            return PredicateToken(kind: .symbol(symbol), position: start)
        }
        if "()=<>!{}[],.+-*/".contains(c) {
            index += 1
            return PredicateToken(kind: .symbol(String(c)), position: start)
        }
        throw PredicateSyntaxError(position: start, message: "unexpected character '\(c)'")
    }

    private func matches(_ symbol: String) -> Bool {
        for (offset, character) in symbol.enumerated() where peek(offset) != character { return false }
        return true
    }

    private mutating func readWord() -> String {
        var word = ""
        while let c = peek(), c.isLetter || c.isNumber || c == "_" {
            word.append(c)
            index += 1
        }
        return word
    }

    private mutating func readNumber() throws(PredicateSyntaxError) -> PredicateToken.Kind {
        let start = index
        var text = ""
        if peek() == "0", let x = peek(1), x == "x" || x == "X" {
            index += 2
            while let c = peek(), c.isHexDigit { text.append(c); index += 1 }
            guard let value = Int64(text, radix: 16) else {
                throw PredicateSyntaxError(position: start, message: "'0x\(text)' is not a hexadecimal number")
            }
            return .integer(value)
        }
        var isDecimal = false
        while let c = peek(), c.isNumber || c == "." || ((c == "e" || c == "E") && !text.isEmpty)
                || ((c == "+" || c == "-") && (text.last == "e" || text.last == "E")) {
            if c == "." {
                // `1.` followed by a letter is a key path step, not a fraction.
                if isDecimal || !(peek(1)?.isNumber ?? false) { break }
                isDecimal = true
            }
            if c == "e" || c == "E" { isDecimal = true }
            text.append(c)
            index += 1
        }
        if !isDecimal, let value = Int64(text) { return .integer(value) }
        guard Double(text) != nil else {
            throw PredicateSyntaxError(position: start, message: "'\(text)' is not a number")
        }
        return .decimal(text)
    }

    private mutating func readString(quote: Character) throws(PredicateSyntaxError) -> String {
        let start = index
        index += 1
        var value = ""
        while let c = peek() {
            index += 1
            if c == quote { return value }
            guard c == "\\" else { value.append(c); continue }
            guard let escaped = peek() else { break }
            index += 1
            switch escaped {
            case "n": value.append("\n")
            case "t": value.append("\t")
            case "r": value.append("\r")
            case "0": value.append("\0")
            case "u":
                let hex = String((0..<4).compactMap { peek($0) })
                guard hex.count == 4, let code = UInt32(hex, radix: 16), let scalar = Unicode.Scalar(code) else {
                    throw PredicateSyntaxError(position: index - 2, message: "'\\u' must be followed by four hexadecimal digits")
                }
                index += 4
                value.unicodeScalars.append(scalar)
            default: value.append(escaped)
            }
        }
        throw PredicateSyntaxError(position: start, message: "the string starting here is not closed with \(quote)")
    }
}

/// A syntax error in a predicate format string, at a character offset (the binder reports it as
/// a ``PredicateFormatError`` of code `syntax`, quoting the predicate).
struct PredicateSyntaxError: FerryError, Equatable {
    /// A syntax error has one kind.
    enum Code: String, Hashable, Sendable {
        /// The text is not a predicate here.
        case syntax
    }

    var position: Int
    var message: String
    var code: Code { .syntax }
    var description: String { "\(message), at offset \(position)" }
}
