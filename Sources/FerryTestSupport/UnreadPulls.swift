import Foundation

/// Clients that ask a server (a daemon or a relay) for its change sets from the start and never read
/// the answer past its head: what a slow or greedy puller costs the server in memory.
public enum UnreadPulls {
    /// What ``measure(port:token:count:residentMemory:)`` saw.
    public struct Measurement: Sendable {
        /// The whole answer's size, as read to its end once before (the warm-up).
        public var answerBytes: Int
        /// The server's resident memory after the warm-up, and with the unread pulls open.
        public var baseline: Int
        public var stalled: Int
        /// The first bytes of each unread answer (its status line and headers, and the start of its body).
        public var heads: [String]

        /// How much the server's resident memory grew with the unread pulls open.
        public var growth: Int { stalled - baseline }
    }

    /// Reads one whole answer of `GET /v1/changesets?after={}` (so that what serving it leaves behind
    /// counts in the baseline), then opens `count` more that read only their first 4 KB, and reads
    /// `residentMemory` before and two seconds after (the server has then written what it will until
    /// the callers read).
    public static func measure(port: Int, token: String, count: Int = 10, residentMemory: () -> Int?) throws -> Measurement {
        let request = "GET /v1/changesets?after=%7B%7D HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(token)\r\n"
        let warm = try RawConnection(port: port)
        warm.send(request + "Connection: close\r\n\r\n")
        let answerBytes = warm.readBytes(timeout: 60, limit: 64 << 20).count
        warm.close()
        Thread.sleep(forTimeInterval: 1)
        guard let baseline = residentMemory() else { throw DaemonPeerError(description: "the server's memory could not be read (not running?)") }

        var connections: [RawConnection] = []
        defer { connections.forEach { $0.close() } }
        for _ in 0..<count {
            let connection = try RawConnection(port: port)
            connection.shrinkReceiveBuffer()
            connection.send(request + "\r\n")
            connections.append(connection)
        }
        let heads = connections.map { $0.read(timeout: 10, limit: 4096) }
        Thread.sleep(forTimeInterval: 2)
        guard let stalled = residentMemory() else { throw DaemonPeerError(description: "the server's memory could not be read (ended?)") }
        return Measurement(answerBytes: answerBytes, baseline: baseline, stalled: stalled, heads: heads)
    }
}
