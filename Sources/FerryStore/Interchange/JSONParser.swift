import Foundation
import FerryModel

/// A strict JSON parser from UTF-8 bytes to ``JSONValue``, written for speed:
/// change sets are parsed on every replay, and Foundation's `JSONDecoder`
/// through `Decodable` spent most of a replay building coding paths.
///
/// Strict: one value, no trailing text, no duplicate keys, no unescaped control
/// characters, nesting at most 512 deep. Integers that fit `Int64` become
/// `.integer`, other numbers `.number`. Object members are sorted by key.
struct JSONParser {
    /// The text, borrowed for the parse (see ``parse(_:)`` and ``Lines``): unchecked reads
    /// from a buffer, not an array the optimizer must bounds-check on every byte.
    private let bytes: UnsafeBufferPointer<UInt8>
    private var position = 0
    private var depth = 0
    static let maximumDepth = 512

    struct Failure: FerryError {
        /// One kind: text that is not JSON.
        enum Code: String, Hashable, Sendable {
            /// The text is not JSON here.
            case notJSON
        }

        /// What is wrong.
        let reason: String
        /// The byte offset where it was found.
        let position: Int

        var message: String { "\(reason) at offset \(position)" }
        var code: Code { .notJSON }
        var description: String { message }
    }

    static func parse(_ text: String) throws(Failure) -> JSONValue {
        var text = text
        return try text.withUTF8 { bytes in
            Result { () throws(Failure) in
                var parser = JSONParser(bytes: bytes)
                parser.skipWhitespace()
                let value = try parser.value()
                parser.skipWhitespace()
                guard parser.position == bytes.count else { throw parser.failure("unexpected text after the JSON value") }
                return value
            }
        }.get()
    }

    /// An array member of an object read an element at a time and dropped, only counted.
    struct CountedArray: Equatable {
        /// How many elements it has.
        var count = 0
        /// The index of its first element that is not an object, if any.
        var firstNonObject: Int?
    }

    /// Parses `text` as ``parse(_:)`` does, except that when it is an object whose member `name` is an
    /// array, that array's elements are parsed one at a time (as strictly) and dropped, only counted:
    /// the member stands as `null` in the object returned, and its count comes as `counted` (nil when
    /// there is no such member, or it is not an array). A change set's envelope is read so, without
    /// holding a tree of all its changes (for a change set of hundreds of megabytes, many times its text).
    static func parse(_ text: String, countingArray name: String) throws(Failure) -> (value: JSONValue, counted: CountedArray?) {
        var text = text
        return try text.withUTF8 { bytes in
            Result { () throws(Failure) in
                var parser = JSONParser(bytes: bytes)
                parser.skipWhitespace()
                var counted: CountedArray?
                let value: JSONValue
                if parser.position < bytes.count, bytes[parser.position] == UInt8(ascii: "{") {
                    value = try parser.object(counting: name, into: &counted)
                } else {
                    value = try parser.value()
                }
                parser.skipWhitespace()
                guard parser.position == bytes.count else { throw parser.failure("unexpected text after the JSON value") }
                return (value, counted)
            }
        }.get()
    }

    private init(bytes: UnsafeBufferPointer<UInt8>) {
        self.bytes = bytes
    }

    private func failure(_ reason: String) -> Failure {
        Failure(reason: reason, position: position)
    }

    /// JSON lines: values one after another, each starting on a line of its own (one may run
    /// over several lines, as a pretty-printed array does). Reads the text in place, in one pass.
    struct Lines {
        private var parser: JSONParser

        /// Reads `bytes`, which must stay valid while the reader is used.
        init(_ bytes: UnsafeBufferPointer<UInt8>) {
            parser = JSONParser(bytes: bytes)
        }

        /// The next value and the byte offset where it starts; nil at the end of the text.
        mutating func next() throws(Failure) -> (value: JSONValue, start: Int)? {
            parser.skipWhitespace()
            guard parser.position < parser.bytes.count else { return nil }
            let start = parser.position
            let value = try parser.value()
            while parser.position < parser.bytes.count,
                  parser.bytes[parser.position] == 0x20 || parser.bytes[parser.position] == 0x09 || parser.bytes[parser.position] == 0x0D {
                parser.position += 1
            }
            guard parser.position == parser.bytes.count || parser.bytes[parser.position] == 0x0A else {
                throw parser.failure("more text after a value on its line (one JSON value per line)")
            }
            return (value, start)
        }

        /// The 1-based line and the offset within it of a byte offset, for messages.
        func place(of offset: Int) -> (line: Int, column: Int) {
            var line = 1
            var lineStart = 0
            for index in 0..<min(offset, parser.bytes.count) where parser.bytes[index] == 0x0A {
                line += 1
                lineStart = index + 1
            }
            return (line, offset - lineStart)
        }
    }

    private mutating func skipWhitespace() {
        while position < bytes.count, bytes[position] == 0x20 || bytes[position] == 0x0A || bytes[position] == 0x0D || bytes[position] == 0x09 {
            position += 1
        }
    }

    private mutating func value() throws(Failure) -> JSONValue {
        guard position < bytes.count else { throw failure("the text ends where a value was expected") }
        switch bytes[position] {
        case UInt8(ascii: "{"): return try object()
        case UInt8(ascii: "["): return try array()
        case UInt8(ascii: "\""): return .string(try string())
        case UInt8(ascii: "t"): try literal("true"); return .bool(true)
        case UInt8(ascii: "f"): try literal("false"); return .bool(false)
        case UInt8(ascii: "n"): try literal("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try number()
        default: throw failure("unexpected character '\(Character(Unicode.Scalar(bytes[position])))'")
        }
    }

    private mutating func literal(_ word: StaticString) throws(Failure) {
        let expected = UnsafeBufferPointer(start: word.utf8Start, count: word.utf8CodeUnitCount)
        guard position + expected.count <= bytes.count, bytes[position..<(position + expected.count)].elementsEqual(expected) else {
            throw failure("expected \(word)")
        }
        position += expected.count
    }

    private mutating func enter() throws(Failure) {
        depth += 1
        if depth > Self.maximumDepth { throw failure("nesting deeper than \(Self.maximumDepth) levels") }
    }

    private mutating func object() throws(Failure) -> JSONValue {
        var unused: CountedArray?
        return try object(counting: nil, into: &unused)
    }

    /// An object; when `counting` names a member whose value is an array, that array is read by
    /// ``countedArray()`` into `counted` and the member stands as `null`.
    private mutating func object(counting name: String?, into counted: inout CountedArray?) throws(Failure) -> JSONValue {
        try enter()
        position += 1
        var members: [(String, JSONValue)] = []
        members.reserveCapacity(4)
        skipWhitespace()
        if position < bytes.count, bytes[position] == UInt8(ascii: "}") {
            position += 1
            depth -= 1
            return .object([])
        }
        while true {
            skipWhitespace()
            guard position < bytes.count, bytes[position] == UInt8(ascii: "\"") else { throw failure("expected a key in quotes") }
            let key = try string()
            skipWhitespace()
            guard position < bytes.count, bytes[position] == UInt8(ascii: ":") else { throw failure("expected ':' after a key") }
            position += 1
            skipWhitespace()
            if let name, key == name, position < bytes.count, bytes[position] == UInt8(ascii: "[") {
                counted = try countedArray()
                members.append((key, .null))
            } else {
                members.append((key, try value()))
            }
            skipWhitespace()
            guard position < bytes.count else { throw failure("the text ends inside an object") }
            if bytes[position] == UInt8(ascii: ",") { position += 1; continue }
            guard bytes[position] == UInt8(ascii: "}") else { throw failure("expected ',' or '}' in an object") }
            position += 1
            depth -= 1
            // Canonical writers sort keys already; then this is one pass, and a duplicate key is next to its twin.
            var sorted = true
            for index in members.indices.dropFirst() where !(members[index - 1].0 < members[index].0) {
                sorted = false
                break
            }
            if !sorted {
                members.sort { $0.0 < $1.0 }
                for index in members.indices.dropFirst() where members[index - 1].0 == members[index].0 {
                    throw failure("duplicate key '\(members[index].0)'")
                }
            }
            return .object(members)
        }
    }

    private mutating func array() throws(Failure) -> JSONValue {
        try enter()
        position += 1
        var elements: [JSONValue] = []
        skipWhitespace()
        if position < bytes.count, bytes[position] == UInt8(ascii: "]") {
            position += 1
            depth -= 1
            return .array([])
        }
        while true {
            skipWhitespace()
            elements.append(try value())
            skipWhitespace()
            guard position < bytes.count else { throw failure("the text ends inside an array") }
            if bytes[position] == UInt8(ascii: ",") { position += 1; continue }
            guard bytes[position] == UInt8(ascii: "]") else { throw failure("expected ',' or ']' in an array") }
            position += 1
            depth -= 1
            return .array(elements)
        }
    }

    /// An array read an element at a time, each parsed as ``value()`` parses it and then dropped.
    private mutating func countedArray() throws(Failure) -> CountedArray {
        try enter()
        position += 1
        var counted = CountedArray()
        skipWhitespace()
        if position < bytes.count, bytes[position] == UInt8(ascii: "]") {
            position += 1
            depth -= 1
            return counted
        }
        while true {
            skipWhitespace()
            if try value().objectMembers == nil, counted.firstNonObject == nil { counted.firstNonObject = counted.count }
            counted.count += 1
            skipWhitespace()
            guard position < bytes.count else { throw failure("the text ends inside an array") }
            if bytes[position] == UInt8(ascii: ",") { position += 1; continue }
            guard bytes[position] == UInt8(ascii: "]") else { throw failure("expected ',' or ']' in an array") }
            position += 1
            depth -= 1
            return counted
        }
    }

    private mutating func string() throws(Failure) -> String {
        position += 1
        let start = position
        // Fast path: no escapes.
        while position < bytes.count {
            let byte = bytes[position]
            if byte == UInt8(ascii: "\"") {
                let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<position]), as: UTF8.self)
                position += 1
                return text
            }
            if byte == UInt8(ascii: "\\") { break }
            if byte < 0x20 { throw failure("unescaped control character in a string") }
            position += 1
        }
        var scalars = String.UnicodeScalarView()
        scalars.append(contentsOf: String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<position]), as: UTF8.self).unicodeScalars)
        var utf8: [UInt8] = []
        func flush() {
            if !utf8.isEmpty {
                scalars.append(contentsOf: String(decoding: utf8, as: UTF8.self).unicodeScalars)
                utf8.removeAll(keepingCapacity: true)
            }
        }
        while position < bytes.count {
            let byte = bytes[position]
            if byte == UInt8(ascii: "\"") {
                flush()
                position += 1
                return String(scalars)
            }
            if byte < 0x20 { throw failure("unescaped control character in a string") }
            guard byte == UInt8(ascii: "\\") else {
                utf8.append(byte)
                position += 1
                continue
            }
            flush()
            position += 1
            guard position < bytes.count else { break }
            let escape = bytes[position]
            position += 1
            switch escape {
            case UInt8(ascii: "\""): scalars.append("\"")
            case UInt8(ascii: "\\"): scalars.append("\\")
            case UInt8(ascii: "/"): scalars.append("/")
            case UInt8(ascii: "b"): scalars.append("\u{08}")
            case UInt8(ascii: "f"): scalars.append("\u{0C}")
            case UInt8(ascii: "n"): scalars.append("\n")
            case UInt8(ascii: "r"): scalars.append("\r")
            case UInt8(ascii: "t"): scalars.append("\t")
            case UInt8(ascii: "u"):
                var code = try hex4()
                if (0xD800...0xDBFF).contains(code) {
                    guard position + 1 < bytes.count, bytes[position] == UInt8(ascii: "\\"), bytes[position + 1] == UInt8(ascii: "u") else {
                        throw failure("a high surrogate \\u escape must be followed by a low one")
                    }
                    position += 2
                    let low = try hex4()
                    guard (0xDC00...0xDFFF).contains(low) else { throw failure("invalid low surrogate") }
                    code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                }
                guard let scalar = Unicode.Scalar(code) else { throw failure("\\u escape names no character") }
                scalars.append(scalar)
            default:
                throw failure("unknown escape '\\\(Character(Unicode.Scalar(escape)))'")
            }
        }
        throw failure("the text ends inside a string")
    }

    private mutating func hex4() throws(Failure) -> UInt32 {
        guard position + 4 <= bytes.count else { throw failure("a \\u escape needs four hex digits") }
        var code: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[position]
            let digit: UInt32
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(byte - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(byte - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(byte - UInt8(ascii: "A") + 10)
            default: throw failure("a \\u escape needs four hex digits")
            }
            code = code * 16 + digit
            position += 1
        }
        return code
    }

    private mutating func number() throws(Failure) -> JSONValue {
        let start = position
        var isInteger = true
        if bytes[position] == UInt8(ascii: "-") { position += 1 }
        guard position < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[position]) else { throw failure("expected a digit") }
        if bytes[position] == UInt8(ascii: "0") {
            position += 1
        } else {
            while position < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[position]) { position += 1 }
        }
        if position < bytes.count, bytes[position] == UInt8(ascii: ".") {
            isInteger = false
            position += 1
            guard position < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[position]) else { throw failure("expected a digit after '.'") }
            while position < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[position]) { position += 1 }
        }
        if position < bytes.count, bytes[position] == UInt8(ascii: "e") || bytes[position] == UInt8(ascii: "E") {
            isInteger = false
            position += 1
            if position < bytes.count, bytes[position] == UInt8(ascii: "+") || bytes[position] == UInt8(ascii: "-") { position += 1 }
            guard position < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[position]) else {
                throw failure("expected a digit in the exponent")
            }
            while position < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[position]) { position += 1 }
        }
        if isInteger, position - start <= 18 {
            // Up to 18 digits always fit Int64: no text needed.
            var magnitude: Int64 = 0
            for byte in bytes[start..<position] where byte != UInt8(ascii: "-") { magnitude = magnitude * 10 + Int64(byte - UInt8(ascii: "0")) }
            return .integer(bytes[start] == UInt8(ascii: "-") ? -magnitude : magnitude)
        }
        let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<position]), as: UTF8.self)
        if isInteger, let integer = Int64(text) { return .integer(integer) }
        guard let double = Double(text), double.isFinite else { throw failure("the number \(text) is out of range") }
        return .number(double)
    }
}
