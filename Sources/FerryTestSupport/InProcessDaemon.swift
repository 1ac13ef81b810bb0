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
    /// - Throws: ``DaemonPeerError`` when the daemon ends before it listens, or has not listened
    ///   within ``DaemonPeer/startTimeout`` seconds (it is then cancelled, and not waited for),
    ///   as for a `ferry run` process.
    public init(_ peer: DaemonPeer, logLevel: Logger.Level = .warning) async throws {
        let (ports, listening) = AsyncStream<Int>.makeStream()
        var logger = Logger(label: "in-process-\(peer.name)")
        logger.logLevel = logLevel
        let group = try await Daemon.assemble(try Configuration.load(path: peer.configuration), logger: logger) { port in
            listening.yield(port)
            listening.finish()
        }
        self.group = group
        let task = Task {
            // A daemon that ends before it listens (its port taken, say) ends the wait for its port too.
            defer { listening.finish() }
            try await group.run()
        }
        self.task = task
        // The wait has a deadline, as every wait of the harness does (``BoundedWaiting``): a start that
        // never ends nor listens fails the test instead of hanging the run.
        let waitingForPort = Task { await ports.first(where: { _ in true }) }
        let listened = await withTaskCancellationHandler {
            await BoundedWaiting.result(of: waitingForPort, within: .seconds(DaemonPeer.startTimeout))
        } onCancel: {
            waitingForPort.cancel()
        }
        guard let listened else {
            waitingForPort.cancel()
            task.cancel()
            throw DaemonPeerError(description: "\(peer.name)'s in-process daemon did not listen within \(Int(DaemonPeer.startTimeout)) s (cancelled)")
        }
        guard case .success(let port?) = listened else {
            // (Or this wait was cancelled while the daemon was still starting: it stops too.)
            task.cancel()
            let why = switch await task.result {
            case .success: "without an error"
            case .failure(let error): "with: \(error)"
            }
            throw DaemonPeerError(description: "\(peer.name)'s in-process daemon ended before it listened, \(why)")
        }
        self.port = port
    }

    /// Stops the daemon gracefully and waits for it, at most ``DaemonPeer/stopTimeout`` seconds
    /// (the daemon's own bounds on a graceful stop and a margin, as for a `ferry run` process).
    /// - Throws: the daemon's error, or ``DaemonPeerError`` when it has not ended by then: a task
    ///   of the daemon that does not end when cancelled. The test then fails with that, rather
    ///   than the run hanging (as one full run did; docs/RELIABILITY.md, "Findings, in short").
    public func stop(timeout: TimeInterval = DaemonPeer.stopTimeout) async throws {
        await group.triggerGracefulShutdown()
        guard let ended = await BoundedWaiting.result(of: task, within: .seconds(timeout)) else {
            throw DaemonPeerError(description: "the in-process daemon did not end within \(Int(timeout)) s of a graceful stop: " +
                                  "one of its tasks does not end when cancelled")
        }
        try ended.get()
    }
}
