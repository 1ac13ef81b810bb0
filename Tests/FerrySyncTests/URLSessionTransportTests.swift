import Foundation
import Synchronization
import Testing
import FerryTestSupport
@testable import FerrySync

/// The transport of peers without a `ca_file`: URLSession over libcurl.
@Suite("URLSession transport")
struct URLSessionTransportTests {
    /// Two upstream hazards of this toolchain's URLSession, both met when a request is cancelled
    /// (a sync round cancels its requests on timeouts and at shutdown):
    /// - with a URL cache (as `.ephemeral` has), each data task looks its request up on a
    ///   background queue first, and a cancel landing in that window can end the process
    ///   ("Trying to access a behaviour for a task that in not in the registry"; it killed a
    ///   daemon in the network-fault test);
    /// - `URLSession.data(for:)` cancels its task with a synchronous call onto the session's
    ///   work queue while holding the Swift task's status lock; if the work queue is finishing
    ///   the request at that moment, it waits for the same lock, and both threads hang.
    /// Without the fixes this test crashed on every run (the first), or failed as hung on every
    /// run once half of its cancels came a little after the request started (the second).
    ///
    /// A hang takes one thread of Swift's shared pool for good, so the requests run in one loop
    /// (one hang at most) and the test waits for them without holding a thread of its own.
    @Test("Requests cancelled as soon as they start end in an error, never in a crash or a hang; the transport keeps working")
    func requestsCancelledAtOnce() async throws {
        let peer = try StandInPeer { _, _ in .init(body: "{}") }
        defer { peer.stop() }
        let transport = URLSessionTransport(timeout: 5)
        let url = try #require(URL(string: peer.url + "v1/status"))
        let request = PeerRequest(method: "GET", url: url, headers: [], body: nil)
        let outcome = Outcome()
        Task.detached {
            var cancelled = 0
            for round in 0..<1_200 {
                let task = Task { try await transport.send(request) }
                // Half at once, half a little later, so that some cancels meet the request's end.
                if round % 2 == 1 { try? await Task.sleep(for: .microseconds(Int.random(in: 0...1_500))) }
                task.cancel()
                if case .failure = await task.result { cancelled += 1 }
            }
            outcome.finish(cancelled: cancelled, answer: try? await transport.send(request))
        }
        let result = await outcome.wait(seconds: 480)
        let (cancelled, answer) = try #require(result, "1,200 cancelled requests did not finish within 480 s (about 150 s beside the whole suite): a cancel hung")
        #expect(cancelled > 0, "no request was cancelled before it completed: the test did not exercise the race")
        #expect(answer?.status == 200 && answer?.body == Data("{}".utf8), "a request after the cancelled ones: \(String(describing: answer))")
    }
}

/// What the requests of ``URLSessionTransportTests`` came to.
private final class Outcome: Sendable {
    private let value = Mutex<(cancelled: Int, answer: PeerResponse?)?>(nil)
    private let done = DispatchSemaphore(value: 0)

    func finish(cancelled: Int, answer: PeerResponse?) {
        value.withLock { $0 = (cancelled, answer) }
        done.signal()
    }

    /// The outcome, or nil if it did not come within `seconds`; waited for on a thread of its
    /// own, not on one of Swift's shared pool.
    func wait(seconds: Double) async -> (cancelled: Int, answer: PeerResponse?)? {
        let arrived = await withCheckedContinuation { continuation in
            Thread { continuation.resume(returning: self.done.wait(timeout: .now() + seconds) == .success) }.start()
        }
        return arrived ? value.withLock { $0 } : nil
    }
}
