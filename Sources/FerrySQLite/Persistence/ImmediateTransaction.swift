import GRDB

extension Database {
    /// Runs `operations` in one `BEGIN IMMEDIATE` transaction: committed when they return, rolled
    /// back when they throw or the commit fails (the first error is thrown).
    ///
    /// GRDB's `inTransaction(.immediate)` does the same with `BEGIN` and `COMMIT` compiled anew
    /// each time and its observers' bookkeeping around them (Ferry installs no transaction
    /// observer); here the three statements are cached on the connection. A save right after
    /// the process idled a few milliseconds (each of W4's) took 30 µs less this way on the VM of
    /// docs/PERFORMANCE.md ("Eighth look at W4").
    func inImmediateTransaction<T>(_ operations: () throws -> T) throws -> T {
        try cachedStatement(sql: "BEGIN IMMEDIATE TRANSACTION").execute()
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
