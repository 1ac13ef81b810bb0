import Foundation

/// The string operators of predicates, with Core Data's `[c]` (case-insensitive)
/// and `[d]` (diacritic-insensitive) options, for any Unicode text.
///
/// Both the in-memory evaluator and the SQLite store (through a registered SQL
/// function) use these, so the two always agree.
enum StringMatching {
    /// The string as compared under `options`: Unicode case folding for `[c]`,
    /// removal of diacritics for `[d]` ("Café" ≈ "CAFE" under `[cd]`).
    static func normalized(_ text: String, caseInsensitive: Bool, diacriticInsensitive: Bool) -> String {
        var options: String.CompareOptions = []
        if caseInsensitive { options.insert(.caseInsensitive) }
        if diacriticInsensitive { options.insert(.diacriticInsensitive) }
        guard !options.isEmpty else { return text }
        return text.folding(options: options, locale: nil)
    }

    static func beginsWith(_ text: String, _ prefix: String, caseInsensitive: Bool = false, diacriticInsensitive: Bool = false) -> Bool {
        scalars(text, caseInsensitive, diacriticInsensitive).starts(with: scalars(prefix, caseInsensitive, diacriticInsensitive))
    }

    static func endsWith(_ text: String, _ suffix: String, caseInsensitive: Bool = false, diacriticInsensitive: Bool = false) -> Bool {
        scalars(text, caseInsensitive, diacriticInsensitive).reversed().starts(with: scalars(suffix, caseInsensitive, diacriticInsensitive).reversed())
    }

    static func contains(_ text: String, _ part: String, caseInsensitive: Bool = false, diacriticInsensitive: Bool = false) -> Bool {
        let haystack = scalars(text, caseInsensitive, diacriticInsensitive)
        let needle = scalars(part, caseInsensitive, diacriticInsensitive)
        guard !needle.isEmpty else { return true }
        guard needle.count <= haystack.count else { return false }
        for start in 0...(haystack.count - needle.count) where haystack[start..<(start + needle.count)].elementsEqual(needle) {
            return true
        }
        return false
    }

    /// `LIKE`: the whole string matches a pattern where `*` is any run of
    /// characters and `?` any one character (`\*`, `\?` are literal).
    static func like(_ text: String, _ pattern: String, caseInsensitive: Bool = false, diacriticInsensitive: Bool = false) -> Bool {
        let subject = Array(normalized(text, caseInsensitive: caseInsensitive, diacriticInsensitive: diacriticInsensitive))
        var tokens: [LikeToken] = []
        var characters = Array(normalized(pattern, caseInsensitive: caseInsensitive, diacriticInsensitive: diacriticInsensitive)).makeIterator()
        while let c = characters.next() {
            switch c {
            case "*": tokens.append(.any)
            case "?": tokens.append(.one)
            case "\\": if let escaped = characters.next() { tokens.append(.literal(escaped)) }
            default: tokens.append(.literal(c))
            }
        }
        return likeMatch(subject[...], tokens[...])
    }

    /// `MATCHES`: the whole string matches an ICU regular expression; nil when
    /// the expression does not compile.
    static func matches(_ text: String, _ pattern: String, caseInsensitive: Bool = false, diacriticInsensitive: Bool = false) -> Bool? {
        var options: NSRegularExpression.Options = []
        if caseInsensitive { options.insert(.caseInsensitive) }
        let subject = diacriticInsensitive ? normalized(text, caseInsensitive: false, diacriticInsensitive: true) : text
        let expression = diacriticInsensitive ? normalized(pattern, caseInsensitive: false, diacriticInsensitive: true) : pattern
        guard let regex = try? NSRegularExpression(pattern: expression, options: options) else { return nil }
        let range = NSRange(subject.startIndex..., in: subject)
        guard let match = regex.firstMatch(in: subject, options: [.anchored], range: range) else { return false }
        return match.range == range
    }

    // MARK: - Helpers

    private enum LikeToken: Equatable {
        case any, one, literal(Character)
    }

    /// Matches with backtracking limited to `*` positions (linear for typical patterns).
    private static func likeMatch(_ subject: ArraySlice<Character>, _ pattern: ArraySlice<LikeToken>) -> Bool {
        var s = subject.startIndex
        var p = pattern.startIndex
        var starP: Int?
        var starS = 0
        while s < subject.endIndex {
            if p < pattern.endIndex, pattern[p] == .one || pattern[p] == .literal(subject[s]) {
                s += 1
                p += 1
            } else if p < pattern.endIndex, pattern[p] == .any {
                starP = p
                starS = s
                p += 1
            } else if let star = starP {
                p = star + 1
                starS += 1
                s = starS
            } else {
                return false
            }
        }
        while p < pattern.endIndex, pattern[p] == .any { p += 1 }
        return p == pattern.endIndex
    }

    /// Compares by Unicode scalars after normalisation, so that composed and
    /// decomposed forms of the same text are equal.
    private static func scalars(_ text: String, _ caseInsensitive: Bool, _ diacriticInsensitive: Bool) -> [Unicode.Scalar] {
        Array(normalized(text, caseInsensitive: caseInsensitive, diacriticInsensitive: diacriticInsensitive)
            .precomposedStringWithCanonicalMapping.unicodeScalars)
    }
}
