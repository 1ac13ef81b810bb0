import Foundation
import Dispatch
import Synchronization
import GRDB
import GRDBSQLite

/// Copies the write-ahead log back into the store file on a queue of its own,
/// so the thread that saves does not.
///
/// SQLite's automatic checkpoint runs on the connection that just committed,
/// in the commit's own call, once the log holds 1,000 pages: the saving
/// thread copies ~4 MB into the file and syncs it before its save returns. A
/// change set's text makes each of Ferry's commits several times larger than
/// its rows, so a large save or a replay hit that every few transactions (6 %
/// of W1's samples were that copy). This replaces SQLite's hook on the store's
/// writing connection: past ``backgroundThreshold`` pages it asks a utility
/// queue to run a passive checkpoint on a connection of its own (opened on
/// first use), and the saving thread goes on. Should that queue fall behind
/// until the log holds ``writerThreshold`` pages, the writer checkpoints
/// itself as SQLite would have, so the log stays bounded.
///
/// A passive checkpoint never waits for a lock and never blocks readers or the
/// writer; what it cannot copy yet (pages a reader still needs), the next one
/// does. Errors are left to the next checkpoint, as SQLite's own hook does.
final class BackgroundCheckpointer: Sendable {
    /// Log pages after which the queue is asked to checkpoint (SQLite's own default).
    let backgroundThreshold: Int32
    /// Log pages after which the writer checkpoints in its commit as SQLite would
    /// (at or below ``backgroundThreshold``, the writer always does).
    let writerThreshold: Int32

    private let path: String
    /// Tells the store's watchers of each commit (from the same hook: see ``CommitAnnouncer``).
    private let announcer: CommitAnnouncer
    /// Where checkpoints run (internal for tests, which hold it back).
    let queue = DispatchQueue(label: "ferry.checkpoint", qos: .utility)
    private let isScheduled = Atomic<Bool>(false)
    /// The checkpoint's own connection, used on `queue` only.
    private let connection = Mutex<DatabaseQueue?>(nil)
    private let completedCount = Atomic<Int>(0)
    /// The log's frames when the last background checkpoint had copied every one of them
    /// (0 when it could not, or once the writer has looked).
    private let backfilledFrames = Atomic<Int32>(0)
    /// False once removed from the writer: a checkpoint still queued then does nothing (the store
    /// is closing, and its file may be gone; opening it would create an empty one).
    private let isInstalled = Atomic<Bool>(false)

    /// SQLite's own threshold for its automatic checkpoint (`SQLITE_DEFAULT_WAL_AUTOCHECKPOINT`).
    static let sqliteDefaultThreshold: Int32 = 1_000
    /// At most this many frames past a background checkpoint that copied the whole log, the
    /// writer copies them itself (see ``logGrew(to:writer:)``).
    static let writerCatchUpFrames: Int32 = 64

    init(path: String, backgroundThreshold: Int32 = sqliteDefaultThreshold, writerThreshold: Int32 = 10_000) {
        self.path = path
        self.announcer = CommitAnnouncer(storePath: path)
        self.backgroundThreshold = backgroundThreshold
        self.writerThreshold = writerThreshold
    }

    /// Background checkpoints run so far (for tests and diagnostics).
    var completedCheckpoints: Int { completedCount.load(ordering: .acquiring) }

    /// Installs the checkpointer as `db`'s WAL hook, in place of SQLite's automatic checkpoint.
    /// The hook holds the checkpointer until ``uninstall(from:)``.
    func install(on db: Database) {
        isInstalled.store(true, ordering: .releasing)
        let context = Unmanaged.passRetained(self).toOpaque()
        sqlite3_wal_hook(db.sqliteConnection, { context, connection, _, pages in
            guard let context else { return SQLITE_OK }
            Unmanaged<BackgroundCheckpointer>.fromOpaque(context).takeUnretainedValue()
                .logGrew(to: pages, writer: connection)
            return SQLITE_OK
        }, context)
    }

    /// Removes the hook from `db` and lets go of the hook's hold on the checkpointer.
    /// SQLite's automatic checkpoint takes over again.
    func uninstall(from db: Database) {
        isInstalled.store(false, ordering: .releasing)
        let previous = sqlite3_wal_hook(db.sqliteConnection, nil, nil)
        sqlite3_wal_autocheckpoint(db.sqliteConnection, Self.sqliteDefaultThreshold)
        if let previous { Unmanaged<BackgroundCheckpointer>.fromOpaque(previous).release() }
    }

    /// Waits for the checkpoint under way, if any, and closes the queue's connection (a checkpoint
    /// still queued then does nothing). Called by the store once ``uninstall(from:)`` has run,
    /// before its own connections close: SQLite copies the log into the file and removes it only
    /// when the connection that closes last is the only one open, which the writer then is.
    func close() {
        isInstalled.store(false, ordering: .releasing)
        queue.sync {
            connection.withLock { connection in
                try? connection?.close()
                connection = nil
            }
        }
    }

    /// Waits until the checkpoints queued so far have run.
    func waitForQueuedCheckpoints() {
        queue.sync {}
    }

    /// Called by SQLite after each commit on the writer (published, the write lock released)
    /// with the log's size in pages.
    ///
    /// The log starts again from its beginning (and stops growing) only when a write transaction
    /// begins after a checkpoint has copied all of it. Commits that follow each other closely (a
    /// loop of small saves) each begin while the queue's checkpoint is still copying the one
    /// before, so the log never restarted: it grew by every commit, up to ``writerThreshold``,
    /// and each commit asked for one more checkpoint (two more syncs). So when the queue's last
    /// checkpoint copied the whole log and only a few commits' frames came since, the writer
    /// copies those few itself, now: its next transaction starts the log again.
    private func logGrew(to pages: Int32, writer: OpaquePointer?) {
        announcer.announce()
        if pages >= writerThreshold || (pages >= backgroundThreshold && writerCanFinish(pages)) {
            sqlite3_wal_checkpoint_v2(writer, nil, SQLITE_CHECKPOINT_PASSIVE, nil, nil)
        } else if pages >= backgroundThreshold, !isScheduled.exchange(true, ordering: .acquiringAndReleasing) {
            queue.async { self.checkpoint() }
        }
    }

    /// Whether the queue's last checkpoint copied the whole log and at most
    /// ``writerCatchUpFrames`` came since (asked once per such checkpoint).
    private func writerCanFinish(_ pages: Int32) -> Bool {
        let backfilled = backfilledFrames.exchange(0, ordering: .acquiringAndReleasing)
        return backfilled > 0 && pages > backfilled && pages - backfilled <= Self.writerCatchUpFrames
    }

    /// Runs one passive checkpoint on the queue's own connection.
    private func checkpoint() {
        isScheduled.store(false, ordering: .releasing)
        connection.withLock { connection in
            guard isInstalled.load(ordering: .acquiring) else {
                connection = nil
                return
            }
            do {
                // (A checkpoint syncs the log before and the file after at any `synchronous` but OFF.)
                if connection == nil { connection = try DatabaseQueue(path: path) }
                if let frames = try connection?.writeWithoutTransaction({ db in try db.checkpoint(.passive) }),
                   frames.walFrameCount > 0, frames.checkpointedFrameCount == frames.walFrameCount {
                    backfilledFrames.store(Int32(clamping: frames.walFrameCount), ordering: .releasing)
                }
                completedCount.add(1, ordering: .releasing)
            } catch {
                // Busy or failed: the next commit past the threshold asks again.
            }
        }
    }
}
