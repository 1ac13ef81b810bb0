import Foundation
import Testing
import FerryTestTraits
import FerryTestSupport
import Synchronization

/// Slow and greedy clients (issue 6, point 7): clients that send a body a byte
/// a second, or ask for a large pull and never read it, do not stop other
/// peers from syncing, and do not grow the daemon's memory without bound.
@Suite("Slow and greedy clients", .blocking, .serialized)
struct SlowClientTests {
    static let model = SampleModels.path("OrgChart")

    @Test("Five clients sending push bodies a byte a second do not hold up the peers' own syncing")
    func slowBodies() throws {
        let (a, b) = try DaemonPeer.startedPair(model: Self.model)
        let stop = Flag()
        var threads: [Thread] = []
        var connections: [RawConnection] = []
        for _ in 0..<5 {
            let connection = try RawConnection(port: b.port)
            connections.append(connection)
            connection.send("POST /v1/changesets HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(b.peerToken)\r\n"
                            + "Content-Type: application/x-ndjson\r\nContent-Length: 100000\r\n\r\n")
            let thread = Thread {
                while !stop.isSet, connection.send("{") { Thread.sleep(forTimeInterval: 1) }
            }
            thread.start()
            threads.append(thread)
        }
        defer { stop.set(); connections.forEach { $0.close() } }
        Thread.sleep(forTimeInterval: 1)

        for round in 0..<3 {
            let started = Date()
            try a.put(DaemonPeer.people("r\(round)-", 0..<50))
            let synced = try DaemonPeer.waitUntil(timeout: 10) { try a.dump() == b.dump() }
            #expect(synced, "round \(round): B did not take A's save while slow clients were connected (B \(b.isRunning ? "running" : "stopped"))")
            print("slow bodies: round \(round) reached B in \(String(format: "%.2f", Date().timeIntervalSince(started))) s (including the put)")
        }
        let health = try FerryProcess.run(executable: "/usr/bin/curl", ["-sS", "-m", "2", b.url + "/healthz"])
        #expect(health.standardOutput.contains("ok"), "healthz: \(health.standardError)")
        #expect(b.isRunning, "B stopped; the end of its log:\n\(b.logExcerpt(characters: 4000))")
        // None of the slow bodies applied anything: B holds exactly A's three change sets.
        #expect(try b.changeSetLog().entries.count == 3)
    }

    @Test("Twenty clients that ask for a full-size pull and never read it: memory stays bounded, peers keep syncing")
    func greedyPulls() throws {
        let started = Date()
        let (a, b) = try DaemonPeer.startedPair(model: Self.model)
        // About 20,000 objects of history on B (≈ 4.5 MB of change sets).
        for save in 0..<10 { try b.put(DaemonPeer.people("h\(save)-", 0..<2000)) }
        #expect(try DaemonPeer.waitUntil(timeout: 60) { try a.dump() == b.dump() })
        print("greedy pulls: 20,000 objects written on B and replicated to A in \(String(format: "%.1f", Date().timeIntervalSince(started))) s")
        // Warm up: one full pull read to the end, so caches and buffers count in the baseline.
        let warm = try RawConnection(port: b.port)
        warm.send("GET /v1/changesets?after=%7B%7D HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(b.peerToken)\r\nConnection: close\r\n\r\n")
        let warmAnswer = warm.read(timeout: 20, limit: 64 << 20)
        #expect(warmAnswer.hasPrefix("HTTP/1.1 200") && warmAnswer.utf8.count > 1 << 20, "warm-up pull: \(warmAnswer.prefix(200))")
        Thread.sleep(forTimeInterval: 1)
        let baseline = try #require(b.residentMemory)

        var greedy: [RawConnection] = []
        for _ in 0..<20 {
            let connection = try RawConnection(port: b.port)
            connection.shrinkReceiveBuffer()
            connection.send("GET /v1/changesets?after=%7B%7D HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(b.peerToken)\r\n\r\n")
            greedy.append(connection)
        }
        defer { greedy.forEach { $0.close() } }
        Thread.sleep(forTimeInterval: 3)
        let stalled = try #require(b.residentMemory)

        // Meanwhile the peers keep syncing both ways.
        try a.put(DaemonPeer.people("a-", 0..<20))
        try b.put(DaemonPeer.people("b-", 0..<20))
        let synced = try DaemonPeer.waitUntil(timeout: 15) { try a.dump() == b.dump() }
        #expect(synced, "the peers stopped syncing while greedy clients held pulls open")
        // The unread answers were real: each began with a 200 and change sets.
        let peek = greedy[0].read(timeout: 2, limit: 32_768)
        #expect(peek.hasPrefix("HTTP/1.1 200") && peek.contains(#""changes""#), "a greedy pull was not answered: \(peek.prefix(200))")
        let growth = stalled - baseline
        // Without backpressure each stalled answer would sit in memory whole (20 answers the size of
        // the warm-up's); bounded means well under half of that.
        #expect(growth < 20 * warmAnswer.utf8.count / 2, "memory grew by \(growth >> 10) KiB with 20 unread pulls of \(warmAnswer.utf8.count >> 10) KiB")
        print("greedy pulls: resident memory \(baseline >> 20) MiB before, " +
              "\(stalled >> 20) MiB with 20 unread pulls of \(warmAnswer.utf8.count >> 10) KiB (+\(growth >> 10) KiB)")
        let stopping = Date()
        #expect(a.stop() == 0 && b.stop() == 0)
        print("greedy pulls: both daemons stopped \(String(format: "%.1f", Date().timeIntervalSince(stopping))) s after SIGTERM with the 20 pulls still unread")
    }
}

/// A flag one thread sets and others read.
final class Flag: Sendable {
    private let value = Mutex(false)
    var isSet: Bool { value.withLock { $0 } }
    func set() { value.withLock { $0 = true } }
}
