import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// TCP sockets on 127.0.0.1 for the harness's own servers and for finding free ports.
enum LoopbackSocket {
    /// A new TCP socket bound to `port` of 127.0.0.1 (0: one the kernel picks), listening with
    /// `backlog` when given (nil: bound only, to learn a free port). The caller closes it.
    /// - Parameter reuseAddress: sets `SO_REUSEADDR` first (a proxy restarted on a port
    ///   in TIME_WAIT).
    static func bound(port: Int = 0, listening backlog: Int32?, reuseAddress: Bool = false) throws -> (descriptor: Int32, port: Int) {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw DaemonPeerError(description: "socket() failed") }
        if reuseAddress {
            var yes: Int32 = 1
            setsockopt(descriptor, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        }
        var address = address(port: port)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, backlog.map({ listen(descriptor, $0) == 0 }) ?? true else {
            close(descriptor)
            throw DaemonPeerError(description: "cannot \(backlog == nil ? "bind" : "listen") on 127.0.0.1:\(port)")
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        return (descriptor, Int(UInt16(bigEndian: address.sin_port)))
    }

    /// A port of 127.0.0.1 that nothing listens on now, for a daemon to bind later, and that this
    /// process has not handed out before.
    ///
    /// Taken below the kernel's ephemeral range (`ip_local_port_range`), where it
    /// hands out ports to `bind(0)` and to outgoing connections: a port found free
    /// there could be taken by any client connection of a parallel test before the
    /// daemon binds it ("Address already in use", seen once in a full run).
    ///
    /// A port is free here only until its daemon binds it, so two peers made before either
    /// starts could draw the same one: twenty-odd draws from some 22,000 ports meet about once
    /// in a hundred fleets (the likeliest reading of a fleet test that failed with "Address already
    /// in use" beside two spinning processes). Every port handed out is remembered and never
    /// handed out again.
    static func freePortForLater() throws -> Int {
        for _ in 0..<200 {
            guard let (descriptor, port) = try? bound(port: Int.random(in: portsBelowEphemeral), listening: nil) else { continue }
            close(descriptor)
            if handedOut.withLock({ $0.insert(port).inserted }) { return port }
        }
        // (A crowded range: fall back to ones the kernel picks, still never the same twice.)
        for _ in 0..<200 {
            let (descriptor, port) = try bound(listening: nil)
            close(descriptor)
            if handedOut.withLock({ $0.insert(port).inserted }) { return port }
        }
        throw DaemonPeerError(description: "no free port of 127.0.0.1 left that this process has not handed out already")
    }

    /// The ports ``freePortForLater()`` has handed out in this process.
    private static let handedOut = Mutex<Set<Int>>([])

    /// The ports ``freePortForLater()`` draws from: from 10,000 up to the kernel's ephemeral
    /// range (read once per process; 32768 when it cannot be read).
    private static let portsBelowEphemeral: Range<Int> = {
        let range = (try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8))?
            .split(whereSeparator: \.isWhitespace).compactMap { Int($0) } ?? []
        let ephemeralStart = range.first ?? 32768
        return 10_000..<max(10_001, min(ephemeralStart, 65_536))
    }()

    /// The address of `port` on 127.0.0.1.
    static func address(port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return address
    }
}
