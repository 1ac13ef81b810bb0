import Foundation
import Testing
import FerryTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// `ferry run` under a fake systemd: a datagram socket named by NOTIFY_SOCKET.
@Suite("systemd notification")
struct SystemdNotifyTests {
    /// A bound AF_UNIX datagram socket that collects what the daemon sends.
    final class NotifySocket {
        let path: String
        let descriptor: Int32

        init(path: String) throws {
            self.path = path
            descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
            var address = sockaddr_un()
            address.sun_family = sa_family_t(AF_UNIX)
            let bytes = Array(path.utf8)
            withUnsafeMutableBytes(of: &address.sun_path) { buffer in for (index, byte) in bytes.enumerated() { buffer[index] = byte } }
            let bound = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
            }
            guard descriptor >= 0, bound == 0 else { throw DaemonPeerError(description: "cannot bind \(path)") }
            var timeout = timeval(tv_sec: 0, tv_usec: 200_000)
            setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        }

        /// Messages received until `predicate` holds for one of them or `seconds` pass, with when each came.
        func receiveTimed(seconds: Double) -> [(message: String, at: Date)] {
            var messages: [(String, Date)] = []
            let deadline = Date().addingTimeInterval(seconds)
            var buffer = [UInt8](repeating: 0, count: 4096)
            while Date() < deadline {
                let count = recv(descriptor, &buffer, buffer.count, 0)
                guard count > 0 else { continue }
                messages.append((String(decoding: buffer[0..<count], as: UTF8.self), Date()))
            }
            return messages
        }

        /// Messages received until `predicate` holds for one of them or `seconds` pass.
        func receive(until predicate: (String) -> Bool, seconds: Double = 10) -> [String] {
            var messages: [String] = []
            let deadline = Date().addingTimeInterval(seconds)
            var buffer = [UInt8](repeating: 0, count: 4096)
            while Date() < deadline {
                let count = recv(descriptor, &buffer, buffer.count, 0)
                guard count > 0 else { continue }
                let message = String(decoding: buffer[0..<count], as: UTF8.self)
                messages.append(message)
                if predicate(message) { break }
            }
            return messages
        }

        deinit { close(descriptor) }
    }

    @Test("READY once serving, WATCHDOG while running when asked, STOPPING on SIGTERM")
    func notifications() throws {
        let peer = try DaemonPeer(name: "notified", model: ReplicationTests.model, pullInterval: 3600)
        let socket = try NotifySocket(path: peer.directory.file("notify.sock"))
        try peer.start(environment: ["NOTIFY_SOCKET": socket.path, "WATCHDOG_USEC": "400000"])
        let first = socket.receive(until: { $0.contains("READY=1") })
        #expect(first.contains { $0.hasPrefix("READY=1\nSTATUS=serving on port \(peer.port)") }, "\(first)")
        let pings = socket.receive(until: { _ in false }, seconds: 1.2).filter { $0 == "WATCHDOG=1" }
        #expect(pings.count >= 3, "a ping every 200 ms (half of WATCHDOG_USEC): \(pings.count) in 1.2 s")
        #expect(peer.stop() == 0)
        let last = socket.receive(until: { $0 == "STOPPING=1" }, seconds: 2)
        #expect(last.contains("STOPPING=1"), "\(last)")
    }

    @Test("The watchdog keeps being pinged while a long catch-up runs")
    func watchdogDuringCatchUp() throws {
        let a = try DaemonPeer(name: "a", model: ReplicationTests.model, pullInterval: 3600)
        let b = try DaemonPeer(name: "b", model: ReplicationTests.model, pullInterval: 3600)
        try b.connect(to: a)
        try a.start()
        // Enough history that B's first pull takes seconds.
        for batch in 0..<30 {
            let operations = (0..<500).map { ReplicationTests.person("p\(batch)_\($0)", batch * 500 + $0, "P\($0)") }
            try a.put("[" + operations.joined(separator: ",") + "]")
        }
        let socket = try NotifySocket(path: b.directory.file("notify.sock"))
        try b.start(environment: ["NOTIFY_SOCKET": socket.path, "WATCHDOG_USEC": "400000"])
        let started = Date()
        let messages = socket.receiveTimed(seconds: 4).filter { $0.message == "WATCHDOG=1" }.map(\.at)
        let caughtUp = try DaemonPeer.waitUntil(timeout: 60) { try b.dump().split(separator: "\n").count == 15_000 }
        #expect(caughtUp)
        let pings = [started] + messages
        let longestGap = zip(pings, pings.dropFirst()).map { $1.timeIntervalSince($0) }.max() ?? 99
        // Pings are due every 200 ms; the catch-up itself takes over a second (a ping only between rounds left gaps of that length).
        #expect(messages.count >= 10 && longestGap < 0.6, "\(messages.count) pings, longest gap \(longestGap) s")
    }
}
