import Testing
@testable import FerryStore

@Suite("JSON parser")
struct JSONParserTests {
    @Test("Values, escapes, surrogate pairs and numbers")
    func values() throws {
        let value = try JSONValue.parse(#" { "b" : [1, -2, 3.5, 1e3, 9223372036854775807, 9223372036854775808],"# +
                                        #" "a": "x\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00", "c": {"n": null, "t": true, "f": false}} "#)
        #expect(value["a"] == .string("x\"\\/\u{08}\u{0C}\n\r\té😀"))
        #expect(value["b"] == .array([.integer(1), .integer(-2), .number(3.5), .number(1000), .integer(Int64.max), .number(9_223_372_036_854_775_808)]))
        #expect(value["c"]?["n"] == .null && value["c"]?["t"] == .bool(true) && value["c"]?["f"] == .bool(false))
        #expect(value.objectMembers?.map(\.0) == ["a", "b", "c"], "members sorted by key")
        #expect(try JSONValue.parse("\"Zoë\"") == .string("Zoë"))
        // Integers are read without text up to 18 digits; longer ones through Int64's parser.
        let integers = try JSONValue.parse("[0, -0, 123456789012345678, -123456789012345678, 1234567890123456789, " +
                                           "-9223372036854775808, -9223372036854775809]")  // the last is past Int64.min
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
    @Test("An object's array member read element by element and counted: the same count, the same strictness, and null in its place")
    func countedArray() throws {
        let text = #"{"changes":[{"a":1},{"b":[2,3]},{}],"seq":4,"x":{"changes":[1]}}"#
        let (value, counted) = try JSONParser.parse(text, countingArray: "changes")
        #expect(counted == JSONParser.CountedArray(count: 3, firstNonObject: nil))
        #expect(value["changes"] == .null && value["seq"] == .integer(4))
        #expect(value["x"]?["changes"] == .array([.integer(1)]), "only the top-level member is counted")
        #expect(try JSONParser.parse(#"{"changes":[{},2,{},"s"]}"#, countingArray: "changes").counted == .init(count: 4, firstNonObject: 1))
        #expect(try JSONParser.parse(#"{"changes":[]}"#, countingArray: "changes").counted == .init(count: 0, firstNonObject: nil))
        // Not an array, or not there: parsed as usual, nothing counted.
        let notArray = try JSONParser.parse(#"{"changes":"no"}"#, countingArray: "changes")
        #expect(notArray.counted == nil && notArray.value["changes"] == .string("no"))
        #expect(try JSONParser.parse("[1]", countingArray: "changes").counted == nil)
        // The elements are checked as strictly as a whole parse checks them, and so is the object around them.
        for bad in [#"{"changes":[{"a":1,"a":2}]}"#, #"{"changes":[{}],"changes":[]}"#, #"{"changes":[{},]}"#,
                    #"{"changes":[{"a":"\x"}]}"#, #"{"changes":[{}]} x"#, "{\"changes\":[" + String(repeating: "[", count: 600)] {
            #expect(throws: JSONParser.Failure.self, "\(bad)") { try JSONParser.parse(bad, countingArray: "changes") }
        }
    }
}
