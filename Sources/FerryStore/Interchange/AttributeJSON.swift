import Foundation
import FerryModel

/// The JSON form of attribute values used by `ferry put` and `ferry dump`:
/// integers and floating-point numbers as JSON numbers, decimals as strings
/// (exact), booleans as JSON booleans, dates as ISO 8601 strings in UTC,
/// binary and transformable data as base64, UUIDs and URIs as strings.
public enum AttributeJSON {
    /// The JSON form of a value (nil → null).
    public static func encode(_ value: AttributeValue?) -> JSONValue {
        guard let value else { return .null }
        switch value {
        case .integer(let v): return .integer(v)
        case .decimal(let v): return .string("\(v)")
        case .double(let v): return .number(v)
        // Print a float by its own shortest digits, not those of the widened double.
        case .float(let v): return .number(Double("\(v)") ?? Double(v))
        case .string(let v): return .string(v)
        case .boolean(let v): return .bool(v)
        case .date(let v): return .string(ISO8601.format(v))
        case .binaryData(let v), .transformable(let v): return .string(v.base64EncodedString())
        case .uuid(let v): return .string(v.uuidString)
        case .uri(let v): return .string(v.absoluteString)
        }
    }

    /// Reads the JSON form of a value for an attribute of `type`.
    /// - Returns: the value (nil for JSON null), or a message saying what was expected.
    public static func decode(_ json: JSONValue, as type: AttributeType) -> Result<AttributeValue?, DecodeFailure> {
        if case .null = json { return .success(nil) }
        let expected: String
        switch type {
        case .integer16, .integer32, .integer64:
            expected = "a whole number within the range of \(type.xcodeName)"
            switch json {
            case .integer(let v) where type.integerRange?.contains(v) == true: return .success(.integer(v))
            case .number(let v):
                if let exact = Int64(exactly: v), type.integerRange?.contains(exact) == true { return .success(.integer(exact)) }
            default: break
            }
        case .decimal:
            expected = "a decimal number as a string, e.g. \"12.50\""
            switch json {
            case .string(let text):
                if let value = Decimal(string: text, locale: Locale(identifier: "en_US_POSIX")),
                   !text.isEmpty, text.allSatisfy({ "0123456789.-+eE".contains($0) }) { return .success(.decimal(value)) }
            case .integer(let v): return .success(.decimal(Decimal(v)))
            default: break
            }
        case .double, .float:
            expected = "a number"
            var number: Double?
            switch json {
            case .integer(let v): number = Double(v)
            case .number(let v): number = v
            case .string("NaN"): number = .nan
            case .string("Infinity"): number = .infinity
            case .string("-Infinity"): number = -.infinity
            default: break
            }
            if let number { return .success(type == .float ? .float(Float(number)) : .double(number)) }
        case .string:
            expected = "a string"
            if case .string(let v) = json { return .success(.string(v)) }
        case .boolean:
            expected = "true or false"
            if case .bool(let v) = json { return .success(.boolean(v)) }
        case .date:
            expected = "an ISO 8601 date-time string, e.g. \"2024-05-01T12:00:00Z\""
            if case .string(let text) = json, let date = ISO8601.parse(text) { return .success(.date(date)) }
        case .binaryData, .transformable:
            expected = "base64-encoded bytes in a string"
            if case .string(let text) = json, let data = Data(base64Encoded: text) {
                return .success(type == .binaryData ? .binaryData(data) : .transformable(data))
            }
        case .uuid:
            expected = "a UUID string"
            if case .string(let text) = json, let uuid = UUID(parsing: text) { return .success(.uuid(uuid)) }
        case .uri:
            expected = "a URI string"
            if case .string(let text) = json, let url = URL(string: text), url.scheme != nil { return .success(.uri(url)) }
        }
        return .failure(DecodeFailure(message: "\(type.xcodeName) takes \(expected); got \(json.kindName) \(json.text)"))
    }

    /// Why a JSON value is not a value of the attribute's type.
    public struct DecodeFailure: FerryError, Sendable {
        /// One kind: a value of another type.
        public enum Code: String, Hashable, Sendable {
            /// The JSON value is not of the attribute's type.
            case wrongType
        }

        /// What was expected and what was found.
        public let message: String
        public var code: Code { .wrongType }
        public var description: String { message }
    }
}

/// ISO 8601 date-times in UTC, with as many fractional digits as the value
/// needs (up to microseconds), so that formatting is canonical.
public enum ISO8601 {
    /// `2024-05-01T12:00:00Z`, or `2024-05-01T12:00:00.25Z` with a fraction.
    public static func format(_ date: Date) -> String {
        let seconds = date.timeIntervalSince1970
        var whole = seconds.rounded(.down)
        var micros = Int(((seconds - whole) * 1_000_000).rounded())
        if micros >= 1_000_000 { whole += 1; micros -= 1_000_000 }
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC") ?? .current
        let c = calendar.dateComponents([.year, .month, .day, .hour, .minute, .second], from: Date(timeIntervalSince1970: whole))
        func pad(_ value: Int?, _ width: Int) -> String {
            let text = String(value ?? 0)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        var text = "\(pad(c.year, 4))-\(pad(c.month, 2))-\(pad(c.day, 2))T\(pad(c.hour, 2)):\(pad(c.minute, 2)):\(pad(c.second, 2))"
        if micros > 0 {
            var fraction = pad(micros, 6)
            while fraction.hasSuffix("0") { fraction.removeLast() }
            text += "." + fraction
        }
        return text + "Z"
    }

    /// Parses `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`; nil otherwise.
    public static func parse(_ text: String) -> Date? {
        let pattern = #"^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(\.\d+)?(Z|[+-]\d{2}:\d{2})$"#
        guard let regex = try? NSRegularExpression(pattern: pattern),
              let match = regex.firstMatch(in: text, range: NSRange(text.startIndex..., in: text)) else { return nil }
        func group(_ index: Int) -> String? {
            guard let range = Range(match.range(at: index), in: text) else { return nil }
            return String(text[range])
        }
        guard let year = group(1).flatMap(Int.init), let month = group(2).flatMap(Int.init), let day = group(3).flatMap(Int.init),
              let hour = group(4).flatMap(Int.init), let minute = group(5).flatMap(Int.init), let second = group(6).flatMap(Int.init),
              (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 61 else { return nil }
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC") ?? .current
        guard let base = calendar.date(from: DateComponents(year: year, month: month, day: day, hour: hour, minute: minute, second: second)),
              calendar.component(.day, from: base) == day else { return nil }
        var seconds = base.timeIntervalSince1970
        if let fraction = group(7), let value = Double("0" + fraction) { seconds += value }
        if let zone = group(8), zone != "Z" {
            let sign: Double = zone.hasPrefix("-") ? -1 : 1
            let parts = zone.dropFirst().split(separator: ":").compactMap { Double($0) }
            guard parts.count == 2 else { return nil }
            seconds -= sign * (parts[0] * 3600 + parts[1] * 60)
        }
        return Date(timeIntervalSince1970: seconds)
    }
}
