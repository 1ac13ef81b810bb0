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
        // Integers are read without text up to 18 digits; longer ones through Int64's parser.
        let integers = try JSONValue.parse("[0, -0, 123456789012345678, -123456789012345678, 1234567890123456789, -9223372036854775808, -9223372036854775809]")  // the last is past Int64.min
        #expect(integers == .array([.integer(0), .integer(0), .integer(123_456_789_012_345_678), .integer(-123_456_789_012_345_678),
                                    .integer(1_234_567_890_123_456_789), .integer(Int64.min), .number(-9_223_372_036_854_775_808.0)]))
    }

    static let bad: [(String, String)] = [
        ("", "ends where a value was expected"), ("{", "expected a key"), (#"{"a":1,}"#, "expected a key"),
        (#"{"a":1 "b":2}"#, "expected ',' or '}'"), ("[1 2]", "expected ',' or ']'"), (#"{"a":1,"a":2}"#, "duplicate key 'a'"),
        (#"{"b":1,"a":2,"c":3,"b":4}"#, "duplicate key 'b'"), (#"{"n":nul}"#, "expected null"),
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
