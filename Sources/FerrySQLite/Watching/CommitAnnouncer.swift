import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Tells every ``CommitWatcher`` of a store file — in this process and in others — that a
/// commit has just been published, so that none of them has to poll for it.
///
/// A commit writes its frames to the write-ahead log (`-wal`) first, then syncs them, then
/// publishes them in the `-shm` index, which inotify does not see: a watcher woken by the
/// frames' write can only check again and again until the commit shows, and each check after
/// the publication is latency for every reader. The store's writer runs this from SQLite's WAL
/// hook, which SQLite calls once the commit is published and its write lock released: touching
/// the log's timestamps (one `utimensat`: no data written, nothing synced) sends every inotify
/// watch on the folder an `IN_ATTRIB` event naming the log at that moment, and the watcher
/// reads `data_version` at once. A writer that does not announce (another program on the same
/// file) is still seen, by the watcher's checks after the frames' write.
struct CommitAnnouncer: Sendable {
    /// The log's path as a C string, made once (the hook runs after every commit).
    private let logPath: [CChar]

    /// An announcer for the store file at `storePath`.
    init(storePath: String) {
        // Absolute, so that a later change of the working directory does not lose the log.
        logPath = Array((URL(fileURLWithPath: storePath).path + "-wal").utf8CString)
    }

    /// Touches the log's access and modification times. A failure (the log gone: the store is
    /// closing) is ignored: watchers then see the commit by their checks.
    func announce() {
        _ = utimensat(AT_FDCWD, logPath, nil, 0)
    }
}
