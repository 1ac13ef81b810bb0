import Testing
@testable import FerryStore

@Suite("JSON parser")
struct JSONParserTests {
    @Test("Values, escapes, surrogate pairs and numbers")
    func values() throws {
        let value = try JSONValue.parse(#" { "b" : [1, -2, 3.5, 1e3, 9223372036854775807, 9223372036854775808], "a": "x\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00", "c": {"n": null, "t": true, "f": false}} "#)
        #expect(value["a"] == .string("x\"\\/\u{08}\u{0C}\n\r\té😀"))
        #expect(value["b"] == .array([.integer(1), .integer(-2), .number(3.5), .number(1000), .integer(Int64.max), .number(9_223_372_036_854_775_808)]))
        #expect(value["c"]?["n"] == .null && value["c"]?["t"] == .bool(true) && value["c"]?["f"] == .bool(false))
        #expect(value.objectMembers?.map(\.0) == ["a", "b", "c"], "members sorted by key")
        #expect(try JSONValue.parse("\"Zoë\"") == .string("Zoë"))
    }

    static let bad: [(String, String)] = [
        ("", "ends where a value was expected"), ("{", "expected a key"), (#"{"a":1,}"#, "expected a key"),
        (#"{"a":1 "b":2}"#, "expected ',' or '}'"), ("[1 2]", "expected ',' or ']'"), (#"{"a":1,"a":2}"#, "duplicate key 'a'"),
        ("01", "unexpected text after"), ("1.", "expected a digit after '.'"), ("-", "expected a digit"), ("1e", "exponent"),
        ("tru", "expected true"), ("\"a\u{01}\"", "unescaped control character"), (#""\x""#, "unknown escape"),
        (#""\ud800x""#, "high surrogate"), (#""\u12""#, "four hex digits"), ("\"abc", "ends inside a string"), ("1e999", "out of range"),
        (String(repeating: "[", count: 600), "nesting deeper than 512"), ("[1] 2", "unexpected text after"),
    ]

    @Test("Malformed JSON is refused with the problem and the offset", arguments: bad.indices)
    func malformed(index: Int) {
        let (text, message) = Self.bad[index]
        do {
            let value = try JSONValue.parse(text)
            Issue.record("accepted \(text) as \(value)")
        } catch {
            #expect("\(error)".contains(message), "\(error)")
        }
    }
}
