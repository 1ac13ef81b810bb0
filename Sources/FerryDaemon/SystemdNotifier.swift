import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Tells systemd how the service is doing (`sd_notify`): READY once serving,
/// STOPPING on shutdown, WATCHDOG while healthy. Without `NOTIFY_SOCKET` (not
/// started by systemd with `Type=notify`) it does nothing.
public struct SystemdNotifier: Sendable {
    private let socketPath: String?
    /// How often systemd wants a WATCHDOG ping (half of `WATCHDOG_USEC`), if it asks for them.
    public let watchdogInterval: Duration?

    /// A notifier configured from the environment systemd sets.
    public init(environment: [String: String] = ProcessInfo.processInfo.environment) {
        socketPath = environment["NOTIFY_SOCKET"].flatMap { $0.isEmpty ? nil : $0 }
        let pidMatches = environment["WATCHDOG_PID"].map { Int32($0) == getpid() } ?? true
        if pidMatches, let text = environment["WATCHDOG_USEC"], let microseconds = Int64(text), microseconds > 0 {
            watchdogInterval = .microseconds(microseconds / 2)
        } else {
            watchdogInterval = nil
        }
    }

    /// Sends `READY=1`.
    public func ready(status: String) { send("READY=1\nSTATUS=\(status)") }
    /// Sends `STATUS=…`: what `systemctl status` shows.
    public func status(_ text: String) { send("STATUS=\(text)") }
    /// Sends `STOPPING=1`.
    public func stopping() { send("STOPPING=1") }
    /// Sends `WATCHDOG=1`.
    public func watchdog() { send("WATCHDOG=1") }

    /// Sends one datagram to the notification socket; failures are ignored, as `sd_notify` does.
    func send(_ message: String) {
        guard let socketPath else { return }
        let descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { return }
        defer { close(descriptor) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        // A leading '@' names an abstract socket: its first byte is NUL.
        var path = Array(socketPath.utf8)
        if path.first == UInt8(ascii: "@") { path[0] = 0 }
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard path.count < capacity else { return }
        withUnsafeMutableBytes(of: &address.sun_path) { buffer in
            for (index, byte) in path.enumerated() { buffer[index] = byte }
        }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + path.count)
        let bytes = Array(message.utf8)
        _ = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketAddress in
                sendto(descriptor, bytes, bytes.count, Int32(MSG_NOSIGNAL), socketAddress, length)
            }
        }
    }
}
