import GRDB
import Synchronization

/// The connections a store reads on: each read takes an idle one, runs as one deferred
/// transaction on it, and gives it back; at most ``limit`` are open, and a read that finds them
/// all busy goes to the pool's own readers instead, so that a read never waits for another (as
/// does every read once a connection failed to open).
///
/// Why not `DatabasePool.read` for every read: its way to a connection (a barrier queue, a
/// semaphore, a group, then the reader's queue) and its transaction (`BEGIN` and `COMMIT`
/// compiled anew, the schema check, the observers' bookkeeping) are cheap on a warm processor
/// but not after the process idled a few milliseconds, which is when a daemon woken by a
/// commit or an application woken by its store reads. On the 2-core VM of docs/PERFORMANCE.md,
/// a point read after 20 ms idle costs 0.24 ms through the pool and 0.15 ms here, where the
/// statements of the transaction are cached on the connection (`Database.inCachedTransaction`).
///
/// Each connection is opened read-only with the store's configuration (its SQL functions and
/// busy handler), and clears its schema cache when the schema version changed since its last
/// read (another connection migrated the store), as the pool's readers do.
final class ReadConnections: Sendable {
    /// A connection and the schema version its last read saw.
    private struct Connection: Sendable {
        let queue: DatabaseQueue
        var schemaVersion: Int32?
    }

    private struct State: Sendable {
        var idle: [Connection] = []
        var opened = 0
        var closed = false
        /// A connection failed to open.
        var cannotOpen = false
    }

    /// How many connections may be open at once.
    let limit: Int
    private let path: String
    private let configuration: Configuration
    private let state = Mutex(State())

    /// Connections to the store file at `path` (as SQLite opens it: a URI for an immutable
    /// store), opened with `configuration` made read-only, when first needed.
    init(path: String, configuration: Configuration, limit: Int) {
        var configuration = configuration
        configuration.readonly = true
        self.path = path
        self.configuration = configuration
        self.limit = limit
    }

    /// Runs `body` in one read transaction on an idle connection; `otherwise` when none is idle
    /// and ``limit`` are open, or a new one cannot be opened (the pool then says why).
    func read<T>(_ body: (Database) throws -> T, otherwise: () throws -> T) throws -> T {
        guard var connection = take() else { return try otherwise() }
        defer { give(connection) }
        return try connection.queue.inDatabase { db in
            try db.inCachedTransaction(.deferred) {
                // (The transaction's first statement: it takes the snapshot the body reads.)
                let version = try Int32.fetchOne(db.cachedStatement(sql: "PRAGMA schema_version"))
                if version != connection.schemaVersion {
                    db.clearSchemaCache()
                    connection.schemaVersion = version
                }
                return try body(db)
            }
        }
    }

    /// What ``take()`` may do under the lock.
    private enum Claim {
        case idle(Connection)
        /// Open a new connection (counted already).
        case open
        /// None is to be had: all busy, closed, or they cannot be opened.
        case none
    }

    /// An idle connection, or a new one while fewer than ``limit`` are open; nil otherwise. After a
    /// connection failed to open, none is opened again: every read then goes to the pool, which
    /// says why it cannot read, rather than paying for a failed open each time.
    private func take() -> Connection? {
        let claim: Claim = state.withLock { state in
            if let connection = state.idle.popLast() { return .idle(connection) }
            guard state.opened < limit, !state.closed, !state.cannotOpen else { return .none }
            state.opened += 1
            return .open
        }
        switch claim {
        case .idle(let connection):
            return connection
        case .none:
            return nil
        case .open:
            // Opened outside the lock: opening reads the file.
            guard let queue = try? DatabaseQueue(path: path, configuration: configuration) else {
                state.withLock { state in
                    state.opened -= 1
                    state.cannotOpen = true
                }
                return nil
            }
            return Connection(queue: queue)
        }
    }

    /// Puts `connection` back among the idle ones (closes it once ``close()`` was called).
    private func give(_ connection: Connection) {
        let kept = state.withLock { state in
            guard !state.closed else { return false }
            state.idle.append(connection)
            return true
        }
        if !kept { try? connection.queue.close() }
    }

    /// Closes the idle connections; later reads go to their fallback. The store calls it before
    /// its pool closes: SQLite copies the write-ahead log into the file and removes it only when
    /// the last connection to close can write, so a read-only one left open would leave the log
    /// behind (and a copy of the file alone would miss what it holds).
    func close() {
        let idle = state.withLock { state in
            state.closed = true
            defer { state.idle = [] }
            return state.idle
        }
        for connection in idle { try? connection.queue.close() }
    }
}
