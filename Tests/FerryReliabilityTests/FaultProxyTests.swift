import Foundation
import Synchronization
import Testing
import FerryTestTraits
@testable import FerryTestSupport

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

        let client = try Self.connect(port: proxy.port)
        defer { close(client) }
        let request = Array("GET /v1/status HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n".utf8)
        #expect(send(client, request, request.count, Int32(MSG_NOSIGNAL)) == request.count)
        #expect(accepted.wait(timeout: .now() + 10) == .success, "the proxy did not accept the connection")
        proxy.setPartitioned(true)
        cut.signal()

        // The connection ends with nothing from upstream; upstream never saw the request.
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = read(client, &buffer, buffer.count)
        #expect(count <= 0, "an answer came across the cut link: \(String(decoding: buffer.prefix(max(count, 0)), as: UTF8.self))")
        #expect(count == 0 || errno == ECONNRESET, "the connection was not ended (read: \(count), errno \(errno))")
        Thread.sleep(forTimeInterval: 0.2)
        #expect(requests.load(ordering: .relaxed) == 0, "the upstream peer got the request across the cut link")

        // Healed, the link carries requests again.
        proxy.setPartitioned(false)
        let again = try Self.connect(port: proxy.port)
        defer { close(again) }
        cut.signal()  // (the hook waits for it once per connection)
        #expect(send(again, request, request.count, Int32(MSG_NOSIGNAL)) == request.count)
        setsockopt(again, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let answered = read(again, &buffer, buffer.count)
        #expect(answered > 0 && String(decoding: buffer.prefix(max(answered, 0)), as: UTF8.self).hasPrefix("HTTP/1.1 200"))
        #expect(requests.load(ordering: .relaxed) == 1)
    }

    /// A blocking TCP connection to 127.0.0.1:`port`.
    static func connect(port: Int) throws -> Int32 {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        try #require(descriptor >= 0)
        var address = LoopbackSocket.address(port: port)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        try #require(connected == 0, "cannot connect to the proxy: errno \(errno)")
        return descriptor
    }
}
