import Foundation
import Synchronization

/// A task executor with one thread of its own: a task that prefers it runs whenever it is
/// woken, however busy the process's other threads are.
///
/// On Linux, Swift's global executor and every default-priority dispatch queue share
/// libdispatch's default root queue, which runs about as many jobs at once as there are cores,
/// and adds threads only for workers blocked in the kernel, not for workers that compute. A job
/// enqueued there while the process computes waits its turn behind that work: a container's
/// change feed, reading on a queue, told a commit 2.9 s late while jobs spun on every thread of that
/// queue for 3 s (`StoreChangeFeedTests`), and missed its tests' 10 s bounds in full test runs; a
/// test's task counting commit signals heard them late. Work that must follow events as they come, and may block while it
/// does (the feed's reads of the history), runs on one of these instead (``StoreChangeFeed``;
/// the test trait's `BlockingTrait.task`).
package final class ThreadTaskExecutor: TaskExecutor {
    private struct Queue: ~Copyable {
        var jobs: [UnownedJob] = []
        var stopping = false
    }

    private let queue = Mutex(Queue())
    private let wake = DispatchSemaphore(value: 0)

    /// Starts the executor's thread, named `name`; it runs until ``stop()``.
    package init(name: String) {
        let thread = Thread { [self] in run() }
        thread.name = name
        thread.start()
    }

    package func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        queue.withLock { $0.jobs.append(job) }
        wake.signal()
    }

    /// Ends the thread once the jobs enqueued so far have run (a job enqueued after that never runs).
    package func stop() {
        queue.withLock { $0.stopping = true }
        wake.signal()
    }

    /// Starts `body` as a task on a new executor of this kind, named `name`, whose thread ends with the task.
    @discardableResult
    package static func task<Success: Sendable>(named name: String,
                                                _ body: sending @escaping @isolated(any) () async -> Success) -> Task<Success, Never> {
        let executor = ThreadTaskExecutor(name: name)
        return Task(executorPreference: executor) {
            defer { executor.stop() }
            return await body()
        }
    }

    /// Whether the calling code runs on the thread of an executor of this kind.
    package static var isCurrent: Bool { Thread.current.threadDictionary[threadKey] != nil }

    private static let threadKey = "ferry.thread-task-executor"

    private func run() {
        Thread.current.threadDictionary[Self.threadKey] = true
        let executor = asUnownedTaskExecutor()
        while true {
            wake.wait()
            while let job = queue.withLock({ $0.jobs.isEmpty ? nil : $0.jobs.removeFirst() }) {
                job.runSynchronously(on: executor)
            }
            if queue.withLock({ $0.stopping && $0.jobs.isEmpty }) { return }
        }
    }
}
