import Foundation
import GRDB
import GRDBSQLite
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

/// Binds values to consecutive parameters of a prepared statement with the
/// SQLite C API, in the same storage form as ``ValueCodec``. Used for bulk
/// inserts, where building GRDB argument values per row is the main cost.
struct ValueBinder {
    let statement: OpaquePointer
    private var index: CInt = 1
    /// The first parameter that failed to bind, and SQLite's result code.
    private(set) var failure: (index: CInt, code: CInt)?

    init(statement: OpaquePointer) {
        self.statement = statement
    }

    private static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

    mutating func bind(_ value: Int64?) {
        record(value.map { sqlite3_bind_int64(statement, index, $0) } ?? sqlite3_bind_null(statement, index))
    }

    mutating func bind(_ value: AttributeValue?) {
        let code: CInt
        switch value {
        case nil: code = sqlite3_bind_null(statement, index)
        case .integer(let v)?: code = sqlite3_bind_int64(statement, index, v)
        case .boolean(let v)?: code = sqlite3_bind_int64(statement, index, v ? 1 : 0)
        case .double(let v)?: code = sqlite3_bind_double(statement, index, v)
        case .float(let v)?: code = sqlite3_bind_double(statement, index, Double(v))
        case .date(let v)?: code = sqlite3_bind_double(statement, index, v.timeIntervalSinceReferenceDate)
        case .string(let v)?: code = sqlite3_bind_text(statement, index, v, -1, Self.transient)
        case .decimal(let v)?: code = sqlite3_bind_text(statement, index, "\(v)", -1, Self.transient)
        case .uri(let v)?: code = sqlite3_bind_text(statement, index, v.absoluteString, -1, Self.transient)
        case .binaryData(let v)?, .transformable(let v)?: code = bindBlob(v)
        case .uuid(let v)?: code = bindBlob(Data(v.bytes))
        }
        record(code)
    }

    /// Binds UTF-8 bytes as TEXT without copying them (`SQLITE_STATIC`): the caller keeps
    /// `bytes` alive until ``run(sql:)`` has returned.
    mutating func bindText(_ bytes: UnsafeBufferPointer<UInt8>) {
        // An empty buffer may have no base address; bind empty text, not NULL.
        guard let base = bytes.baseAddress else { return record(sqlite3_bind_text(statement, index, "", 0, Self.transient)) }
        record(base.withMemoryRebound(to: CChar.self, capacity: bytes.count) { sqlite3_bind_text(statement, index, $0, CInt(bytes.count), nil) })
    }

    /// Binds bytes as a BLOB (copied: SQLite keeps its own).
    mutating func bindBlob(_ bytes: [UInt8]) {
        record(bytes.withUnsafeBytes(bindBlob))
    }

    /// Steps the bound statement once (an INSERT or UPDATE) and clears its bindings, so no
    /// buffer bound by ``bindText(_:)`` is referred to afterwards.
    /// - Throws: `DatabaseError` for the first parameter that failed to bind, or SQLite's error.
    func run(sql: String) throws {
        defer { sqlite3_clear_bindings(statement) }
        if let failure {
            throw DatabaseError(resultCode: ResultCode(rawValue: failure.code), message: "cannot bind argument \(failure.index)", sql: sql)
        }
        let code = sqlite3_step(statement)
        guard code == SQLITE_DONE else {
            let message = sqlite3_db_handle(statement).map { String(cString: sqlite3_errmsg($0)) } ?? "statement failed"
            sqlite3_reset(statement)
            throw DatabaseError(resultCode: ResultCode(rawValue: code), message: message, sql: sql)
        }
    }

    private func bindBlob(_ data: Data) -> CInt {
        data.withUnsafeBytes(bindBlob)
    }

    private func bindBlob(_ buffer: UnsafeRawBufferPointer) -> CInt {
        // An empty buffer has no base address; bind a zero-length blob, not NULL.
        sqlite3_bind_blob(statement, index, buffer.baseAddress ?? UnsafeRawPointer(bitPattern: 1), CInt(buffer.count), Self.transient)
    }

    private mutating func record(_ code: CInt) {
        if code != SQLITE_OK && failure == nil { failure = (index, code) }
        index += 1
    }
}
