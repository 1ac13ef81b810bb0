import Foundation
import Testing
import FerryStore

/// A trait for suites whose tests block a thread while they wait: for `ferry` processes,
/// for daemons to answer, for PostgreSQL, on sleeps and semaphores, or on long
/// synchronous computations.
///
/// Swift Testing runs tests on Swift's shared cooperative pool, which has one thread per
/// core: two on the machines CI uses. A synchronous test that waits on a daemon holds one
/// of them for as long as it waits, so two such tests stop every other test, and every
/// task the tests started, until one of them ends; timed checks in asynchronous tests
/// then failed for want of a thread, not for anything the code under test did (three did
/// in full runs on a slow day, and each passed alone).
///
/// Under this trait a test case runs on a concurrent dispatch queue (a task executor
/// preference), after it has taken one of a few permits: as many such tests run at once as
/// there are permits (`FERRY_TEST_BLOCKING_WIDTH`, 2 unless set), so the machine is not
/// loaded with every daemon test at once. The queue's jobs run on libdispatch's default
/// pool, which adds a thread when one of its threads blocks in the kernel (a wait on a
/// process, a sleep); on Linux Swift's global executor runs on that same pool, so the trait
/// keeps blocked waits from holding the pool's few threads, not computing tests from
/// taking them. A task that must run promptly whatever the rest of the run does gets a
/// thread of its own: ``task(_:)``.
///
/// ```swift
/// @Suite("Replication between ferry run processes", .blocking)
/// struct ReplicationTests { … }
/// ```
public struct BlockingTrait: TestTrait, SuiteTrait, TestScoping {
    public var isRecursive: Bool { true }

    /// Each test case gets its own scope (and permit); a suite as a whole takes none.
    public func scopeProvider(for test: Test, testCase: Test.Case?) -> Self? {
        testCase == nil ? nil : self
    }

    public func provideScope(for test: Test, testCase: Test.Case?,
                             performing function: @Sendable () async throws -> Void) async throws {
        // A test that gets the trait twice (from its suite and from an enclosing one) takes one permit.
        if BlockingWork.isInside { return try await function() }
        try await BlockingWork.gate.withPermit {
            try await BlockingWork.$isInside.withValue(true) {
                try await withTaskExecutorPreference(BlockingWork.executor) { try await function() }
            }
        }
    }
}

extension BlockingTrait {
    /// Whether the calling code runs where the trait puts a test (its queue, not the cooperative
    /// pool's), or where it puts a task started through ``task(_:)`` (a thread of its own).
    public static var isRunningOnItsThreads: Bool { BlockingWork.executor.isCurrent || ThreadTaskExecutor.isCurrent }

    /// How many test cases under the trait may run at once (`FERRY_TEST_BLOCKING_WIDTH`, 2 unless set).
    public static var permits: Int { BlockingWork.permits }

    /// Starts `body` as a task on a thread of its own (``ThreadTaskExecutor``), which ends with
    /// the task: for a task a test starts and then waits on within a bound (a listener counting
    /// signals). In a full run every thread of Swift's pool and of the trait's queue (on Linux,
    /// one pool of libdispatch's: about one running job per core) can be busy with other suites'
    /// work for tens of seconds, and a task waiting for one of them misses the bound though
    /// nothing is wrong (`Task.detached` waits there, and so did a task on the trait's queue).
    @discardableResult
    public static func task<Success: Sendable>(_ body: sending @escaping @isolated(any) () async -> Success) -> Task<Success, Never> {
        ThreadTaskExecutor.task(named: "ferry-test-task", body)
    }
}

extension Trait where Self == BlockingTrait {
    /// Runs each test case of the suite (or the test) off Swift's cooperative pool, a few at a time.
    /// See ``BlockingTrait``.
    public static var blocking: Self { BlockingTrait() }
}

/// The shared state of ``BlockingTrait``: one executor and one gate for the whole test run.
enum BlockingWork {
    @TaskLocal static var isInside = false

    static let executor = DispatchQueueTaskExecutor(label: "ferry.tests.blocking")

    static let permits = max(1, ProcessInfo.processInfo.environment["FERRY_TEST_BLOCKING_WIDTH"].flatMap(Int.init) ?? 2)

    static let gate = PermitGate(permits: permits)
}

/// A task executor that runs each job on a concurrent dispatch queue. Its queue targets a
/// global queue that adds threads when its threads block, unlike the cooperative pool.
final class DispatchQueueTaskExecutor: TaskExecutor {
    private let queue: DispatchQueue

    init(label: String) {
        queue = DispatchQueue(label: label, attributes: .concurrent)
        queue.setSpecific(key: Self.queueKey, value: ObjectIdentifier(self))
    }

    /// The queue's key, set to this executor's identity on the queue, so a test can check
    /// where it runs.
    static let queueKey = DispatchSpecificKey<ObjectIdentifier>()

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        queue.async { job.runSynchronously(on: executor) }
    }

    /// Whether the calling code runs on this executor's queue.
    var isCurrent: Bool { DispatchQueue.getSpecific(key: Self.queueKey) == ObjectIdentifier(self) }
}

/// Hands out a fixed number of permits; waiting for one suspends the task, it does not block a thread.
actor PermitGate {
    private var available: Int
    private var waiting: [CheckedContinuation<Void, Never>] = []

    init(permits: Int) { available = permits }

    /// Runs `body` holding a permit, and gives the permit back however `body` ends.
    nonisolated func withPermit<T: Sendable>(_ body: @Sendable () async throws -> T) async throws -> T {
        await acquire()
        do {
            let result = try await body()
            await release()
            return result
        } catch {
            await release()
            throw error
        }
    }

    private func acquire() async {
        if available > 0 {
            available -= 1
            return
        }
        await withCheckedContinuation { waiting.append($0) }
    }

    private func release() {
        if waiting.isEmpty {
            available += 1
        } else {
            waiting.removeFirst().resume()
        }
    }
}
