import GRDBSQLite

/// A raw sqlite3 connection for the baselines and the fills (WAL, `synchronous=FULL`, as Ferry's).
final class RawDatabase {
    let handle: OpaquePointer
    /// `SQLITE_TRANSIENT`: SQLite copies a bound text or blob before the call returns.
    static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

    init(path: String) throws {
        var db: OpaquePointer?
        guard sqlite3_open(path, &db) == SQLITE_OK, let db else { throw RawSQLiteError.failed("cannot open \(path)") }
        handle = db
        try exec("PRAGMA journal_mode=WAL")
        try exec("PRAGMA synchronous=FULL")
    }

    deinit { sqlite3_close(handle) }

    var message: String { String(cString: sqlite3_errmsg(handle)) }

    func exec(_ sql: String) throws {
        guard sqlite3_exec(handle, sql, nil, nil, nil) == SQLITE_OK else { throw RawSQLiteError.failed(message) }
    }

    /// A prepared statement; the caller finalizes it.
    func prepare(_ sql: String) throws -> OpaquePointer {
        var statement: OpaquePointer?
        guard sqlite3_prepare_v2(handle, sql, -1, &statement, nil) == SQLITE_OK, let statement else { throw RawSQLiteError.failed(message) }
        return statement
    }
}
