import Foundation
import Synchronization
import Testing
import FerryTestTraits
@testable import FerryTestSupport

/// The harness's waits end: a child process that hangs fails the test that
/// started it, and a test run that hangs is ended by `scripts/with-deadline`
/// with a report of what its processes were doing.
@Suite("Test harness: waits that end", .blocking)
struct HarnessTests {
    @Test("A program that does not end in time is killed and reported, with what it wrote to standard error")
    func processTimeout() throws {
        let started = Date()
        do {
            _ = try FerryProcess.run(executable: "/bin/sh", ["-c", "echo started >&2; exec sleep 60"], timeout: 1)
            Issue.record("a 60 s sleep ended within a 1 s timeout")
        } catch let error as FerryProcess.TimedOut {
            #expect(error.description.contains("did not end within 1 s"))
            #expect(error.standardError.contains("started"))
        }
        #expect(Date().timeIntervalSince(started) < 20)
    }

    @Test("A program that ignores its input and fills its output still runs to the end")
    func pipes() throws {
        // 1 MiB to standard output and 1 MiB to standard error, 1 MiB of input it never reads.
        let result = try FerryProcess.run(executable: "/bin/sh", ["-c", "head -c 1048576 /dev/zero; head -c 1048576 /dev/zero >&2"],
                                          input: String(repeating: "x", count: 1 << 20), timeout: 60)
        #expect(result.status == 0)
        #expect(result.standardOutput.utf8.count == 1 << 20 && result.standardError.utf8.count == 1 << 20)
    }

    @Test("with-deadline ends a command that hangs, says what its processes were doing, and exits 124; else passes the status on")
    func deadline() throws {
        let script = SampleModels.repositoryRoot + "/scripts/with-deadline"
        let hung = try FerryProcess.run(executable: script, ["0", "/bin/sh", "-c", "sleep 60 & sleep 60"], timeout: 60)
        #expect(hung.status == 124)
        #expect(hung.standardOutput.contains("has hung") && hung.standardOutput.contains("sleep 60"), "\(hung.standardOutput)")
        let passed = try FerryProcess.run(executable: script, ["5", "/bin/sh", "-c", "exit 3"], timeout: 60)
        #expect(passed.status == 3)
        let refused = try FerryProcess.run(executable: script, ["soon", "true"], timeout: 60)
        #expect(refused.status == 2 && refused.standardError.contains("whole number"))
    }

    @Test("Ports chosen for daemons to bind later are never handed out twice, so peers made before either starts cannot share one")
    func portsNeverRepeat() throws {
        // 1,500 draws from the ~22,000 ports below the ephemeral range: drawn independently, some 50
        // pairs would be the same port (the likeliest reading of a fleet run that failed with "Address already in use").
        let ports = try (0..<1_500).map { _ in try DaemonPeer.freePort() }
        let repeated = Dictionary(grouping: ports, by: { $0 }).filter { $0.value.count > 1 }.keys.sorted()
        #expect(repeated.isEmpty, "handed out more than once: \(repeated.prefix(10))")
        // And none from the kernel's ephemeral range, where outgoing connections take theirs.
        let ephemeral = try String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8)
            .split(whereSeparator: \.isWhitespace).compactMap { Int($0) }
        try #require(ephemeral.count == 2, "the ephemeral range is not two numbers: \(ephemeral)")
        let inEphemeral = ports.filter { (ephemeral[0]...ephemeral[1]).contains($0) }
        #expect(inEphemeral.isEmpty, "in the ephemeral range \(ephemeral): \(inEphemeral.prefix(5))")
    }

    @Test("A wait for a task that does not end when cancelled gives up at its deadline; a task that ends is told as it ended")
    func waitForATaskGivesUp() async throws {
        // What an in-process daemon's stop waits on: a task of the daemon that ignores its cancellation once
        // hung a full run (docs/RELIABILITY.md). This one waits on a continuation only the test resumes.
        let held = HeldContinuation()
        let stuck = Task<Int, any Error> {
            await withCheckedContinuation { held.hold($0) }
            return 1
        }
        stuck.cancel()
        // A backstop, so that a wait that does not give up fails this test (told the task's end 20 s
        // late) instead of hanging the run.
        let backstop = Task {
            try await Task.sleep(for: .seconds(20))
            held.release()
        }
        defer { backstop.cancel() }
        let started = ContinuousClock.now
        let outcome = await BoundedWaiting.result(of: stuck, within: .milliseconds(300))
        let waited = ContinuousClock.now - started
        #expect(outcome == nil, "a task that never ended was told as ended: \(String(describing: outcome))")
        #expect(waited >= .milliseconds(300) && waited < .seconds(10), "gave up after \(waited), not at its 0.3 s deadline")
        held.release()
        #expect(try await stuck.value == 1)

        let ends = Task<Int, any Error> { 7 }
        let ended = await BoundedWaiting.result(of: ends, within: .seconds(30))
        #expect(try ended?.get() == 7)
        struct Refused: Error {}
        let fails = Task<Int, any Error> { throw Refused() }
        let failed = await BoundedWaiting.result(of: fails, within: .seconds(30))
        #expect(throws: Refused.self) { try failed?.get() }
        // A task that ends is told at once, not at the deadline.
        #expect(ContinuousClock.now - started < .seconds(20))

        // What an in-process daemon's start waits on: the first port its stream yields. One that yields
        // none is given up at the deadline; cancelled, the wait ends.
        let (ports, _) = AsyncStream<Int>.makeStream()
        let waitingForPort = Task { await ports.first(where: { _ in true }) }
        let silent = ContinuousClock.now
        let port = await BoundedWaiting.result(of: waitingForPort, within: .milliseconds(300))
        #expect(port == nil && ContinuousClock.now - silent >= .milliseconds(300), "\(String(describing: port))")
        waitingForPort.cancel()
        #expect(await waitingForPort.value == nil)
    }
}

/// A continuation a task waits on until the test lets it go (it does not end when cancelled).
private final class HeldContinuation: Sendable {
    private let state = Mutex<(continuation: CheckedContinuation<Void, Never>?, released: Bool)>((nil, false))

    func hold(_ continuation: CheckedContinuation<Void, Never>) {
        let resumeNow = state.withLock { state -> Bool in
            if state.released { return true }
            state.continuation = continuation
            return false
        }
        if resumeNow { continuation.resume() }
    }

    func release() {
        state.withLock { state in
            state.released = true
            return state.continuation.take()
        }?.resume()
    }
}

/// The `.blocking` trait: tests that wait on processes leave Swift's cooperative pool to the
/// tests that suspend, and only a few of them run at once.
@Suite("Test harness: where blocking tests and the tasks they start run", .blocking)
struct BlockingTraitTests {
    @Test("A synchronous test runs on the trait's threads, not the cooperative pool's")
    func synchronousTest() {
        #expect(BlockingTrait.isRunningOnItsThreads)
    }

    @Test("An asynchronous test comes back to the trait's threads after it suspends")
    func asynchronousTest() async throws {
        try await Task.sleep(for: .milliseconds(20))
        #expect(BlockingTrait.isRunningOnItsThreads)
        await Task.yield()
        #expect(BlockingTrait.isRunningOnItsThreads)
    }

    @Test("A task a test starts through the trait runs on a thread of its own, as Task.detached does not")
    func startedTask() async {
        #expect(await BlockingTrait.task { BlockingTrait.isRunningOnItsThreads }.value)
        #expect(await Task.detached { BlockingTrait.isRunningOnItsThreads }.value == false)
    }

    @Test("A task a test starts through the trait runs at once while every thread of libdispatch's default pool computes")
    func startedTaskRunsWhileThePoolComputes() async {
        // As in the first tens of seconds of a full run: more computing jobs than cores on the
        // default queue, which (on Linux) Swift's pool and the trait's queue run on too.
        let spinners = ProcessInfo.processInfo.activeProcessorCount + 2
        let until = Date().addingTimeInterval(2)
        for _ in 0..<spinners {
            DispatchQueue.global().async { while Date() < until {} }
        }
        usleep(100_000)  // (blocking on purpose: a suspension would wait behind the spinners to resume)
        let asked = Date()
        let ran = await BlockingTrait.task { Date() }.value
        #expect(ran.timeIntervalSince(asked) < 1, "the task ran \(ran.timeIntervalSince(asked)) s after it was started, behind the computing jobs")
    }

    /// How many cases of ``atMostPermitsAtOnce(case:)`` are running, and the most that ever were.
    static let running = Mutex((now: 0, most: 0))

    @Test("No more test cases run at once than there are permits, however many wait", arguments: 0..<6)
    func atMostPermitsAtOnce(case: Int) {
        Self.running.withLock { $0.now += 1; $0.most = max($0.most, $0.now) }
        Thread.sleep(forTimeInterval: 0.3)  // long enough for the other cases to start if the gate let them
        let most = Self.running.withLock { running in
            running.now -= 1
            return running.most
        }
        #expect(most <= BlockingTrait.permits, "\(most) cases ran at once with \(BlockingTrait.permits) permits")
    }
}
