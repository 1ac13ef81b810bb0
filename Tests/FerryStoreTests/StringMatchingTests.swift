import Testing
@testable import FerryStore

@Suite("Predicate string operators, Unicode-aware")
struct StringMatchingTests {
    @Test("Core Data's verified cases: CONTAINS[cd] 'CAFE' matches 'Café con Leche'; LIKE and MATCHES match whole strings")
    func coreDataCases() {
        #expect(StringMatching.contains("Café con Leche", "CAFE", caseInsensitive: true, diacriticInsensitive: true))
        #expect(!StringMatching.contains("Café con Leche", "CAFE", caseInsensitive: true))
        #expect(!StringMatching.contains("Café con Leche", "CAFE", diacriticInsensitive: true))
        #expect(StringMatching.like("prefix-123", "prefix-*"))
        #expect(StringMatching.matches("abc-suffix", ".*-suffix") == true)
        #expect(StringMatching.matches("abc-suffix-no", ".*-suffix") == false, "MATCHES is a whole-string match")
    }

    @Test("Case folding works beyond ASCII")
    func unicodeCase() {
        #expect(StringMatching.beginsWith("ÉCOLE", "éc", caseInsensitive: true))
        // Full case folding: ß folds to "ss", as in Foundation's case-insensitive comparison.
        #expect(StringMatching.endsWith("Straße", "SSE", caseInsensitive: true))
        #expect(!StringMatching.endsWith("Straße", "SSE"))
        #expect(StringMatching.contains("ПРИВЕТ мир", "привет", caseInsensitive: true))
        #expect(!StringMatching.contains("ПРИВЕТ мир", "привет"))
        #expect(StringMatching.beginsWith("Ωmega", "ω", caseInsensitive: true))
    }

    @Test("Diacritics are ignored with [d], and composed and decomposed forms are equal")
    func diacritics() {
        #expect(StringMatching.beginsWith("Émile", "Emi", diacriticInsensitive: true))
        #expect(!StringMatching.beginsWith("Émile", "Emi"))
        #expect(StringMatching.beginsWith("E\u{301}mile", "Émi"), "decomposed é equals composed é")
        #expect(StringMatching.endsWith("naïve", "ive", diacriticInsensitive: true))
        #expect(StringMatching.like("Zoë", "zoe", caseInsensitive: true, diacriticInsensitive: true))
    }

    @Test("BEGINSWITH, ENDSWITH, CONTAINS edge cases")
    func edges() {
        #expect(StringMatching.beginsWith("abc", ""))
        #expect(StringMatching.contains("abc", ""))
        #expect(!StringMatching.contains("ab", "abc"))
        #expect(StringMatching.endsWith("abc", "abc"))
        #expect(!StringMatching.beginsWith("", "a"))
    }

    @Test("LIKE wildcards: * any run, ? one character, escapes, whole string")
    func likePatterns() {
        #expect(StringMatching.like("John", "J*n"))
        #expect(StringMatching.like("Jn", "J*n"))
        #expect(StringMatching.like("John", "J??n"))
        #expect(!StringMatching.like("John", "J?n"))
        #expect(!StringMatching.like("Johnny", "J*n"), "whole string")
        #expect(StringMatching.like("a*b", "a\\*b"))
        #expect(!StringMatching.like("axb", "a\\*b"))
        #expect(StringMatching.like("", "*"))
        #expect(StringMatching.like("aaa", "*a*a*"))
        #expect(StringMatching.like("JOHN", "j*n", caseInsensitive: true))
    }

    @Test("MATCHES uses ICU syntax; a bad expression is reported as nil")
    func matchesPatterns() {
        #expect(StringMatching.matches("2024-05-01", #"\d{4}-\d{2}-\d{2}"#) == true)
        #expect(StringMatching.matches("ABC", "[a-c]+", caseInsensitive: true) == true)
        #expect(StringMatching.matches("ABC", "[a-c]+") == false)
        #expect(StringMatching.matches("x", "(") == nil)
    }
}
