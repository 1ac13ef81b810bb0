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
/// tells its subscribers at once (it reads `data_version` after, off their path). A writer that
/// does not announce (another program on the same file) is still seen, by the watcher's checks
/// after the frames' write.
///
/// The times it sets carry a mark: the log's modification time ends in ``markNanoseconds`` (of
/// each microsecond). Other changes of the log's metadata wake the watchers too — SQLite, run as
/// root, gives every log it opens its database's owner, and `fchown` is such a change — and do not
/// set the modification time; a watcher that finds a marked time it had not seen knows it was
/// told of a commit, and tells its subscribers before it reads `data_version`. A log whose times
/// only its owner may set (another user's) is touched without a mark, so its commits are still
/// announced, and seen once that read shows them.
struct CommitAnnouncer: Sendable {
    /// The log's path as a C string, made once (the hook runs after every commit).
    private let logPath: [CChar]

    /// An announcer for the store file at `storePath`.
    init(storePath: String) {
        // Absolute, so that a later change of the working directory does not lose the log.
        logPath = Array((URL(fileURLWithPath: storePath).path + "-wal").utf8CString)
    }

    /// What an announcement leaves in the nanoseconds of the log's modification time, modulo 1,000.
    static let markNanoseconds = 417

    /// Touches the log's access and modification times, marked. A failure (the log gone: the store is
    /// closing) is ignored: watchers then see the commit by their checks.
    func announce() {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        now.tv_nsec = now.tv_nsec - now.tv_nsec % 1_000 + Self.markNanoseconds
        let times = [now, now]
        if utimensat(AT_FDCWD, logPath, times, 0) != 0 {
            // (Only a file's owner may set its times; anyone who may write it may set them to now.)
            _ = utimensat(AT_FDCWD, logPath, nil, 0)
        }
    }

    /// The log's modification time when an announcement set it.
    struct Mark: Equatable {
        var seconds: Int
        var nanoseconds: Int
    }

    /// The mark the last announcement left on the log; nil when something else set its time since
    /// (a write to it), or the log cannot be read.
    func currentMark() -> Mark? {
        var status = stat()
        guard stat(logPath, &status) == 0, status.st_mtim.tv_nsec % 1_000 == Self.markNanoseconds else { return nil }
        return Mark(seconds: status.st_mtim.tv_sec, nanoseconds: status.st_mtim.tv_nsec)
    }
}
