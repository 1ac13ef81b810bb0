import Foundation

/// A JSON value with a deterministic writer: object members keep the order
/// they were built in (use ``sortedObject(_:)`` for canonical output),
/// numbers print in their shortest exact form, and there is no whitespace.
public enum JSONValue: Sendable, Hashable, Decodable {
    case null
    case bool(Bool)
    case integer(Int64)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([(String, JSONValue)])

    /// An object whose members are sorted by key (canonical form).
    public static func sortedObject(_ members: [String: JSONValue]) -> JSONValue {
        .object(members.sorted { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) })
    }

    /// The member with this key, for objects.
    public subscript(key: String) -> JSONValue? {
        guard case .object(let members) = self else { return nil }
        return members.first { $0.0 == key }?.1
    }

    /// The members, for objects.
    public var objectMembers: [(String, JSONValue)]? {
        if case .object(let members) = self { return members }
        return nil
    }

    /// The string, for strings.
    public var stringValue: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    /// The number, for whole numbers.
    public var integerValue: Int64? {
        if case .integer(let value) = self { return value }
        return nil
    }

    /// A short name of the kind of value, for error messages.
    public var kindName: String {
        switch self {
        case .null: "null"
        case .bool: "a boolean"
        case .integer, .number: "a number"
        case .string: "a string"
        case .array: "an array"
        case .object: "an object"
        }
    }

    // MARK: - Parsing

    /// Parses JSON text.
    /// - Throws: ``InterchangeError/malformedJSON(line:reason:)``.
    public static func parse(_ text: String, line: Int? = nil) throws(InterchangeError) -> JSONValue {
        do {
            return try JSONParser.parse(text)
        } catch {
            throw InterchangeError.malformedJSON(line: line, reason: error.message)
        }
    }

    /// Parses a change set's JSON text as ``parse(_:line:)`` does, with its `changes` read one at a time
    /// and not kept (they stand as `null`): for reading its other members (`origin`, `seq`…) without
    /// holding a tree of all its changes, many times the size of a large change set's text.
    /// - Throws: ``InterchangeError/malformedJSON(line:reason:)``, as ``parse(_:line:)`` would.
    package static func parseWithoutChanges(_ text: String) throws(InterchangeError) -> JSONValue {
        try parseCountingChanges(text).value
    }

    /// ``parseWithoutChanges(_:)``, and the count of the `changes` (nil when there is no such array).
    static func parseCountingChanges(_ text: String) throws(InterchangeError) -> (value: JSONValue, changes: JSONParser.CountedArray?) {
        do {
            let parsed = try JSONParser.parse(text, countingArray: "changes")
            return (parsed.value, parsed.counted)
        } catch {
            throw InterchangeError.malformedJSON(line: nil, reason: error.message)
        }
    }

    public init(from decoder: any Decoder) throws {
        if let container = try? decoder.container(keyedBy: AnyKey.self) {
            var members: [(String, JSONValue)] = []
            for key in container.allKeys.sorted(by: { $0.stringValue < $1.stringValue }) {
                members.append((key.stringValue, try container.decode(JSONValue.self, forKey: key)))
            }
            self = .object(members)
            return
        }
        if var container = try? decoder.unkeyedContainer() {
            var elements: [JSONValue] = []
            while !container.isAtEnd { elements.append(try container.decode(JSONValue.self)) }
            self = .array(elements)
            return
        }
        let container = try decoder.singleValueContainer()
        if container.decodeNil() { self = .null }
        else if let value = try? container.decode(Bool.self) { self = .bool(value) }
        else if let value = try? container.decode(Int64.self) { self = .integer(value) }
        else if let value = try? container.decode(Double.self) { self = .number(value) }
        else { self = .string(try container.decode(String.self)) }
    }

    private struct AnyKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    // MARK: - Writing

    /// The compact JSON text.
    public var text: String {
        var output = ""
        write(to: &output)
        return output
    }

    private func write(to output: inout String) {
        switch self {
        case .null: output += "null"
        case .bool(let value): output += value ? "true" : "false"
        case .integer(let value): output += String(value)
        case .number(let value):
            if value.isFinite {
                output += "\(value)"
            } else {
                output += value.isNaN ? "\"NaN\"" : (value > 0 ? "\"Infinity\"" : "\"-Infinity\"")
            }
        case .string(let value): Self.writeString(value, to: &output)
        case .array(let elements):
            output += "["
            for (index, element) in elements.enumerated() {
                if index > 0 { output += "," }
                element.write(to: &output)
            }
            output += "]"
        case .object(let members):
            output += "{"
            for (index, (key, value)) in members.enumerated() {
                if index > 0 { output += "," }
                Self.writeString(key, to: &output)
                output += ":"
                value.write(to: &output)
            }
            output += "}"
        }
    }

    /// Appends `value` as a JSON string literal (quoted, escaped).
    package static func appendQuoted(_ value: String, to output: inout String) {
        writeString(value, to: &output)
    }

    private static func writeString(_ value: String, to output: inout String) {
        if !value.utf8.contains(where: { $0 < 0x20 || $0 == 0x22 || $0 == 0x5C }) {
            output += "\""
            output += value
            output += "\""
            return
        }
        output += "\""
        for scalar in value.unicodeScalars {
            switch scalar {
            case "\"": output += "\\\""
            case "\\": output += "\\\\"
            case "\n": output += "\\n"
            case "\r": output += "\\r"
            case "\t": output += "\\t"
            case let c where c.value < 0x20:
                let hex = String(c.value, radix: 16)
                output += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: output.unicodeScalars.append(scalar)
            }
        }
        output += "\""
    }

    public static func == (lhs: JSONValue, rhs: JSONValue) -> Bool { lhs.text == rhs.text }
    public func hash(into hasher: inout Hasher) { hasher.combine(text) }
}
