import Foundation
import GRDB
import FerryStore

/// Gives a store's write-ahead log its working size up front, in zeros, so that
/// durable commits overwrite blocks the file already has instead of appending.
///
/// Each commit syncs the log (`synchronous=FULL`). When its frames lie past the
/// log's end, that sync must also make the file's new size and blocks durable:
/// on ext4 a journal commit and a second device flush, some 0.14–0.24 ms more per
/// commit on this project's machines (W4 in docs/PERFORMANCE.md). SQLite starts
/// its log again from the beginning after a checkpoint has
/// copied all of it, so a log that once grew to its working size is overwritten
/// from then on; but a fresh one (the last connection to close a store deletes its
/// log) grows commit by commit over its first thousand pages, and every commit of
/// a daemon's first minutes would pay for it. PostgreSQL zero-fills its WAL segments
/// before use for the same reason.
///
/// Zeros are what SQLite reads as the log's end: a frame counts only when it
/// carries the log header's salt and a running checksum, and a log whose header
/// is zeros is read as empty. So the file stays a valid log whatever is cut short.
/// They are written only past the file's end, where no frame is, while this
/// connection holds the store's write lock (`BEGIN IMMEDIATE`), so that no
/// connection, in this process or another, appends frames meanwhile; SQLite holds
/// no lock on the log file itself (its locks are on the `-shm` file), so opening
/// and closing it here releases none of SQLite's.
enum LogPreallocation {
    /// The frames the log is given: SQLite's checkpoint threshold, which a
    /// log reaches before it starts again, and some room for the commits that come
    /// while the background checkpoint copies it.
    static let frames = Int(BackgroundCheckpointer.sqliteDefaultThreshold) + 200

    /// Extends the log at `logPath` with zeros to hold ``frames`` frames of the
    /// store's page size, synced before the write lock is let go; the bytes added (0
    /// when the log was that large already). A failure (a full disk) cuts the file
    /// back to its size before, and is thrown.
    static func extend(_ pool: DatabasePool, logPath: String) throws -> Int64 {
        try pool.writeWithoutTransaction { db in
            var added: Int64 = 0
            try db.inTransaction(.immediate) {
                let pageSize = try Int.fetchOne(db, sql: "PRAGMA page_size") ?? 4096
                // The log's header, then each frame: a 24-byte header and a page.
                added = try zeroFill(logPath, to: Int64(SQLiteStore.walHeaderBytes + frames * (24 + pageSize)))
                return .commit
            }
            return added
        }
    }

    /// Writes zeros from the end of the file at `path` up to `target` bytes and syncs them;
    /// the bytes written.
    private static func zeroFill(_ path: String, to target: Int64) throws -> Int64 {
        let descriptor = open(path, O_WRONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw failure("open", path) }
        defer { close(descriptor) }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else { throw failure("stat", path) }
        let start = Int64(status.st_size)
        guard start < target else { return 0 }
        let zeros = [UInt8](repeating: 0, count: 256 << 10)
        var offset = start
        do {
            while offset < target {
                let length = Int(min(Int64(zeros.count), target - offset))
                let written = zeros.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, length, off_t(offset)) }
                guard written > 0 else { throw failure("write", path) }
                offset += Int64(written)
            }
            guard fdatasync(descriptor) == 0 else { throw failure("sync", path) }
        } catch {
            // Nothing but zeros lies past `start`: give the space back.
            _ = ftruncate(descriptor, off_t(start))
            throw error
        }
        return target - start
    }

    private static func failure(_ operation: String, _ path: String) -> StoreFailure {
        let code = errno
        return StoreFailure("cannot \(operation) the write-ahead log \(path): \(String(cString: strerror(code)))",
                            cause: POSIXError(POSIXErrorCode(rawValue: code) ?? .EIO))
    }
}
