/// A byte-level shortcut for the string operators when the bytes that decide
/// the answer are all ASCII, where Unicode case folding is ASCII case folding,
/// diacritic folding changes nothing and no normalisation applies.
///
/// It answers `nil` whenever a non-ASCII byte could matter — then the caller
/// runs the full Unicode comparison (``PredicateEvaluator/match(_:_:_:_:)``).
/// The rule for prefixes: if the first `n` bytes of the value are ASCII, the
/// first `n` characters are those bytes, and the character after them must
/// also start with an ASCII byte (or not exist) so that no combining mark
/// attaches to the last one ("jö" written as `o` + U+0308 does not begin with "jo").
/// For suffixes the whole tail must be ASCII, since `[d]` drops combining marks
/// and a mark at the end would shift the alignment.
package enum ASCIIStringMatching {
    /// The answer of `op` with these options, or nil when it needs Unicode rules.
    package static func match(_ text: UnsafeBufferPointer<UInt8>, _ pattern: UnsafeBufferPointer<UInt8>,
                               _ op: StringOperator, caseInsensitive: Bool) -> Bool? {
        switch op {
        case .beginsWith:
            guard pattern.count <= text.count else { return pattern.allSatisfy { $0 < 0x80 } && text.allSatisfy { $0 < 0x80 } ? false : nil }
            return compare(text, from: 0, pattern, caseInsensitive: caseInsensitive, next: pattern.count < text.count ? text[pattern.count] : nil)
        case .endsWith:
            guard pattern.count <= text.count else { return pattern.allSatisfy { $0 < 0x80 } && text.allSatisfy { $0 < 0x80 } ? false : nil }
            // Only an all-ASCII tail lines up with the pattern: [d] drops combining
            // marks, so a mark at the end would shift the comparison.
            let start = text.count - pattern.count
            guard text[start...].allSatisfy({ $0 < 0x80 }) else { return nil }
            return compare(text, from: start, pattern, caseInsensitive: caseInsensitive, next: nil)
        case .equal:
            guard text.allSatisfy({ $0 < 0x80 }), pattern.allSatisfy({ $0 < 0x80 }) else { return nil }
            guard text.count == pattern.count else { return false }
            return compare(text, from: 0, pattern, caseInsensitive: caseInsensitive, next: nil)
        case .contains:
            guard text.allSatisfy({ $0 < 0x80 }), pattern.allSatisfy({ $0 < 0x80 }) else { return nil }
            guard pattern.count <= text.count else { return false }
            for start in 0...(text.count - pattern.count) where compare(text, from: start, pattern, caseInsensitive: caseInsensitive, next: nil) == true {
                return true
            }
            return false
        case .like, .matches:
            return nil
        }
    }

    /// Compares `pattern` with the bytes of `text` at `start`: nil at the first
    /// non-ASCII byte on either side (or a non-ASCII `next` byte after a full match).
    private static func compare(_ text: UnsafeBufferPointer<UInt8>, from start: Int, _ pattern: UnsafeBufferPointer<UInt8>,
                                caseInsensitive: Bool, next: UInt8?) -> Bool? {
        for offset in 0..<pattern.count {
            let a = text[start + offset]
            let b = pattern[offset]
            guard a < 0x80, b < 0x80 else { return nil }
            if a == b { continue }
            guard caseInsensitive, lower(a) == lower(b) else {
                // A mismatch on ASCII decides only if the rest of the pattern is ASCII too.
                return pattern[offset...].allSatisfy { $0 < 0x80 } ? false : nil
            }
        }
        if let next, next >= 0x80 { return nil }
        return true
    }

    private static func lower(_ byte: UInt8) -> UInt8 {
        byte >= 0x41 && byte <= 0x5A ? byte | 0x20 : byte
    }
}
