import Foundation
import Synchronization

/// A plain TCP connection to 127.0.0.1, for tests that must misbehave below
/// HTTP: send a request a byte at a time, or ask for a response and never read it.
public final class RawConnection: Sendable {
    /// The socket (closed by ``close()`` or on deallocation).
    private let descriptor: Int32
    private let isClosed = Mutex(false)

    /// Connects to `port` on 127.0.0.1.
    public init(port: Int) throws {
        descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw DaemonPeerError(description: "socket() failed") }
        var address = LoopbackSocket.address(port: port)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            Glibc.close(descriptor)
            throw DaemonPeerError(description: "cannot connect to 127.0.0.1:\(port)")
        }
    }

    /// Sends `text`; false when the other side has closed the connection.
    @discardableResult
    public func send(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        // Under the lock, so a ``close()`` from another thread cannot free the descriptor mid-send.
        return isClosed.withLock { closed in
            guard !closed else { return false }
            var offset = 0
            while offset < bytes.count {
                let written = bytes[offset...].withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                if written <= 0 { return false }
                offset += written
            }
            return true
        }
    }

    /// Shrinks the receive buffer, so a response that is not read stops the sender early.
    public func shrinkReceiveBuffer(to bytes: Int32 = 4096) {
        var size = bytes
        setsockopt(descriptor, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
    }

    /// Reads what arrives within `timeout` seconds (up to `limit` bytes), or until the other side closes.
    public func read(timeout: TimeInterval, limit: Int = 1 << 20) -> String {
        String(decoding: readBytes(timeout: timeout, limit: limit), as: UTF8.self)
    }

    /// ``read(timeout:limit:)``'s bytes as they came (a gzip body is not text).
    public func readBytes(timeout: TimeInterval, limit: Int = 1 << 20) -> [UInt8] {
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        let deadline = Date().addingTimeInterval(timeout)
        while received.count < limit {
            let remaining = deadline.timeIntervalSinceNow
            if remaining <= 0 { break }
            var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, Int32(remaining * 1000)) > 0 else { break }
            let count = recv(descriptor, &buffer, buffer.count, 0)
            if count <= 0 { break }
            received += buffer[0..<min(count, limit - received.count)]
        }
        return received
    }

    /// Closes the connection.
    public func close() {
        let wasClosed = isClosed.withLock { closed in
            defer { closed = true }
            return closed
        }
        if !wasClosed { Glibc.close(descriptor) }
    }

    deinit { close() }
}
