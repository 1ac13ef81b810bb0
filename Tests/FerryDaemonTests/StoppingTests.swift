import Foundation
import Testing
import FerryTestTraits
import FerryDaemon
import FerryTestSupport

/// A stop (SIGTERM) always ends the daemon in bounded time, whatever its
/// clients do: open requests get `Daemon.ShutdownBounds.graceful`, then they
/// are cancelled. Before the bound, a client that sent half a request and
/// waited kept a stopping daemon alive for as long as it held the connection.
@Suite("Stopping the daemon", .blocking, .serialized)
struct StoppingTests {
    @Test("Clients that never finish their requests cannot keep a stopping daemon alive")
    func stopWithHalfSentRequests() throws {
        let peer = try DaemonPeer(name: "stop", model: SampleModels.path("OrgChart"), pullInterval: 3600)
        try peer.start()
        // Three pushes that announce 100,000 bytes and send one.
        var connections: [RawConnection] = []
        for _ in 0..<3 {
            let connection = try RawConnection(port: peer.port)
            connection.send("POST /v1/changesets HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(peer.peerToken)\r\n"
                            + "Content-Type: application/x-ndjson\r\nContent-Length: 100000\r\n\r\n{")
            connections.append(connection)
        }
        defer { connections.forEach { $0.close() } }
        Thread.sleep(forTimeInterval: 0.5)

        let started = Date()
        let status = peer.stop()
        let seconds = Date().timeIntervalSince(started)
        let bound = Double((Daemon.ShutdownBounds.graceful + Daemon.ShutdownBounds.cancellation).components.seconds)
        #expect(status == 0, "\(peer.processState)\n\(peer.logExcerpt(characters: 2000))")
        #expect(seconds < bound + 5, "the daemon took \(seconds) s to stop (bound \(bound) s)")
        #expect(peer.log().contains("sync loop ended") && peer.log().contains("stopped"))
        print("stopping: the daemon ended \(String(format: "%.1f", seconds)) s after SIGTERM with 3 half-sent requests open")
    }

    @Test("Without open requests a stop is quick")
    func stopWhenIdle() throws {
        let (a, b) = try DaemonPeer.startedPair(model: SampleModels.path("OrgChart"))
        try a.put(#"[{"op":"insert","entity":"Person","ref":"p","values":{"id":1,"name":"Ann"}}]"#)
        #expect(try DaemonPeer.waitUntil(timeout: 20) { try a.dump() == b.dump() })
        let started = Date()
        #expect(a.stop() == 0 && b.stop() == 0)
        let seconds = Date().timeIntervalSince(started)
        #expect(seconds < Double(Daemon.ShutdownBounds.graceful.components.seconds),
                "two idle daemons took \(seconds) s to stop: the graceful bound was reached")
    }

    @Test("A peer's open push stream does not keep a stopping daemon: it ends the stream at once")
    func stopWithPushStreamOpen() throws {
        let (a, b) = try DaemonPeer.startedPair(model: SampleModels.path("OrgChart"))
        defer { _ = a.stop() }
        // A pushes the save on its stream to B, and keeps the stream open for its idle limit (10 s).
        try a.put(#"[{"op":"insert","entity":"Person","ref":"p","values":{"id":1,"name":"Ann"}}]"#)
        #expect(try DaemonPeer.waitUntil(timeout: 20) { try a.dump() == b.dump() })
        let started = Date()
        #expect(b.stop() == 0)
        let seconds = Date().timeIntervalSince(started)
        #expect(seconds < 5, "B took \(seconds) s to stop with A's push stream open (A closes it after 10 s idle)")
    }
}
