import Foundation
import Synchronization
import Testing
import FerryTestSupport
@testable import FerrySync

/// The transport of every peer: AsyncHTTPClient.
@Suite("HTTP transport")
struct HTTPTransportTests {
    /// A sync round cancels its requests on timeouts and at shutdown. URLSession, the transport
    /// before this one, crashed (a cancel during its URL-cache lookup) or hung both threads (a
    /// cancel meeting the request's end) under exactly this loop; it stays as a guard.
    ///
    /// A hang takes one thread of Swift's shared pool for good, so the requests run in one loop
    /// (one hang at most) and the test waits for them without holding a thread of its own.
    @Test("Requests cancelled as soon as they start end in an error, never in a crash or a hang; the transport keeps working")
    func requestsCancelledAtOnce() async throws {
        let peer = try StandInPeer { _, _ in .init(body: "{}") }
        defer { peer.stop() }
        let transport = HTTPTransport(trust: .systemStore, timeout: 5)
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
                outcome.advance()
            }
            outcome.finish(cancelled: cancelled, answer: try? await transport.send(request))
        }
        // A hang is no progress at all; a total bound is not (480 s in all ran out in full runs on a slow
        // machine, while blocking tests still held the shared pool's two threads).
        let result = await outcome.wait(stallSeconds: 180)
        let (cancelled, answer) = try #require(result, "the cancelled requests made no progress for 180 s: a cancel hung")
        #expect(cancelled > 0, "no request was cancelled before it completed: the test did not exercise the race")
        #expect(answer?.status == 200 && answer?.body == Data("{}".utf8), "a request after the cancelled ones: \(String(describing: answer))")
    }

    /// URLSession ended the process on an answer cut inside its header block
    /// (swift-corelibs-foundation#5285); this transport must report it as a failed request.
    @Test("An answer cut inside its headers is an error of that request, and the next request works")
    func answerCutInsideItsHeaders() async throws {
        let peer = try StandInPeer { _, _ in .init(body: "{}") }
        defer { peer.stop() }
        let proxy = try FaultProxy(upstreamPort: peer.port, plan: .init(truncateHeaders: 1), seed: 7)
        defer { proxy.stop() }
        let transport = HTTPTransport(trust: .systemStore, timeout: 5)
        for _ in 0..<20 {
            let url = try #require(URL(string: proxy.url + "/v1/status"))
            do {
                let answer = try await transport.send(PeerRequest(method: "GET", url: url, headers: [], body: nil))
                Issue.record("a cut answer was taken as complete: \(answer.status) \(String(decoding: answer.body, as: UTF8.self))")
            } catch {
                guard case .unreachable = error else {
                    Issue.record("a cut answer should be 'unreachable', not \(error)")
                    continue
                }
            }
        }
        #expect(proxy.counts[.truncateHeaders, default: 0] == 20, "cuts applied: \(proxy.counts)")
        proxy.setPlan(.none)
        let url = try #require(URL(string: proxy.url + "/v1/status"))
        let answer = try await transport.send(PeerRequest(method: "GET", url: url, headers: [], body: nil))
        #expect(answer.status == 200 && answer.body == Data("{}".utf8))
    }
}

/// What the requests of ``HTTPTransportTests`` came to.
private final class Outcome: Sendable {
    private let value = Mutex<(cancelled: Int, answer: PeerResponse?)?>(nil)
    private let rounds = Atomic<Int>(0)
    private let done = DispatchSemaphore(value: 0)

    /// One more request ended.
    func advance() {
        rounds.add(1, ordering: .relaxed)
    }

    func finish(cancelled: Int, answer: PeerResponse?) {
        value.withLock { $0 = (cancelled, answer) }
        done.signal()
    }

    /// The outcome, or nil once no request ended for `stallSeconds`; waited for on a thread of its
    /// own, not on one of Swift's shared pool.
    func wait(stallSeconds: Double) async -> (cancelled: Int, answer: PeerResponse?)? {
        let arrived = await withCheckedContinuation { continuation in
            Thread {
                var seen = -1
                var lastProgress = DispatchTime.now()
                while self.done.wait(timeout: .now() + 5) == .timedOut {
                    let now = self.rounds.load(ordering: .relaxed)
                    if now != seen {
                        seen = now
                        lastProgress = DispatchTime.now()
                    } else if DispatchTime.now().uptimeNanoseconds - lastProgress.uptimeNanoseconds > UInt64(stallSeconds * 1e9) {
                        continuation.resume(returning: false)
                        return
                    }
                }
                continuation.resume(returning: true)
            }.start()
        }
        return arrived ? value.withLock { $0 } : nil
    }
}
