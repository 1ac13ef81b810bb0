import Foundation
import Synchronization
import Testing
import FerryTestTraits
import FerryTestSupport

/// The fault proxy itself: a partition must cut every connection, including one it is still
/// setting up, or a partition test's daemons talk through the cut.
@Suite("Test harness: the fault proxy's partitions", .blocking)
struct FaultProxyTests {
    @Test("A connection accepted just before the link is cut carries nothing across it")
    func partitionCutsAConnectionBeingSetUp() throws {
        let requests = Atomic<Int>(0)
        let peer = try StandInPeer { _, _ in
            requests.add(1, ordering: .relaxed)
            return .init(body: "{}")
        }
        defer { peer.stop() }
        // The proxy's thread for the connection waits here until the link has been cut.
        let accepted = DispatchSemaphore(value: 0)
        let cut = DispatchSemaphore(value: 0)
        let proxy = try FaultProxy(upstreamPort: peer.port, seed: 1, beforeServing: {
            accepted.signal()
            cut.wait()
        })
        defer { proxy.stop() }

        let client = try RawConnection(port: proxy.port)
        let request = "GET /v1/status HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n"
        #expect(client.send(request))
        #expect(accepted.wait(timeout: .now() + 10) == .success, "the proxy did not accept the connection")
        proxy.setPartitioned(true)
        cut.signal()

        // The connection ends with nothing from upstream; upstream never saw the request.
        let reading = ContinuousClock.now
        let answer = client.read(timeout: 10)
        #expect(answer.isEmpty, "an answer came across the cut link: \(answer)")
        #expect(ContinuousClock.now - reading < .seconds(5), "the connection was not ended")
        Thread.sleep(forTimeInterval: 0.2)
        #expect(requests.load(ordering: .relaxed) == 0, "the upstream peer got the request across the cut link")

        // Healed, the link carries requests again.
        proxy.setPartitioned(false)
        let again = try RawConnection(port: proxy.port)
        cut.signal()  // (the hook waits for it once per connection)
        #expect(again.send(request))
        #expect(again.read(timeout: 10).hasPrefix("HTTP/1.1 200"))
        #expect(requests.load(ordering: .relaxed) == 1)
    }
}
