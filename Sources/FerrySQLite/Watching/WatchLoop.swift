import Foundation
import GRDB
import FerryStore
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The commit watcher's thread: inotify on the store's folder (Linux), `data_version` read when
/// a commit is announced, and checked after a write to the log by a writer that may not announce.
///
/// A commit by a Ferry store is announced (``CommitAnnouncer``) once it is published: the watcher
/// signals its subscribers at once and reads `data_version` after (a read on a processor that
/// idled costs 0.05–0.1 ms, which the subscribers no longer wait for), and that is all a commit
/// costs it. Writes to the log come first, two per page the commit writes, and each would wake
/// the watcher's thread — on a machine with few cores, taking the processor from the very writer
/// it waits for — so once one write is heard, the watcher stops listening for writes until the
/// commit is seen: it then follows it by checks of `data_version` on a schedule (for a writer that
/// does not announce: another program on the same file), and hears only announcements. Once a
/// commit is seen, the writes heard meanwhile are let go, and a few later checks stand in for them.
///
/// Armed when it is made — the watches added and the first `data_version` read before the
/// initializer returns — so that a commit made once ``SQLiteStore/commits()`` has returned is
/// never missed, however late the thread gets to run.
final class WatchLoop: Sendable {
    /// What the watcher did, for tests and diagnostics.
    struct Statistics: Sendable, Equatable {
        /// Times the thread woke (an event or a check due).
        var wakeUps = 0
        /// Reads of `data_version`.
        var checks = 0
        /// Changes of the log's metadata heard, each counted once handled (its signal sent and
        /// `data_version` read): announcements (a commit may also be seen by a check just before its
        /// announcement), and others (see ``checkedCommits``).
        var announcements = 0
        /// Commits seen at their announcement (a new mark on the log).
        var announcedCommits = 0
        /// Commits seen otherwise: by a scheduled check, or by the read after a change of the log's
        /// metadata that left no new mark (another connection opening the log, as root; an
        /// announcement on a log whose times only its owner may set).
        var checkedCommits = 0
        /// Failed tries to open the watcher's connection after it was armed without one.
        var connectionRetries = 0
        /// Times the subscribers were told of a commit.
        var signals = 0
    }

    private let walName: [UInt8]
    /// The announcer of the store's writers, for the mark their announcements leave on the log.
    private let announcer: CommitAnnouncer
    /// The log's mark when the watcher was armed (nil: none): an announcement already heard.
    private let initialMark: CommitAnnouncer.Mark?
    /// Written to by ``stop()`` to wake the thread.
    private let stopPipe: (read: Int32, write: Int32)
    private let stopped = Atomic<Bool>(false)
    /// Signalled as the thread ends, its connection closed (and again by each waiter, for the next).
    private let ended = DispatchSemaphore(value: 0)
    /// The store file's path.
    private let path: String
    /// The watcher's own connection, for `PRAGMA data_version`, when it could be opened at once
    /// (else the thread opens it: ``openWhenPossible()``).
    private let initialConnection: DatabaseQueue?
    /// How the connection is opened (``openReadOnly(_:)``; tests make it fail).
    private let openConnection: @Sendable (String) throws -> DatabaseQueue
    /// How `data_version` is read on `connection` (``dataVersion(on:)``; tests slow it down).
    private let readVersion: @Sendable (DatabaseQueue) -> Int64?
    /// `data_version` when the watcher was armed.
    private let initialVersion: Int64?
    /// Writes to the log, and its creation; nil where inotify cannot be used.
    private let writes: FolderWatch?
    /// Announced commits (the log's times touched); nil where inotify cannot be used.
    private let announcements: FolderWatch?
    private let counters = Mutex(Statistics())

    /// Delays after a write to the log at which `data_version` is read, in microseconds, while the
    /// file's writer is not known to announce its commits: every 0.1 ms for the first 3 ms (a
    /// commit's sync, 0.3–1 ms here, lies between its last write and its publication, and each
    /// check after it is latency for every reader: a read costs a few microseconds), then every
    /// 0.5 ms to 10 ms, every 2 ms to 50 ms and every 10 ms to half a second, for a slow disk.
    /// The checks stop at the first change.
    static let checkSchedule: [Int] = Array(stride(from: 100, to: 3_000, by: 100)) + Array(stride(from: 3_000, to: 10_000, by: 500))
        + Array(stride(from: 10_000, to: 50_000, by: 2_000)) + Array(stride(from: 50_000, through: 500_000, by: 10_000))
    /// The same while the last commit seen was announced: its writer's next commit will be too,
    /// so the checks only stand in for a writer that does not announce (seen 1 ms late, once:
    /// the watcher then goes back to ``checkSchedule``).
    static let announcedCheckSchedule: [Int] = [1_000, 2_000, 3_000, 5_000, 7_500] + Array(stride(from: 10_000, through: 500_000, by: 10_000))
    /// Checks after a commit is seen, in microseconds: for a commit whose writes were heard (and
    /// let go) while the one seen was followed, by a writer that does not announce.
    static let afterCommitSchedule: [Int] = [2_000, 10_000, 50_000, 250_000, 500_000]
    /// How long after a commit a check saw its announcement may still come, in nanoseconds.
    static let announcementDelay: UInt64 = 1_000_000
    /// How long after a commit seen without its announcement (by a check, or at a change of the
    /// log's metadata that left no mark) an announcement is still taken as possibly that commit's,
    /// in nanoseconds: read first instead of signalled at once, so that a commit whose writer was
    /// held up between its commit and its announcement (past ``announcementDelay``, as on a loaded
    /// machine) is not signalled twice.
    static let lateAnnouncementWindow: UInt64 = 1_000_000_000
    /// How often `data_version` is read when inotify cannot be used.
    static let fallbackInterval = 50

    /// Arms a watcher of the store file at `path`; nil when its pipe cannot be made (no file
    /// descriptor left). A connection that cannot be opened now (the file busy, say) does not stop
    /// it: the thread opens it as soon as it can, and then signals once, as a commit may have come
    /// meanwhile. (It once made the watcher nil, and its subscribers waited for ever, told nothing.)
    /// `readVersion` reads `data_version` on the watcher's connection (tests pass a slow one);
    /// `openConnection` opens that connection (tests make it fail).
    init?(path: String, readVersion: @escaping @Sendable (DatabaseQueue) -> Int64? = WatchLoop.dataVersion(on:),
          openConnection: @escaping @Sendable (String) throws -> DatabaseQueue = WatchLoop.openReadOnly) {
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { return nil }
        _ = fcntl(fds[0], F_SETFD, FD_CLOEXEC)
        _ = fcntl(fds[1], F_SETFD, FD_CLOEXEC)
        stopPipe = (fds[0], fds[1])
        let url = URL(fileURLWithPath: path)
        walName = Array((url.lastPathComponent + "-wal").utf8)
        announcer = CommitAnnouncer(storePath: path)
        self.path = path
        self.openConnection = openConnection
        self.readVersion = readVersion
        let folder = url.deletingLastPathComponent().path
        let writes = FolderWatch(folder: folder, mask: FolderWatch.writesAndNewFiles)
        let announcements = FolderWatch(folder: folder, mask: FolderWatch.metadataChanges)
        if let writes, let announcements {
            self.writes = writes
            self.announcements = announcements
        } else {
            writes?.close()
            announcements?.close()
            self.writes = nil
            self.announcements = nil
        }
        // (After the watches: a commit from here on changes the version read now, or is heard.)
        let connection = try? openConnection(path)
        initialConnection = connection
        initialVersion = connection.flatMap(readVersion)
        initialMark = announcer.currentMark()
    }

    /// A read-only connection to the store file at `path`.
    static func openReadOnly(_ path: String) throws -> DatabaseQueue {
        var configuration = Configuration()
        configuration.readonly = true
        return try DatabaseQueue(path: path, configuration: configuration)
    }

    /// The watcher's connection, tried every 1 ms at first, then less often (up to every 0.1 s),
    /// until it opens; nil once the watcher is stopped.
    private func openWhenPossible() -> DatabaseQueue? {
        var delay: UInt64 = 1_000_000
        while !stopped.load(ordering: .relaxed) {
            if let opened = try? openConnection(path) { return opened }
            counters.withLock { $0.connectionRetries += 1 }
            var fds = [pollfd(fd: stopPipe.read, events: Int16(POLLIN), revents: 0)]
            if Self.wait(on: &fds, nanoseconds: delay) > 0 { return nil }
            delay = min(delay * 2, 100_000_000)
        }
        return nil
    }

    var statistics: Statistics { counters.withLock { $0 } }

    /// SQLite's `PRAGMA data_version` on `connection` (a cached statement: read hundreds of
    /// times a second while commits come in).
    static func dataVersion(on connection: DatabaseQueue) -> Int64? {
        try? connection.inDatabase { db in try Int64.fetchOne(db.cachedStatement(sql: "PRAGMA data_version")) }
    }

    func start(onCommit: @escaping @Sendable () -> Void) {
        DedicatedThreads.start(named: "ferry-watcher") { [self] in run(onCommit: onCommit) }
    }

    deinit {
        // (Here, not when the thread ends: ``stop()`` may write to the pipe after that.)
        close(stopPipe.read)
        close(stopPipe.write)
    }

    /// Asks the thread to end; it does soon after, and closes its connection as it ends.
    func stop() {
        guard !stopped.exchange(true, ordering: .relaxed) else { return }
        var byte: UInt8 = 1
        _ = write(stopPipe.write, &byte, 1)
    }

    /// Stops the thread (started: ``start(onCommit:)``) and waits until it has ended and closed
    /// its connection to the store, at most `timeout` seconds (true when it did). The store waits
    /// so before its own connections close: SQLite copies the write-ahead log into the file and
    /// removes it only when the last connection to close can write, and the watcher's is read-only.
    func stopAndWait(timeout: TimeInterval) -> Bool {
        stop()
        guard ended.wait(timeout: .now() + timeout) == .success else { return false }
        ended.signal()
        return true
    }

    private func run(onCommit tellSubscribers: @escaping @Sendable () -> Void) {
        let onCommit: @Sendable () -> Void = { [self] in
            counters.withLock { $0.signals += 1 }
            tellSubscribers()
        }
        defer {
            writes?.close()
            announcements?.close()
            ended.signal()
        }
        var lastVersion = initialVersion
        let connection: DatabaseQueue
        if let initialConnection {
            connection = initialConnection
        } else {
            // Armed without its connection: a commit may come before it opens, so the subscribers
            // are told once it has (they read the store; a signal too many costs a read).
            guard let opened = openWhenPossible() else { return }
            connection = opened
            lastVersion = readVersion(opened)
            onCommit()
        }
        // Closed before the thread says it ended (``stopAndWait(timeout:)``), not whenever the last reference goes.
        defer { try? connection.close() }
        /// Reads `data_version`; true (and remembered) when it changed.
        func changed() -> Bool {
            counters.withLock { $0.checks += 1 }
            guard let version = readVersion(connection), version != lastVersion else { return false }
            lastVersion = version
            return true
        }
        guard let writes, let announcements else {
            runWithoutInotify(changed: changed, onCommit: onCommit)
            return
        }
        // Pending checks (one of the static schedules, from a start: nothing is allocated per commit).
        var checks = PendingChecks()
        // Where inotify's events are read (4 KB: dozens of events).
        var events = [UInt8](repeating: 0, count: 4096)
        func schedule(_ delays: [Int], from now: UInt64) {
            checks = PendingChecks(delays: delays, start: now)
        }
        // A write to the log was heard and its commit not seen yet: writes are not listened to.
        var followingWrite = false
        // The file's writer announces its commits: the last commit seen was announced, or a
        // check saw it just before its announcement came.
        var writerAnnounces = false
        // When the last commit was seen without its announcement's mark (by a check, or at another
        // change of the log's metadata), until an announcement comes (however late: one within
        // ``lateAnnouncementWindow`` is read first, as likely that commit's).
        var unmarkedSeenAt: UInt64?
        // The last announcement's mark on the log's modification time.
        var lastMark = initialMark
        /// Notes a commit seen; `signalled` when its subscribers were told already; `marked` when it
        /// came with its announcement's mark. Seen without that mark, its announcement may still come.
        func seen(at now: UInt64, signalled: Bool = false, marked: Bool = false) {
            // (Told first: whoever reads the counts then finds this commit's signal counted.)
            if !signalled { onCommit() }
            counters.withLock { marked ? ($0.announcedCommits += 1) : ($0.checkedCommits += 1) }
            // (By a check, or at a change of the log's metadata that left no mark, such as another
            // connection opening the log: either way its own announcement may still come.)
            if !marked { unmarkedSeenAt = now }
            // The writes heard so far were this commit's, or another's that the next checks see.
            _ = writes.drain(mentioning: walName, buffer: &events)
            followingWrite = false
            schedule(Self.afterCommitSchedule, from: now)
        }

        while !stopped.load(ordering: .relaxed) {
            let now = DispatchTime.now().uptimeNanoseconds
            let wait = checks.first.map { $0 <= now ? 0 : min(1_000_000_000, $0 - now) }
            var fds = [pollfd(fd: stopPipe.read, events: Int16(POLLIN), revents: 0),
                       pollfd(fd: announcements.descriptor, events: Int16(POLLIN), revents: 0)]
            if !followingWrite { fds.append(pollfd(fd: writes.descriptor, events: Int16(POLLIN), revents: 0)) }
            let ready = Self.wait(on: &fds, nanoseconds: wait)
            if ready < 0 && errno != EINTR { return }
            if fds[0].revents != 0 { return }
            counters.withLock { $0.wakeUps += 1 }
            let announced = fds[1].revents & Int16(POLLIN) != 0 && announcements.drain(mentioning: walName, buffer: &events)
            let written = fds.count > 2 && fds[2].revents & Int16(POLLIN) != 0 && writes.drain(mentioning: walName, buffer: &events)
            let current = DispatchTime.now().uptimeNanoseconds
            if announced {
                writerAnnounces = true
                // A mark not seen before says a commit was announced (``CommitAnnouncer``): the subscribers
                // are told first, and `data_version` is read after, off their path. Unless a commit was seen
                // without its announcement's mark within `lateAnnouncementWindow` (this is
                // likely that one's: read first, so that one commit is signalled once). Other changes of
                // the log's metadata leave no new mark, and are read first as before.
                let mark = announcer.currentMark()
                let isNewMark = mark != nil && mark != lastMark
                if let mark { lastMark = mark }
                let lateForAnUnmarkedCommit = unmarkedSeenAt.map { current - $0 <= Self.lateAnnouncementWindow } ?? false
                let signalled = isNewMark && !lateForAnUnmarkedCommit
                if signalled { onCommit() }
                unmarkedSeenAt = nil
                let changedNow = changed()
                if changedNow { seen(at: current, signalled: signalled, marked: isNewMark) }
                // Counted once handled (signalled, and data_version read): whoever sees the count knows both are done.
                counters.withLock { $0.announcements += 1 }
                if changedNow { continue }
            } else if writerAnnounces, let since = unmarkedSeenAt, current - since > Self.announcementDelay {
                // The commit seen without its mark was not announced in time: its writer does not announce.
                writerAnnounces = false
            }
            if written {
                followingWrite = true
                schedule(writerAnnounces ? Self.announcedCheckSchedule : Self.checkSchedule, from: current)
            }
            if let first = checks.first, first <= current {
                checks.pass(current)
                if changed() {
                    seen(at: current)
                } else if checks.isEmpty {
                    followingWrite = false
                }
            }
        }
    }

    /// The checks of `data_version` still due: the deadlines `delays` (microseconds, ascending)
    /// after `start` (uptime nanoseconds), from the `next`th on.
    private struct PendingChecks {
        var delays: [Int] = []
        var start: UInt64 = 0
        var next = 0

        /// The first deadline still due; nil when none is.
        var first: UInt64? { next < delays.count ? start + UInt64(delays[next]) * 1_000 : nil }

        var isEmpty: Bool { next >= delays.count }

        /// Drops the deadlines up to `now`.
        mutating func pass(_ now: UInt64) {
            while let deadline = first, deadline <= now { next += 1 }
        }
    }

    /// Without inotify: `data_version` every ``fallbackInterval`` milliseconds.
    private func runWithoutInotify(changed: () -> Bool, onCommit: @Sendable () -> Void) {
        while !stopped.load(ordering: .relaxed) {
            var fds = [pollfd(fd: stopPipe.read, events: Int16(POLLIN), revents: 0)]
            let ready = Self.wait(on: &fds, nanoseconds: UInt64(Self.fallbackInterval) * 1_000_000)
            if ready < 0 && errno != EINTR { return }
            if fds[0].revents != 0 { return }
            counters.withLock { $0.wakeUps += 1 }
            if changed() {
                onCommit()
                counters.withLock { $0.checkedCommits += 1 }
            }
        }
    }

    /// Waits for an event on `fds`, at most `nanoseconds` (nil: until one comes).
    ///
    /// With ppoll(2), so that a wait shorter than a millisecond (between two checks) still ends at
    /// an event, such as the announcement of the very commit being waited for. Without it (a C
    /// library without ppoll), poll(2), whose timeout counts whole milliseconds, rounded up.
    private static func wait(on fds: inout [pollfd], nanoseconds: UInt64?) -> Int32 {
        if let ppoll = preciseWait {
            guard let nanoseconds else { return ppoll(&fds, nfds_t(fds.count), nil, nil) }
            var timeout = timespec(tv_sec: Int(nanoseconds / 1_000_000_000), tv_nsec: Int(nanoseconds % 1_000_000_000))
            return ppoll(&fds, nfds_t(fds.count), &timeout, nil)
        }
        let milliseconds = nanoseconds.map { Int32(clamping: ($0 + 999_999) / 1_000_000) } ?? -1
        return poll(&fds, nfds_t(fds.count), milliseconds)
    }

    private typealias PreciseWait = @convention(c) (UnsafeMutablePointer<pollfd>?, nfds_t, UnsafePointer<timespec>?, UnsafeRawPointer?) -> Int32

    /// The C library's `ppoll`, looked up by name: Swift's Glibc module does not declare it
    /// (glibc declares it only for `_GNU_SOURCE`). Nil where the library has none.
    private static let preciseWait: PreciseWait? = {
        #if os(Linux)
        dlsym(nil, "ppoll").map { unsafeBitCast($0, to: PreciseWait.self) }
        #else
        nil
        #endif
    }()
}
