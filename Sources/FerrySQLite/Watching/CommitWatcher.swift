import Foundation
import Synchronization
import GRDB

/// Tells its subscribers when a store file has new commits — made by this
/// process or by any other process writing the same file — without polling
/// the store.
///
/// How: on Linux, inotify on the store's folder wakes a thread of its own
/// (``WatchLoop``) when a commit is announced — every Ferry store's writer touches
/// the write-ahead log's times once its commit is published (``CommitAnnouncer``) —
/// and the thread reads SQLite's `PRAGMA data_version` on a connection of its own:
/// a change means another connection committed, and the watcher's connection is
/// its own, so that covers this process's saves as well as other processes'. An announced
/// commit is signalled before that read, since an announcement follows a published commit. A
/// writer that does not announce (another program on the file) is seen by checks
/// of `data_version` after its writes to the log (every 0.1 ms at first, up to half
/// a second). Where inotify is not available, `data_version` is checked every
/// 50 ms instead.
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
    /// `readVersion`: how the thread reads `data_version` (tests pass a slow one); `openConnection`:
    /// how it opens its connection (tests make it fail).
    init(path: String, readVersion: @escaping @Sendable (DatabaseQueue) -> Int64? = WatchLoop.dataVersion(on:),
         openConnection: @escaping @Sendable (String) throws -> DatabaseQueue = WatchLoop.openReadOnly) {
        loop = WatchLoop(path: path, readVersion: readVersion, openConnection: openConnection)
        loop?.start { [weak self] in self?.broadcast() }
    }

    deinit {
        loop?.stop()
        finishSubscribers()
    }

    /// Stops the watching thread and waits until it has closed its connection to the store (at
    /// most `timeout` seconds; false when it had not by then). Subscribers' streams end.
    @discardableResult
    func close(timeout: TimeInterval = 5) -> Bool {
        let ended = loop?.stopAndWait(timeout: timeout) ?? true
        finishSubscribers()
        return ended
    }

    private func finishSubscribers() {
        let continuations = subscribers.withLock { $0.continuations.values }
        for continuation in continuations { continuation.finish() }
    }

    /// What the watching thread did so far (zeros where it could not start).
    var statistics: WatchLoop.Statistics { loop?.statistics ?? WatchLoop.Statistics() }

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
