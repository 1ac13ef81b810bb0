import GRDB

extension Database {
    /// Runs `operations` in one transaction of `kind`: committed when they return, rolled back
    /// when they throw or the commit fails (the first error is thrown). The store's saves run in
    /// `.immediate` ones, its reads (``ReadConnections``) in `.deferred` ones.
    ///
    /// GRDB's `inTransaction` does the same with `BEGIN` and `COMMIT` compiled anew each time and
    /// its observers' bookkeeping around them (Ferry installs no transaction observer); here the
    /// statements are cached on the connection. After the process idled a few milliseconds (as
    /// before each of W4's saves), a save takes 30 µs less this way and a read, with the pool's way
    /// to a connection also skipped, about 0.1 ms less, on the VM of docs/PERFORMANCE.md.
    func inCachedTransaction<T>(_ kind: TransactionKind, _ operations: () throws -> T) throws -> T {
        try cachedStatement(sql: "BEGIN \(kind.rawValue) TRANSACTION").execute()
        do {
            let value = try operations()
            try cachedStatement(sql: "COMMIT TRANSACTION").execute()
            return value
        } catch {
            // (A statement that failed may have ended the transaction already: SQLITE_FULL, an I/O error.)
            if isInsideTransaction { try? cachedStatement(sql: "ROLLBACK TRANSACTION").execute() }
            throw error
        }
    }
}
