import Foundation
import Synchronization

/// A task executor with one thread of its own: a task that prefers it runs whenever it is
/// woken, however busy the process's other threads are.
///
/// On Linux, Swift's global executor and every default-priority dispatch queue (the
/// ``BlockingTrait``'s among them) share libdispatch's default root queue, which runs about as
/// many jobs at once as there are cores, and adds threads only for workers blocked in the
/// kernel, not for workers that compute. In a full test run hundreds of tests start at once and
/// keep two cores computing for tens of seconds, and a job enqueued there meanwhile waits its
/// turn behind them: a task counting a store's commit signals heard a commit later than its
/// test's 10 s bound, and counted it and the next as one (its stream keeps one signal pending).
final class ThreadTaskExecutor: TaskExecutor {
    private struct Queue: ~Copyable {
        var jobs: [UnownedJob] = []
        var stopping = false
    }

    private let queue = Mutex(Queue())
    private let wake = DispatchSemaphore(value: 0)

    /// Starts the executor's thread, named `name`; it runs until ``stop()``.
    init(name: String) {
        let thread = Thread { [self] in run() }
        thread.name = name
        thread.start()
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        queue.withLock { $0.jobs.append(job) }
        wake.signal()
    }

    /// Ends the thread once the jobs enqueued so far have run (a job enqueued after that never runs).
    func stop() {
        queue.withLock { $0.stopping = true }
        wake.signal()
    }

    /// Whether the calling code runs on the thread of an executor of this kind.
    static var isCurrent: Bool { Thread.current.threadDictionary[threadKey] != nil }

    private static let threadKey = "ferry.tests.thread-task-executor"

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
