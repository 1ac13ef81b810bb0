import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A minimal HTTP/1.1 server on 127.0.0.1 that answers each request as a test
/// says (by method and request target), one request per connection.
///
/// It serves on threads of its own, not on Swift concurrency's shared pool: a
/// parallel test run keeps that pool's threads busy with synchronous tests for
/// long stretches, and a server on it (Hummingbird in the test process) then
/// answered too late for the client's timeout.
public final class StandInPeer: Sendable {
    /// What the stand-in answers to one request.
    public struct Answer: Sendable {
        public var status: Int
        public var contentType: String
        public var body: String

        public init(status: Int = 200, contentType: String = "application/json", body: String) {
            self.status = status
            self.contentType = contentType
            self.body = body
        }
    }

    /// The port it listens on.
    public let port: Int
    private let listener: Int32
    private let running = Mutex(true)
    private let answer: @Sendable (_ method: String, _ target: String, _ body: String) -> Answer

    /// Starts listening on a free port of 127.0.0.1; `answer` gets each request's
    /// method and target (path and query, as sent).
    public convenience init(answer: @escaping @Sendable (_ method: String, _ target: String) -> Answer) throws {
        try self.init(answeringWithBody: { method, target, _ in answer(method, target) })
    }

    /// Starts listening on a free port of 127.0.0.1; `answer` gets each request's
    /// method, target (path and query, as sent) and body (as its Content-Length says).
    public init(answeringWithBody answer: @escaping @Sendable (_ method: String, _ target: String, _ body: String) -> Answer) throws {
        self.answer = answer
        (listener, port) = try LoopbackSocket.bound(listening: 16)
        Thread { [self] in acceptLoop() }.start()
    }

    /// Its base URL.
    public var url: String { "http://127.0.0.1:\(port)/" }

    /// Stops listening (once).
    public func stop() {
        let wasRunning = running.withLock { running in
            defer { running = false }
            return running
        }
        guard wasRunning else { return }
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }

    deinit { stop() }

    private func acceptLoop() {
        while running.withLock({ $0 }) {
            let client = accept(listener, nil, nil)
            if client < 0 {
                if errno == EINTR { continue }
                return
            }
            Thread { [self] in serve(client) }.start()
        }
    }

    /// Reads one request (head and body), answers, closes.
    private func serve(_ client: Int32) {
        defer { close(client) }
        var head: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while !Self.holdsHeadEnd(head) {
            guard head.count < 1 << 16 else { return }
            let count = recv(client, &buffer, buffer.count, 0)
            guard count > 0 else { return }
            head += buffer[0..<count]
        }
        let requestLine = String(decoding: head.prefix { $0 != UInt8(ascii: "\r") }, as: UTF8.self).split(separator: " ")
        guard requestLine.count >= 2 else { return }
        // The body: what came after the head, and the rest of what Content-Length announces.
        guard let parsed = HTTPHead(in: head[...]) else { return }
        let length = parsed.contentLength ?? 0
        var body = Array(head[parsed.end...])
        while body.count < length {
            let count = recv(client, &buffer, buffer.count, 0)
            guard count > 0 else { return }
            body += buffer[0..<count]
        }
        let reply = answer(String(requestLine[0]), String(requestLine[1]), String(decoding: body, as: UTF8.self))
        let replyBody = Array(reply.body.utf8)
        let text = "HTTP/1.1 \(reply.status) Stand-in\r\nContent-Type: \(reply.contentType)\r\nContent-Length: \(replyBody.count)\r\nConnection: close\r\n\r\n"
        let bytes = Array(text.utf8) + replyBody
        var offset = 0
        while offset < bytes.count {
            // MSG_NOSIGNAL: a client that went away must not end the test process with SIGPIPE.
            let written = bytes[offset...].withUnsafeBytes { send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if written <= 0 { return }
            offset += written
        }
    }

    /// Whether `bytes` hold the blank line that ends a request's head.
    private static func holdsHeadEnd(_ bytes: [UInt8]) -> Bool {
        bytes.count >= 4 && (0...(bytes.count - 4)).contains { bytes[$0..<($0 + 4)].elementsEqual([13, 10, 13, 10]) }
    }
}
