import Foundation

/// A persistent attribute value, typed by the attribute that holds it.
///
/// The three integer widths share ``integer(_:)``; the attribute's
/// ``AttributeType`` says which width is allowed, and ``AttributeValue/coerce(_:to:)``
/// enforces it. `nil` (no value) is written as an absent `AttributeValue?`.
public enum AttributeValue: Sendable, Hashable {
    case integer(Int64)
    case decimal(Decimal)
    case double(Double)
    case float(Float)
    case string(String)
    case boolean(Bool)
    /// A point in time; stored as seconds since 2001-01-01 UTC like Core Data.
    case date(Date)
    case binaryData(Data)
    case uuid(UUID)
    case uri(URL)
    /// The encoded bytes of a transformable attribute.
    case transformable(Data)

    /// The attribute type this value belongs to, with integers reported as 64-bit.
    public var naturalType: AttributeType {
        switch self {
        case .integer: .integer64
        case .decimal: .decimal
        case .double: .double
        case .float: .float
        case .string: .string
        case .boolean: .boolean
        case .date: .date
        case .binaryData: .binaryData
        case .uuid: .uuid
        case .uri: .uri
        case .transformable: .transformable
        }
    }

    /// Whether this value may be stored in an attribute of `type`.
    public func fits(_ type: AttributeType) -> Bool {
        switch (self, type) {
        case (.integer(let value), _) where type.isInteger:
            return type.integerRange?.contains(value) ?? false
        case (.decimal, .decimal), (.double, .double), (.float, .float), (.string, .string),
             (.boolean, .boolean), (.date, .date), (.binaryData, .binaryData), (.uuid, .uuid),
             (.uri, .uri), (.transformable, .transformable):
            return true
        default:
            return false
        }
    }

    /// The value as a plain Swift value, typed by `type`: `Int16`, `Int32` or `Int64`
    /// for the integer widths, `Decimal`, `Double`, `Float`, `String`, `Bool`,
    /// `Date`, `Data`, `UUID` or `URL`.
    public func swiftValue(as type: AttributeType) -> any Sendable {
        switch self {
        case .integer(let value):
            switch type {
            case .integer16: return Int16(truncatingIfNeeded: value)
            case .integer32: return Int32(truncatingIfNeeded: value)
            default: return value
            }
        case .decimal(let value): return value
        case .double(let value): return value
        case .float(let value): return value
        case .string(let value): return value
        case .boolean(let value): return value
        case .date(let value): return value
        case .binaryData(let value), .transformable(let value): return value
        case .uuid(let value): return value
        case .uri(let value): return value
        }
    }

    /// Converts a Swift value to an attribute value of `type`, the way Core Data
    /// accepts any `NSNumber` for a number attribute: integers of any width
    /// (range-checked), whole floating-point numbers for integer attributes, any
    /// number for floating-point and decimal attributes. Returns nil when the value
    /// cannot be represented exactly enough.
    public static func coerce(_ value: Any, to type: AttributeType) -> AttributeValue? {
        if let value = value as? AttributeValue {
            return value.converted(to: type)
        }
        switch type {
        case .integer16, .integer32, .integer64:
            guard let integer = exactInteger(value), let range = type.integerRange, range.contains(integer) else { return nil }
            return .integer(integer)
        case .double:
            return floatingValue(value).map { .double($0) }
        case .float:
            return floatingValue(value).map { .float(Float($0)) }
        case .decimal:
            if let decimal = value as? Decimal { return .decimal(decimal) }
            if let integer = exactInteger(value) { return .decimal(Decimal(integer)) }
            if let double = floatingValue(value) { return .decimal(Decimal(double)) }
            return nil
        case .string:
            return (value as? String).map { .string($0) }
        case .boolean:
            return (value as? Bool).map { .boolean($0) }
        case .date:
            return (value as? Date).map { .date($0) }
        case .binaryData:
            return (value as? Data).map { .binaryData($0) }
        case .transformable:
            return (value as? Data).map { .transformable($0) }
        case .uuid:
            return (value as? UUID).map { .uuid($0) }
        case .uri:
            return (value as? URL).map { .uri($0) }
        }
    }

    /// This value as a value of `type`, converting between numeric kinds when
    /// exact enough (see ``coerce(_:to:)``); nil when it cannot be.
    public func converted(to type: AttributeType) -> AttributeValue? {
        if fits(type) { return self }
        let value = self
        switch value {
        case .integer(let integer): return Self.coerce(integer, to: type)
        case .double(let double): return Self.coerce(double, to: type)
        case .float(let float): return Self.coerce(float, to: type)
        case .decimal(let decimal): return Self.coerce(decimal, to: type)
        case .binaryData(let data) where type == .transformable: return .transformable(data)
        case .transformable(let data) where type == .binaryData: return .binaryData(data)
        default: return nil
        }
    }

    private static func exactInteger(_ value: Any) -> Int64? {
        switch value {
        case let v as Int: return Int64(v)
        case let v as Int8: return Int64(v)
        case let v as Int16: return Int64(v)
        case let v as Int32: return Int64(v)
        case let v as Int64: return v
        case let v as UInt8: return Int64(v)
        case let v as UInt16: return Int64(v)
        case let v as UInt32: return Int64(v)
        case let v as UInt: return Int64(exactly: v)
        case let v as UInt64: return Int64(exactly: v)
        case let v as Double: return Int64(exactly: v)
        case let v as Float: return Int64(exactly: v)
        case let v as Decimal:
            var copy = v
            var rounded = Decimal()
            NSDecimalRound(&rounded, &copy, 0, .plain)
            guard rounded == v else { return nil }
            return Int64(exactly: NSDecimalNumber(decimal: v).doubleValue)
        default: return nil
        }
    }

    private static func floatingValue(_ value: Any) -> Double? {
        switch value {
        case let v as Double: return v
        case let v as Float: return Double(v)
        case let v as Decimal: return NSDecimalNumber(decimal: v).doubleValue
        default: return exactInteger(value).map { Double($0) }
        }
    }
}

extension AttributeValue {
    /// A numeric view used by min/max validation and cross-type comparison.
    public var numericValue: Double? {
        switch self {
        case .integer(let v): Double(v)
        case .double(let v): v
        case .float(let v): Double(v)
        case .decimal(let v): NSDecimalNumber(decimal: v).doubleValue
        default: nil
        }
    }

    /// Orders two values the way the SQLite store orders their stored form:
    /// numbers numerically, strings by their UTF-8 bytes (SQLite's BINARY
    /// collation), dates by time, booleans false before true, bytes
    /// lexicographically. Returns nil for values of unrelated kinds.
    public static func compare(_ lhs: AttributeValue, _ rhs: AttributeValue) -> ComparisonResult? {
        switch (lhs, rhs) {
        case (.integer(let a), .integer(let b)): return order(a, b)
        case (.decimal(let a), .decimal(let b)): return order(a, b)
        case (.string(let a), .string(let b)): return orderBytes(Array(a.utf8), Array(b.utf8))
        case (.boolean(let a), .boolean(let b)): return order(a ? 1 : 0, b ? 1 : 0)
        case (.date(let a), .date(let b)): return order(a.timeIntervalSinceReferenceDate, b.timeIntervalSinceReferenceDate)
        case (.binaryData(let a), .binaryData(let b)), (.transformable(let a), .transformable(let b)):
            return orderBytes(Array(a), Array(b))
        case (.uuid(let a), .uuid(let b)): return orderBytes(a.bytes, b.bytes)
        case (.uri(let a), .uri(let b)): return orderBytes(Array(a.absoluteString.utf8), Array(b.absoluteString.utf8))
        default:
            guard let a = lhs.numericValue, let b = rhs.numericValue else { return nil }
            return order(a, b)
        }
    }

    private static func order<T: Comparable>(_ a: T, _ b: T) -> ComparisonResult {
        a < b ? .orderedAscending : (a > b ? .orderedDescending : .orderedSame)
    }

    private static func orderBytes(_ a: [UInt8], _ b: [UInt8]) -> ComparisonResult {
        if a == b { return .orderedSame }
        return a.lexicographicallyPrecedes(b) ? .orderedAscending : .orderedDescending
    }
}

extension UUID {
    /// The 16 bytes of the UUID in network order.
    public var bytes: [UInt8] {
        withUnsafeBytes(of: uuid) { Array($0) }
    }

    /// Builds a UUID from exactly 16 bytes; nil otherwise.
    public init?(bytes: some Collection<UInt8>) {
        let array = Array(bytes)
        guard array.count == 16 else { return nil }
        self = array.withUnsafeBytes { buffer in
            UUID(uuid: buffer.loadUnaligned(as: uuid_t.self))
        }
    }
}
