import Foundation

/// A relay for fleet tests: a real `ferry relay` process on 127.0.0.1 over a database of a
/// ``PostgresCluster``, with its own folder (configuration, tokens, log); started, stopped
/// (SIGTERM), killed (SIGKILL) and started again on the same port.
public final class RelayProcess: @unchecked Sendable {
    /// A name for failure messages.
    public let name: String
    /// The folder with the configuration, tokens and log.
    public let directory: TemporaryDirectory
    /// The token peers present (role `peer`: pull and push).
    public let peerToken: String
    /// An admin token (status with the database's address).
    public let adminToken: String
    /// The port (fixed after the first start).
    public private(set) var port: Int
    private var process: Process?

    /// The base URL (https when the relay has a certificate).
    public var url: String { "\(tls ? "https" : "http")://127.0.0.1:\(port)" }
    private let tls: Bool
    /// The configuration file.
    public var configuration: String { directory.file("relay.yaml") }

    /// A relay over database `database` of `cluster`, trusting the keys of `pinned` (origin and
    /// public key, as `ferry state` prints them); `unknownOrigins` is `trust.unknown_origins`.
    /// `retention` is written as the `retention` section (e.g. `["keep": "0", "interval": "1"]`).
    /// `sharingTokensWith`: another relay of the fleet whose tokens this one takes (peers present one
    /// token to every relay they list).
    public init(name: String, cluster: PostgresCluster, database: String, pinned: [(origin: String, key: String)] = [],
                unknownOrigins: String = "refuse", retention: [String: String] = [:], sharingTokensWith other: RelayProcess? = nil,
                maxConcurrentBodies: Int = 8, maxBodyBytes: Int? = nil, maxChangeSetBytes: Int? = nil,
                certificate: (certificate: String, key: String)? = nil) throws {
        tls = certificate != nil
        self.name = name
        directory = TemporaryDirectory(prefix: "ferry-relay-\(name)")
        peerToken = other?.peerToken ?? "peer-\(name)-" + UUID().uuidString
        adminToken = other?.adminToken ?? "admin-\(name)-" + UUID().uuidString
        port = try DaemonPeer.freePort()
        try "peer \(peerToken)\nadmin \(adminToken)\n".write(toFile: directory.file("tokens"), atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: directory.file("tokens"))
        var text = """
            database:
              host: 127.0.0.1
              port: \(cluster.port)
              user: ferry
              name: \(database)
              tls: disable
            server:
              host: 127.0.0.1
              port: \(port)
              tokens_file: tokens
              max_concurrent_bodies: \(maxConcurrentBodies)
            \(maxBodyBytes.map { "  max_body_bytes: \($0)\n" } ?? "")\
            \(maxChangeSetBytes.map { "  max_change_set_bytes: \($0)\n" } ?? "")\
            \(certificate.map { "  tls: {certificate: \($0.certificate), key: \($0.key)}\n" } ?? "")trust:
              unknown_origins: \(unknownOrigins)

            """
        if !pinned.isEmpty {
            text += "  keys:\n"
            for entry in pinned { text += "    - origin: \(entry.origin)\n      key: \(entry.key)\n" }
        }
        if !retention.isEmpty {
            text += "retention:\n"
            for (key, value) in retention.sorted(by: { $0.key < $1.key }) { text += "  \(key): \(value)\n" }
        }
        try text.write(toFile: configuration, atomically: true, encoding: .utf8)
    }

    /// Sets `server.max_body_bytes` in the relay's configuration, read at its next start (the
    /// relay must have been made with a `maxBodyBytes`).
    public func setMaxBodyBytes(_ bytes: Int) throws {
        try setServerSetting("max_body_bytes", to: bytes)
    }

    /// Sets `server.max_change_set_bytes` in the relay's configuration, read at its next start (the
    /// relay must have been made with a `maxChangeSetBytes`).
    public func setMaxChangeSetBytes(_ bytes: Int) throws {
        try setServerSetting("max_change_set_bytes", to: bytes)
    }

    private func setServerSetting(_ key: String, to value: Int) throws {
        let text = try String(contentsOfFile: configuration, encoding: .utf8)
        guard let line = text.split(separator: "\n").first(where: { $0.contains("\(key):") }) else {
            throw DaemonPeerError(description: "\(name): its configuration sets no \(key) to change")
        }
        try text.replacingOccurrences(of: String(line), with: "  \(key): \(value)").write(toFile: configuration, atomically: true, encoding: .utf8)
    }

    /// The relay's resident memory in bytes (`VmRSS` of /proc), while it runs.
    public var residentMemory: Int? { processIdentifier.flatMap { ProcessMemory.figure("VmRSS:", of: $0) } }

    /// The relay's peak resident memory in bytes (`VmHWM` of /proc), while it runs.
    public var peakResidentMemory: Int? { processIdentifier.flatMap { ProcessMemory.figure("VmHWM:", of: $0) } }

    /// Adds a line to the relay's tokens file (`push TOKEN origins=UUID`, …), read at its next start.
    public func addToken(_ line: String) throws {
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: directory.file("tokens")))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data((line + "\n").utf8))
        try handle.close()
    }

    /// The relay process's id while it runs (for CPU accounting in benchmarks).
    public var processIdentifier: Int32? { process.flatMap { $0.isRunning ? $0.processIdentifier : nil } }

    /// Whether the relay process is running.
    public var isRunning: Bool { process?.isRunning ?? false }

    /// Starts `ferry relay` and waits until it listens (at most a minute).
    public func start() throws {
        let process = Process()
        process.executableURL = try FerryProcess.executable()
        process.arguments = ["relay", "--config", configuration]
        let output = Pipe()
        process.standardOutput = output
        if !FileManager.default.fileExists(atPath: directory.file("relay.log")) {
            _ = FileManager.default.createFile(atPath: directory.file("relay.log"), contents: nil)
        }
        let log = FileHandle(forWritingAtPath: directory.file("relay.log"))
        log?.seekToEndOfFile()
        process.standardError = log ?? FileHandle.nullDevice
        try process.run()
        self.process = process
        let (listening, printed) = DaemonPeer.awaitListening(output, timeout: DaemonPeer.startTimeout)
        guard listening else {
            if process.isRunning { BoundedWaiting.kill(process) }
            throw DaemonPeerError(description: "relay \(name) did not start: \(printed) \(self.log().suffix(3000))")
        }
    }

    /// Stops the relay with SIGTERM and waits (killing it after a minute); returns its exit status.
    @discardableResult
    public func stop() -> Int32 {
        guard let process, process.isRunning else { return process?.terminationStatus ?? 0 }
        process.terminate()
        if !BoundedWaiting.waitForExit(process, timeout: DaemonPeer.stopTimeout) { BoundedWaiting.kill(process) }
        return process.terminationStatus
    }

    /// Kills the relay with SIGKILL (a crashed machine) and waits.
    public func kill() {
        guard let process else { return }
        BoundedWaiting.kill(process)
    }

    /// What the relay logged so far.
    public func log() -> String {
        (try? String(contentsOfFile: directory.file("relay.log"), encoding: .utf8)) ?? ""
    }

    deinit {
        if let process, process.isRunning { BoundedWaiting.kill(process) }
    }
}
