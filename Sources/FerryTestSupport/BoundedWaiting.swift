import Foundation
import Synchronization

/// Waits that end: every wait of the test harness on another process or
/// thread has a deadline, so a child that never ends or never answers fails
/// the test that started it, with what it printed, instead of hanging the
/// whole test run (CI then only says it ran out of time, and shows nothing).
public enum BoundedWaiting {
    /// How long a `ferry` command (or another program run by ``FerryProcess``) may take
    /// unless a test says otherwise; `FERRY_TEST_PROCESS_TIMEOUT` (seconds) changes it.
    public static let processTimeout: TimeInterval = {
        ProcessInfo.processInfo.environment["FERRY_TEST_PROCESS_TIMEOUT"].flatMap(TimeInterval.init) ?? 300
    }()

    /// Runs `operation` in a task of its own, cancelled if it is still running after `bound`:
    /// how it ended, and how long it took. For a test whose subject must end by itself (a
    /// timeout under test), so that one that does not fails the test instead of hanging the run.
    public static func outcome<Success: Sendable>(within bound: Duration, of operation: @escaping @Sendable () async throws -> Success) async
        -> (result: Result<Success, any Error>, waited: Duration) {
        let task = Task { try await operation() }
        let canceller = Task {
            try await Task.sleep(for: bound)
            task.cancel()
        }
        let started = ContinuousClock.now
        let result = await task.result
        let waited = ContinuousClock.now - started
        canceller.cancel()
        return (result, waited)
    }

    /// Waits for `task` to end, at most `timeout`: how it ended, or nil when it had not by then.
    /// A task that does not end when cancelled cannot be made to end, so it is left running; the
    /// caller fails its test with that instead of waiting for ever. The wait is raced by two
    /// unstructured tasks: a task group would itself wait for a child that never ends.
    public static func result<Success: Sendable, Failure: Error>(of task: Task<Success, Failure>, within timeout: Duration) async
        -> Result<Success, Failure>? {
        // Cancelled once the task ends, so that no sleep outlives a wait that went well.
        let deadline = Task { try await Task.sleep(for: timeout) }
        return await withCheckedContinuation { continuation in
            let resumed = ResumedOnce()
            let resume = { @Sendable (outcome: Result<Success, Failure>?) in
                guard !resumed.flag.exchange(true, ordering: .acquiringAndReleasing) else { return }
                continuation.resume(returning: outcome)
            }
            Task {
                resume(await task.result)
                deadline.cancel()
            }
            Task {
                _ = await deadline.result
                resume(nil)  // (nothing once the task's end was told)
            }
        }
    }

    /// Waits until `process` has ended, up to `timeout` seconds; whether it ended.
    public static func waitForExit(_ process: Process, timeout: TimeInterval) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning {
            if Date() >= deadline { return false }
            Thread.sleep(forTimeInterval: 0.005)
        }
        return true
    }

    /// Ends `process` with SIGKILL and waits for it (a killed process ends at once; the bound
    /// only guards against a harness that no longer notices children ending).
    public static func kill(_ process: Process) {
        guard process.isRunning else { return }
        Foundation.kill(process.processIdentifier, SIGKILL)
        if !waitForExit(process, timeout: 30) {
            FileHandle.standardError.write(Data("ferry tests: process \(process.processIdentifier) still counts as running 30 s after SIGKILL\n".utf8))
        }
    }
}

/// Whether a continuation raced by two tasks was resumed.
private final class ResumedOnce: Sendable {
    let flag = Atomic<Bool>(false)
}

/// Reads a pipe to its end on a thread of its own.
final class PipeReader: Sendable {
    private let data = Mutex(Data())
    private let done = DispatchSemaphore(value: 0)

    init(_ handle: FileHandle) {
        Thread { [self] in
            let all = handle.readDataToEndOfFile()
            data.withLock { $0 = all }
            done.signal()
        }.start()
    }

    /// Everything the pipe carried once it is closed; nil if it is still open after `timeout`
    /// seconds (a process that inherited it still runs).
    func wait(timeout: TimeInterval) -> Data? {
        guard done.wait(timeout: .now() + timeout) == .success else { return nil }
        done.signal()  // later waits return at once
        return data.withLock { $0 }
    }
}

/// Writes bytes to a pipe and closes it, on a thread of its own (a child that does not
/// read its input must not block the test).
enum PipeWriter {
    static func write(_ data: Data?, to handle: FileHandle) {
        Thread {
            // A child that ends without reading its input closes the pipe: SIGPIPE is blocked on
            // this thread so that the write fails with EPIPE instead of ending the test process.
            var pipeSignal = sigset_t()
            sigemptyset(&pipeSignal)
            sigaddset(&pipeSignal, SIGPIPE)
            pthread_sigmask(SIG_BLOCK, &pipeSignal, nil)
            if let data, !data.isEmpty { try? handle.write(contentsOf: data) }
            try? handle.close()
        }.start()
    }
}
