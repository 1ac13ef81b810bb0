import Foundation
import GRDB
import FerryModel

/// Converts attribute values to and from their SQLite form: integers and
/// booleans as INTEGER, doubles and floats as REAL, decimals as exact TEXT,
/// dates as seconds since 2001-01-01 (Core Data's TIMESTAMP), UUIDs as 16-byte
/// BLOBs, URIs as TEXT, binary and transformable data as BLOBs.
enum ValueCodec {
    static func databaseValue(_ value: AttributeValue?) -> DatabaseValue {
        guard let value else { return .null }
        switch value {
        case .integer(let v): return v.databaseValue
        case .decimal(let v): return "\(v)".databaseValue
        case .double(let v): return v.databaseValue
        case .float(let v): return Double(v).databaseValue
        case .string(let v): return v.databaseValue
        case .boolean(let v): return (v ? 1 : 0 as Int64).databaseValue
        case .date(let v): return v.timeIntervalSinceReferenceDate.databaseValue
        case .binaryData(let v), .transformable(let v): return v.databaseValue
        case .uuid(let v): return Data(v.bytes).databaseValue
        case .uri(let v): return v.absoluteString.databaseValue
        }
    }

    /// Decodes a stored value for an attribute of `type`; nil for NULL or a value
    /// that cannot be read as that type.
    static func attributeValue(_ stored: DatabaseValue, as type: AttributeType) -> AttributeValue? {
        switch (stored.storage, type) {
        case (.null, _): return nil
        case (.int64(let v), .integer16), (.int64(let v), .integer32), (.int64(let v), .integer64): return .integer(v)
        case (.double(let v), .integer16), (.double(let v), .integer32), (.double(let v), .integer64):
            return Int64(exactly: v).map(AttributeValue.integer)
        case (.int64(let v), .boolean): return .boolean(v != 0)
        case (.int64(let v), .double): return .double(Double(v))
        case (.double(let v), .double): return .double(v)
        case (.int64(let v), .float): return .float(Float(v))
        case (.double(let v), .float): return .float(Float(v))
        case (.string(let v), .decimal): return Decimal(string: v, locale: Locale(identifier: "en_US_POSIX")).map(AttributeValue.decimal)
        case (.int64(let v), .decimal): return .decimal(Decimal(v))
        case (.double(let v), .decimal): return .decimal(Decimal(v))
        case (.string(let v), .string): return .string(v)
        case (.double(let v), .date): return .date(Date(timeIntervalSinceReferenceDate: v))
        case (.int64(let v), .date): return .date(Date(timeIntervalSinceReferenceDate: Double(v)))
        case (.blob(let v), .binaryData): return .binaryData(v)
        case (.blob(let v), .transformable): return .transformable(v)
        case (.blob(let v), .uuid): return UUID(bytes: v).map(AttributeValue.uuid)
        case (.string(let v), .uri): return URL(string: v).map(AttributeValue.uri)
        default: return nil
        }
    }
}
