import Foundation
import GRDB
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Tells its subscribers when a store file has new commits — made by this
/// process or by any other process writing the same file — without polling
/// the store.
///
/// How: on Linux an inotify watch on the store's folder wakes a thread of its
/// own whenever the file's write-ahead log (`-wal`) is written. A commit writes
/// its frames first and publishes them (in the `-shm` index, which inotify does
/// not see) only after its sync, so each wake-up is followed by a few checks of
/// SQLite's `PRAGMA data_version` on a connection of the watcher's own, at
/// growing intervals (every 0.1 ms at first, up to half a second), until the number changes: a change
/// means another connection committed — and the watcher's connection is its own, so that covers
/// this process's saves as well as other processes'. Where inotify is not available,
/// `data_version` is checked every 50 ms instead.
///
/// Each subscriber gets an `AsyncStream` that holds at most one pending signal:
/// a burst of commits while it was busy reads as one. A signal says only that
/// something was committed; what, the subscriber reads from the store.
final class CommitWatcher: Sendable {
    private struct Subscribers {
        var next = 0
        var continuations: [Int: AsyncStream<Void>.Continuation] = [:]
    }

    private let subscribers = Mutex(Subscribers())
    private let loop: WatchLoop?

    /// Watches the store file at `path`; the watching thread runs until the watcher is released.
    init(path: String) {
        loop = WatchLoop(path: path)
        loop?.start { [weak self] in self?.broadcast() }
    }

    deinit {
        loop?.stop()
        let continuations = subscribers.withLock { $0.continuations.values }
        for continuation in continuations { continuation.finish() }
    }

    /// A signal after each commit (or burst of commits) from now on; ends when the watcher goes.
    func commits() -> AsyncStream<Void> {
        let (stream, continuation) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let id = subscribers.withLock { state in
            defer { state.next += 1 }
            state.continuations[state.next] = continuation
            return state.next
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.subscribers.withLock { $0.continuations.removeValue(forKey: id) }
        }
        return stream
    }

    private func broadcast() {
        let continuations = subscribers.withLock { Array($0.continuations.values) }
        for continuation in continuations { continuation.yield() }
    }
}

/// The watching thread: inotify on the store's folder (Linux), `data_version` checks after each wake-up.
///
/// Armed when it is made — the watch added and the first `data_version` read before the
/// initializer returns — so that a commit made once ``SQLiteStore/commits()`` has returned is
/// never missed, however late the thread gets to run.
private final class WatchLoop: Sendable {
    private let walName: String
    /// Written to by ``stop()`` to wake the thread.
    private let stopPipe: (read: Int32, write: Int32)
    private let stopped = Atomic<Bool>(false)
    /// The watcher's own connection, for `PRAGMA data_version`.
    private let connection: DatabaseQueue
    /// `data_version` when the watcher was armed.
    private let initialVersion: Int64?
    /// The inotify descriptor; nil where inotify cannot be used.
    private let watch: Int32?

    /// Delays after a wake-up at which `data_version` is read, in microseconds: every 0.1 ms for
    /// the first 3 ms (a commit's sync, 0.3–1 ms here, lies between its last write and its
    /// publication, and each check after it is latency for every reader: a read costs a few
    /// microseconds), then every 0.5 ms to 10 ms, every 2 ms to 50 ms and every 10 ms to half a
    /// second, for a slow disk. The checks stop at the first change.
    static let checkSchedule: [Int] = Array(stride(from: 0, to: 3_000, by: 100)) + Array(stride(from: 3_000, to: 10_000, by: 500))
        + Array(stride(from: 10_000, to: 50_000, by: 2_000)) + Array(stride(from: 50_000, through: 500_000, by: 10_000))
    /// How often `data_version` is read when inotify cannot be used.
    static let fallbackInterval = 50

    init?(path: String) {
        var configuration = Configuration()
        configuration.readonly = true
        guard let connection = try? DatabaseQueue(path: path, configuration: configuration) else { return nil }
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { return nil }
        _ = fcntl(fds[0], F_SETFD, FD_CLOEXEC)
        _ = fcntl(fds[1], F_SETFD, FD_CLOEXEC)
        stopPipe = (fds[0], fds[1])
        let url = URL(fileURLWithPath: path)
        walName = url.lastPathComponent + "-wal"
        self.connection = connection
        watch = Self.watchFolder(url.deletingLastPathComponent().path)
        initialVersion = Self.dataVersion(on: connection)
    }

    /// SQLite's `PRAGMA data_version` on `connection` (a cached statement: read hundreds of
    /// times a second while commits come in).
    private static func dataVersion(on connection: DatabaseQueue) -> Int64? {
        try? connection.inDatabase { db in try Int64.fetchOne(db.cachedStatement(sql: "PRAGMA data_version")) }
    }

    func start(onCommit: @escaping @Sendable () -> Void) {
        let thread = Thread { [self] in run(onCommit: onCommit) }
        thread.name = "ferry-commit-watcher"
        thread.start()
    }

    func stop() {
        guard !stopped.exchange(true, ordering: .relaxed) else { return }
        var byte: UInt8 = 1
        _ = write(stopPipe.write, &byte, 1)
    }

    private func run(onCommit: @Sendable () -> Void) {
        defer {
            close(stopPipe.read)
            close(stopPipe.write)
            if let watch { close(watch) }
        }
        var lastVersion = initialVersion
        /// Reads `data_version`; true (and remembered) when it changed.
        func changed() -> Bool {
            guard let version = Self.dataVersion(on: connection), version != lastVersion else { return false }
            lastVersion = version
            return true
        }

        // Pending checks after the last wake-up: deadlines in uptime nanoseconds.
        var checks: [UInt64] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while !stopped.load(ordering: .relaxed) {
            let now = DispatchTime.now().uptimeNanoseconds
            // How long to wait for an event, in nanoseconds (nil: until one comes).
            let wait: UInt64?
            if watch == nil {
                wait = UInt64(Self.fallbackInterval) * 1_000_000
            } else if let first = checks.first {
                wait = first <= now ? 0 : min(1_000_000_000, first - now)
            } else {
                wait = nil
            }
            var fds = [pollfd(fd: stopPipe.read, events: Int16(POLLIN), revents: 0)]
            if let watch { fds.append(pollfd(fd: watch, events: Int16(POLLIN), revents: 0)) }
            let timeout: Int32
            switch wait {
            case nil: timeout = -1
            case let nanoseconds? where nanoseconds >= 1_000_000: timeout = Int32(nanoseconds / 1_000_000)
            case let nanoseconds?:
                // poll(2) counts in milliseconds: a shorter wait is slept, then the events are looked at.
                if nanoseconds > 0 { usleep(UInt32(nanoseconds / 1_000)) }
                timeout = 0
            }
            let ready = poll(&fds, nfds_t(fds.count), timeout)
            if ready < 0 && errno != EINTR { return }
            if fds[0].revents != 0 { return }
            if let watch, fds.count > 1, fds[1].revents & Int16(POLLIN) != 0 {
                let count = read(watch, &buffer, buffer.count)
                if count > 0 && Self.mentions(walName, in: buffer, count: count) {
                    let start = DispatchTime.now().uptimeNanoseconds
                    checks = Self.checkSchedule.map { start + UInt64($0) * 1_000 }
                }
            }
            if watch == nil {
                if changed() { onCommit() }
                continue
            }
            let current = DispatchTime.now().uptimeNanoseconds
            if let first = checks.first, first <= current {
                checks.removeAll { $0 <= current }
                if changed() {
                    checks.removeAll()
                    onCommit()
                }
            }
        }
    }

    /// An inotify descriptor watching `folder` for writes and new files; nil where inotify cannot be used.
    private static func watchFolder(_ folder: String) -> Int32? {
        #if os(Linux)
        let descriptor = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard descriptor >= 0 else { return nil }
        let mask = UInt32(IN_MODIFY) | UInt32(IN_CREATE) | UInt32(IN_MOVED_TO)
        guard inotify_add_watch(descriptor, folder, mask) >= 0 else {
            close(descriptor)
            return nil
        }
        return descriptor
        #else
        return nil
        #endif
    }

    /// Whether the inotify events in `buffer` name the file `name`.
    private static func mentions(_ name: String, in buffer: [UInt8], count: Int) -> Bool {
        #if os(Linux)
        let target = Array(name.utf8)
        let header = MemoryLayout<inotify_event>.size
        // (wd, mask, cookie, len: the name's length comes after three 32-bit fields.)
        let lengthOffset = MemoryLayout<inotify_event>.offset(of: \.len) ?? 12
        var offset = 0
        while offset + header <= count {
            let length = buffer.withUnsafeBytes { bytes in
                Int(bytes.loadUnaligned(fromByteOffset: offset + lengthOffset, as: UInt32.self))
            }
            let nameStart = offset + header
            let nameEnd = min(count, nameStart + length)
            if length > 0 {
                let found = buffer[nameStart..<nameEnd].prefix { $0 != 0 }
                if found.elementsEqual(target) { return true }
            }
            offset = nameStart + length
        }
        return false
        #else
        return true
        #endif
    }
}
