import Foundation
import Logging
import ServiceLifecycle
import FerryDaemon

/// The daemon of a ``DaemonPeer``'s configuration, run inside this process (`Daemon.assemble`)
/// instead of as a `ferry run` process: for tests and benchmarks that want the daemon and the
/// application in one process.
public final class InProcessDaemon: Sendable {
    private let group: ServiceGroup
    private let task: Task<Void, any Error>
    /// The port it listens on, once it does.
    public let port: Int

    /// Assembles and starts the daemon of `peer`'s configuration; returns once it listens.
    /// `logLevel`: what its log keeps (it goes to this process's standard error).
    public init(_ peer: DaemonPeer, logLevel: Logger.Level = .warning) async throws {
        let (ports, listening) = AsyncStream<Int>.makeStream()
        var logger = Logger(label: "in-process-\(peer.name)")
        logger.logLevel = logLevel
        let group = try await Daemon.assemble(try Configuration.load(path: peer.configuration), logger: logger) { port in
            listening.yield(port)
            listening.finish()
        }
        self.group = group
        task = Task { try await group.run() }
        guard let port = await ports.first(where: { _ in true }) else {
            throw DaemonPeerError(description: "\(peer.name)'s in-process daemon ended before it listened")
        }
        self.port = port
    }

    /// Stops the daemon gracefully and waits for it.
    public func stop() async throws {
        await group.triggerGracefulShutdown()
        try await task.value
    }
}
