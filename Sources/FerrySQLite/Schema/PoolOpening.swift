import Foundation
import GRDB
import FerryStore
#if canImport(Glibc)
import Glibc
#endif

/// Which file a path names: a store file replaced by a rename is another file at the same path.
struct FileIdentity: Equatable {
    let device: UInt64
    let inode: UInt64

    /// The identity of the file at `path`; nil when there is none.
    init?(path: String) {
        var status = stat()
        guard stat(path, &status) == 0 else { return nil }
        device = UInt64(status.st_dev)
        inode = UInt64(status.st_ino)
    }
}

extension SQLiteStore {
    /// How many times an open may start again because the store's file was replaced during it.
    static let opensAcrossReplacement = 5

    /// Opens the pool at `openPath` (the store's `path`, or a URI naming it), its writer's first
    /// read done, and makes sure the file it opened is still the one at `path`.
    ///
    /// SQLite opens a database file first, and its `-wal` and `-shm` by name at its first read. A
    /// daemon starting again from a snapshot (docs/SYNC.md, "Snapshots") replaces the store's file
    /// by a rename, after removing the old file's log; a connection that opened the old file before
    /// the rename and the log after it (or after the restarted daemon made a new one) reads the new
    /// file's log against the old file — "database disk image is malformed" — and would write its
    /// own frames into it. So the file's identity is taken before the open and again after the
    /// writer's first read: when it changed (or the open failed and it changed), the connection is
    /// closed and the open starts again, on the new file.
    ///
    /// - Returns: the pool, and the identity of the file it opened.
    /// - Parameters:
    ///   - durable: sets `synchronous=FULL` on the writer (see ``makeCommitsDurable``).
    ///   - afterConnecting: runs between the first read and the second look at the file (tests
    ///     replace the file there).
    static func openPool(openPath: String, path: String, configuration: Configuration, durable: Bool,
                         afterConnecting: (@Sendable () -> Void)? = nil) throws(StoreError) -> (pool: DatabasePool, file: FileIdentity?) {
        for _ in 1...opensAcrossReplacement {
            let before = FileIdentity(path: path)
            // (No identity before: the store is being created, which a replacement never races.)
            func replaced() -> Bool { before != nil && FileIdentity(path: path) != before }
            let pool: DatabasePool
            do {
                pool = try DatabasePool(path: openPath, configuration: configuration)
                try pool.writeWithoutTransaction { db in
                    if durable { try makeCommitsDurable(db) }
                    _ = try Int.fetchOne(db, sql: "PRAGMA schema_version")  // (the log is opened by now)
                }
            } catch {
                if replaced() { continue }
                throw openFailure(error, path: path)
            }
            afterConnecting?()
            // (A file the open created is the one it opened.)
            guard replaced() else { return (pool, before ?? FileIdentity(path: path)) }
            try? pool.close()
        }
        throw .cannotOpen(path: path, reason: "the file was replaced (renamed over) while it was being opened, \(opensAcrossReplacement) times in a row; "
                          + "something keeps replacing it: open it again once that has stopped")
    }

    /// GRDB sets `synchronous=NORMAL` on a pool's writer (WAL commits then reach the disk
    /// only at the next checkpoint, so a power cut can take back transactions that had
    /// returned). Ferry acknowledges applied change sets to peers, which may purge them
    /// on that word, so every commit is synced: `FULL`.
    private static func makeCommitsDurable(_ db: Database) throws {
        try db.execute(sql: "PRAGMA synchronous = FULL")
    }

    /// Throws when the file at the store's path is no longer the one this store opened: a daemon
    /// started it again from a snapshot (its bootstrap renames the new file over the old), or the
    /// file was removed. The store's connections still write to the old file (kept as
    /// `STORE.before-bootstrap-DATE` after a bootstrap, whose log the swap unlinked), so a save now
    /// would never reach the store at the path; it is refused instead, and the store must be opened
    /// again. Called under the write lock, before each save and each write of the history (a
    /// `stat`: ``writeTransaction(_:)``).
    func refuseWritesToReplacedFile() throws(StoreError) {
        guard let openedFile else { return }
        let current = FileIdentity(path: path)
        guard current != openedFile else { return }
        let what = current == nil ? "removed" : "replaced (a daemon started the store again from a peer's snapshot, docs/SYNC.md \"Snapshots\")"
        throw .unavailable(path: path, reason: "the store's file was \(what) after this process opened it; this handle still holds the old "
                           + "file, where nothing more is written — open the store again")
    }
}
