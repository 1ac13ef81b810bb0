import Foundation
import Testing
import FerryTestTraits
import FerryTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// `ferry run` under a fake systemd: a datagram socket named by NOTIFY_SOCKET.
@Suite("systemd notification", .blocking)
struct SystemdNotifyTests {
    /// A bound AF_UNIX datagram socket that collects what the daemon sends.
    final class NotifySocket: @unchecked Sendable {  // (used by one thread at a time)
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

        /// Messages received until `stop` says so or `seconds` pass, with when each came.
        func receiveTimed(seconds: Double, until stop: () -> Bool = { false }) -> [(message: String, at: Date)] {
            var messages: [(String, Date)] = []
            let deadline = Date().addingTimeInterval(seconds)
            var buffer = [UInt8](repeating: 0, count: 4096)
            while Date() < deadline, !stop() {
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
        // Pings are due every 200 ms (half of WATCHDOG_USEC); three must come, however slow the machine.
        var pings = 0
        _ = socket.receive(until: { message in
            if message == "WATCHDOG=1" { pings += 1 }
            return pings >= 3
        }, seconds: 20)
        #expect(pings >= 3, "only \(pings) watchdog pings in 20 s")
        #expect(peer.stop() == 0)
        let last = socket.receive(until: { $0 == "STOPPING=1" }, seconds: 2)
        #expect(last.contains("STOPPING=1"), "\(last)")
    }

    @Test("The watchdog keeps being pinged while a long catch-up runs")
    func watchdogDuringCatchUp() throws {
        let a = try DaemonPeer(name: "a", model: ReplicationTests.model, pullInterval: 3600)
        let b = try DaemonPeer(name: "b", model: ReplicationTests.model, pullInterval: 3600)
        // B reaches A through a proxy that holds back every chunk up to 0.6 s, so B's first
        // round (one pull of the whole history) surely takes seconds, whatever the machine.
        let slow = try FaultProxy(upstreamPort: a.port, plan: .init(delay: 1, maxDelay: 0.6), seed: 3)
        defer { slow.stop() }
        try b.connect(to: a, via: slow.url)
        try a.start()
        for batch in 0..<10 {
            let operations = (0..<500).map { ReplicationTests.person("p\(batch)_\($0)", batch * 500 + $0, "P\($0)") }
            try a.put("[" + operations.joined(separator: ",") + "]")
        }
        let socket = try NotifySocket(path: b.directory.file("notify.sock"))
        // The pings are collected on a thread of their own while this one watches B's catch-up.
        let collected = Collected()
        let listener = Thread {
            collected.set(socket.receiveTimed(seconds: 60, until: { collected.isFinished }))
        }
        listener.start()
        try b.start(environment: ["NOTIFY_SOCKET": socket.path, "WATCHDOG_USEC": "400000"])
        // The catch-up's window: from READY (the sync loop starts its first round, a pull of the
        // whole history, at once) until B holds all 10 change sets.
        var caughtUpAt: Date?
        let deadline = Date().addingTimeInterval(60)
        while caughtUpAt == nil, Date() < deadline {
            if (try? b.changeSetLog().entries.count) == 10 { caughtUpAt = Date() }
            Thread.sleep(forTimeInterval: 0.02)
        }
        collected.finish()
        let received = collected.wait()
        let messages = received.filter { $0.message == "WATCHDOG=1" }.map(\.at)
        let start = try #require(received.first { $0.message.hasPrefix("READY=1") }?.at, "B never said READY")
        let end = try #require(caughtUpAt, "B did not catch up within 60 s")
        #expect(try b.dump().split(separator: "\n").count == 5_000)
        let window = end.timeIntervalSince(start)
        let during = messages.filter { $0 > start && $0 < end }.count
        // Due every 200 ms: at least one per 800 ms of catch-up (a quarter of the rate, for a loaded
        // machine); a watchdog that pinged only between rounds would send none until the round ends.
        let expected = max(1, Int(window / 0.8))
        // (A catch-up too short to hold several pings would prove nothing: then the history must grow.)
        try #require(window >= 1, "the catch-up took only \(window) s: too short to judge the pings during it")
        #expect(during >= expected,
                "\(during) pings during a catch-up of \(String(format: "%.2f", window)) s (expected at least \(expected)); \(messages.count) in all")
    }
}

/// Watchdog messages collected on another thread, handed over once.
private final class Collected: @unchecked Sendable {
    private let lock = NSLock()
    private var messages: [(message: String, at: Date)] = []
    private var finished = false
    private let done = DispatchSemaphore(value: 0)

    var isFinished: Bool { lock.withLock { finished } }
    func finish() { lock.withLock { finished = true } }
    func set(_ received: [(message: String, at: Date)]) {
        lock.withLock { messages = received }
        done.signal()
    }
    func wait() -> [(message: String, at: Date)] {
        done.wait()
        return lock.withLock { messages }
    }
}

