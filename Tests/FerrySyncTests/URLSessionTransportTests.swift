import Foundation
import Testing
import FerryTestSupport
@testable import FerrySync

/// The transport of peers without a `ca_file`: URLSession over libcurl.
@Suite("URLSession transport")
struct URLSessionTransportTests {
    /// On this toolchain a URLSession with a URL cache (as `.ephemeral` has) looks each data
    /// task's request up in the cache on a background queue before the task can run, and a
    /// cancel landing in that window queues a failure callback that may run after the task
    /// has finished and left the session's registry: the process ends with "Trying to access a
    /// behaviour for a task that in not in the registry" (seen in a daemon under the network-fault
    /// test). A sync round cancels its requests on timeouts and at shutdown, so this must not crash.
    @Test("Requests cancelled as soon as they start end in an error, never in a crash; the transport keeps working")
    func requestsCancelledAtOnce() async throws {
        let peer = try StandInPeer { _, _ in .init(body: "{}") }
        defer { peer.stop() }
        let transport = URLSessionTransport(timeout: 5)
        let url = try #require(URL(string: peer.url + "v1/status"))
        let request = PeerRequest(method: "GET", url: url, headers: [], body: nil)
        var cancelled = 0
        for _ in 0..<2_000 {
            let task = Task { try await transport.send(request) }
            task.cancel()
            if case .failure = await task.result { cancelled += 1 }
        }
        #expect(cancelled > 0, "no request was cancelled before it completed: the test did not exercise the race")
        let answer = try await transport.send(request)
        #expect(answer.status == 200 && answer.body == Data("{}".utf8))
    }
}
