import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The one place Ferry starts threads of its own, off Swift's shared pool.
///
/// On Linux, Swift's global executor and every default-priority dispatch queue share
/// libdispatch's default root queue, which runs about as many jobs at once as there are cores and
/// adds threads only for workers blocked in the kernel, not for workers that compute. Work that
/// must keep up while the process computes, or that blocks for long (a commit watcher's `poll`,
/// a change feed's reads, a parser feeding a writer), runs on a thread of its own instead, started
/// here: every such thread is named `ferry-…` and ends when its body returns.
///
/// Who uses it: ``ThreadTaskExecutor`` (a change feed, the test trait's tasks), the SQLite store's
/// commit watcher and the text of a large save's inserts written beside its rows, the replay's
/// decoding of large pages and its direct-insert drafts, and `ferry put`'s parser.
package enum DedicatedThreads {
    /// The longest name Linux gives a thread (what `top -H` and `gdb` show), in bytes.
    package static let longestName = 15

    /// The calling thread's name as the system knows it (what `top -H` and `gdb` show); empty where
    /// the C library has no `pthread_getname_np`.
    package static var currentName: String {
        guard let getName else { return "" }
        var buffer = [CChar](repeating: 0, count: 64)
        guard getName(pthread_self(), &buffer, buffer.count) == 0 else { return "" }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    // The C library's thread-name calls, looked up by name: Swift's Glibc module does not declare them.
    private typealias SetName = @convention(c) (pthread_t, UnsafePointer<CChar>) -> Int32
    private typealias GetName = @convention(c) (pthread_t, UnsafeMutablePointer<CChar>, Int) -> Int32
    #if os(Linux)
    private static let setName: SetName? = dlsym(nil, "pthread_setname_np").map { unsafeBitCast($0, to: SetName.self) }
    private static let getName: GetName? = dlsym(nil, "pthread_getname_np").map { unsafeBitCast($0, to: GetName.self) }
    #else
    // (Elsewhere the calls differ in shape; the threads keep the names their platform gives.)
    private static let setName: SetName? = nil
    private static let getName: GetName? = nil
    #endif

    /// Starts `body` on a new thread named `name`, which should start with `ferry-` (cut to
    /// ``longestName`` bytes).
    package static func start(named name: String, _ body: @escaping @Sendable () -> Void) {
        let name = String(decoding: name.utf8.prefix(longestName), as: UTF8.self)
        let thread = Thread {
            // Named from inside, by the system call: on Linux, a name given to the `Thread` before
            // `start()` is not applied, nor always one set on `Thread.current` (it races with `start()`
            // recording the new thread), and the thread shows its creator's name, often libdispatch's
            // "com.apple.root.default-qos".
            _ = setName?(pthread_self(), name)
            body()
        }
        thread.start()
    }

    /// Starts `body` on a new thread named `name`; ``Joinable/join()`` waits for its result.
    package static func spawn<Result: Sendable>(named name: String,
                                                _ body: @escaping @Sendable () -> Result) -> Joinable<Result> {
        let joinable = Joinable<Result>()
        start(named: name) { joinable.finish(body()) }
        return joinable
    }

    /// Runs `body` on a new thread named `name` and returns its result; the awaiting task holds
    /// no thread of the shared pool meanwhile.
    package static func run<Result: Sendable>(named name: String,
                                              _ body: @escaping @Sendable () -> Result) async -> Result {
        await withCheckedContinuation { (continuation: CheckedContinuation<Result, Never>) in
            start(named: name) { continuation.resume(returning: body()) }
        }
    }

    /// The result of a thread started by ``spawn(named:_:)``.
    package final class Joinable<Result: Sendable>: Sendable {
        private let result = Mutex<Result?>(nil)
        private let done = DispatchSemaphore(value: 0)

        fileprivate init() {}

        fileprivate func finish(_ value: Result) {
            result.withLock { $0 = value }
            done.signal()
        }

        /// Waits for the thread's body to return, and gives its result (a later call gives it again
        /// at once).
        package func join() -> Result {
            done.wait()
            done.signal()  // (for a later call)
            guard let value = result.withLock({ $0 }) else { preconditionFailure("a joined thread left no result") }
            return value
        }
    }
}
