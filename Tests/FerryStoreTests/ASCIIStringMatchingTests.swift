import Testing
import FerryStore

/// The SQLite store answers string operators from raw bytes when the deciding
/// bytes are ASCII; whenever it answers, it must agree with the full Unicode rules.
@Suite("ASCII shortcut of the string operators")
struct ASCIIStringMatchingTests {
    static let pieces = ["a", "A", "o", "O", "jo", "Jo", "s", "ss", "S", "ß", "\u{308}", "\u{301}", "é", "e\u{301}", "K", "\u{212A}",
                         "k", "ﬀ", "f", " ", "%", "_", "İ", "i", "x", ""]
    static let operators: [StringOperator] = [.equal, .beginsWith, .contains, .endsWith]

    func shortcut(_ text: String, _ pattern: String, _ op: StringOperator, _ caseInsensitive: Bool) -> Bool? {
        Array(text.utf8).withUnsafeBufferPointer { textBytes in
            Array(pattern.utf8).withUnsafeBufferPointer { patternBytes in
                ASCIIStringMatching.match(textBytes, patternBytes, op, caseInsensitive: caseInsensitive)
            }
        }
    }

    @Test("Agrees with the Unicode rules on every pair of short strings built from tricky pieces")
    func agreement() {
        var strings: Set<String> = []
        for a in Self.pieces { for b in Self.pieces { strings.insert(a + b) } }
        for a in ["jo", "Jo"] { for b in Self.pieces { for c in ["", "x", "\u{308}"] { strings.insert(a + b + c) } } }
        let patterns = ["", "jo", "JO", "o", "s", "ss", "SS", "%", "k", "i", "a", "x", "é", "ß", "e\u{301}", "\u{308}", "jos", "JOS", "jo%"]
        var answered = 0
        var disagreements: [String] = []
        for text in strings {
            for pattern in patterns {
                for op in Self.operators {
                    for options in [StringOptions(), .caseInsensitive, .diacriticInsensitive, [.caseInsensitive, .diacriticInsensitive]] {
                        guard let fast = shortcut(text, pattern, op, options.contains(.caseInsensitive)) else { continue }
                        answered += 1
                        if fast != PredicateEvaluator.match(text, op, pattern, options) {
                            disagreements.append("\(op.rawValue) \(options.rawValue) \(Array(text.unicodeScalars)) \(Array(pattern.unicodeScalars))")
                        }
                    }
                }
            }
        }
        #expect(disagreements.isEmpty, "\(disagreements.prefix(10))")
        #expect(answered > 10_000, "the shortcut answers most ASCII cases (\(answered))")
    }

    @Test("Leaves to the Unicode rules what needs them")
    func declines() {
        #expect(shortcut("jo\u{308}", "jo", .beginsWith, false) == nil, "a combining mark after the prefix")
        #expect(shortcut("Straße", "STRASSE", .equal, true) == nil)
        #expect(shortcut("\u{212A}elvin", "kel", .beginsWith, true) == nil)
        #expect(shortcut("name", "n", .like, true) == nil)
        #expect(shortcut("Johnny", "jo", .beginsWith, true) == true)
        #expect(shortcut("Johnny", "jo", .beginsWith, false) == false)
        #expect(shortcut("Johnny", "NY", .endsWith, true) == true)
        #expect(shortcut("Johnny", "HN", .contains, true) == true)
    }
}
