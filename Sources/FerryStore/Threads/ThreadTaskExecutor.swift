import Foundation
import Synchronization

/// A task executor with one thread of its own (started by ``DedicatedThreads``): a task that
/// prefers it runs whenever it is woken, however busy the process's other threads are.
///
/// Work that must follow events as they come, and may block while it does (a container's change
/// feed reading the history after each commit, ``StoreChangeFeed``; the test trait's
/// `BlockingTrait.task`), runs on one of these rather than on Swift's shared pool, which on Linux
/// waits behind the process's computing work (``DedicatedThreads`` says why).
package final class ThreadTaskExecutor: TaskExecutor {
    private struct Queue: ~Copyable {
        var jobs: [UnownedJob] = []
        var stopping = false
    }

    private let queue = Mutex(Queue())
    private let wake = DispatchSemaphore(value: 0)

    /// Starts the executor's thread, named `name`; it runs until ``stop()``.
    package init(name: String) {
        DedicatedThreads.start(named: name) { [self] in run() }
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
