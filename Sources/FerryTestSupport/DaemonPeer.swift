import Foundation
import GRDB
import FerryModel
import FerryStore
import FerrySQLite
import FerrySigning

/// A peer for replication tests: its own folder with a store, a tokens file
/// and a configuration, and a real `ferry run` process on 127.0.0.1 that can
/// be started, stopped (SIGTERM), killed (SIGKILL) and started again.
public final class DaemonPeer: @unchecked Sendable {
    /// The peer's name (other peers' configurations use it).
    public let name: String
    /// The folder with the store, tokens and configuration.
    public let directory: TemporaryDirectory
    /// The model path.
    public let model: String
    /// The token other peers present to this one.
    public let peerToken: String
    /// The token `sync-now` and `status` present.
    public let adminToken: String
    /// A token that may only pull (read-only replicas), and one that may only push.
    public let pullToken: String
    public let pushToken: String
    /// The port it listens on (fixed after the first start, so peers can name it).
    public private(set) var port: Int
    private var process: Process?
    private var peers: [(name: String, urls: [String], token: String, caFile: String?, snapshotUploadInterval: Double?)] = []
    /// Keys pinned in the configuration's `trust.keys` (``pin(_:)``).
    private var pinned: [(origin: String, key: String)] = []
    /// Scalar keys of the configuration's `trust` section (`unknown_origins`, `first_use`); written at the next configuration change.
    public var trustSettings: [String: String] = [:] {
        didSet { try? writeConfiguration() }
    }
    /// Scalar keys added to the configuration's `server` section (`max_body_bytes`, …); written at the next configuration change.
    public var serverSettings: [String: String] = [:] {
        didSet { try? writeConfiguration() }
    }
    private let pullInterval: Double
    private let maxBackoff: Double

    /// A peer with a fresh store of `model`, listening on a free port.
    /// `maxBackoff` caps the retry delay of a failing peer (`sync.max_backoff`); `storeFolder`
    /// puts the store file elsewhere than the peer's folder (on a file system a test mounts).
    public init(name: String, model: String, pullInterval: Double = 1, maxBackoff: Double = 60, storeFolder: String? = nil) throws {
        self.name = name
        self.model = model
        self.directory = TemporaryDirectory(prefix: "ferry-peer-\(name)")
        self.store = (storeFolder ?? directory.path) + "/store.sqlite"
        self.peerToken = "peer-\(name)-" + UUID().uuidString
        self.adminToken = "admin-\(name)-" + UUID().uuidString
        self.pullToken = "pull-\(name)-" + UUID().uuidString
        self.pushToken = "push-\(name)-" + UUID().uuidString
        self.pullInterval = pullInterval
        self.maxBackoff = maxBackoff
        self.port = try Self.freePort()
        try "peer \(peerToken)\nadmin \(adminToken)\npull \(pullToken)\npush \(pushToken)\n".write(toFile: directory.file("tokens"),
                                                                                                 atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: directory.file("tokens"))  // as docs/ advise
        try writeConfiguration()
    }

    /// The store file.
    public let store: String
    /// The configuration file.
    public var configuration: String { directory.file("ferry.yaml") }
    /// The base URL (https when ``useTLS(certificate:key:)`` was called).
    public var url: String { "\(tls == nil ? "http" : "https")://127.0.0.1:\(port)" }
    private var tls: (certificate: String, key: String, caFile: String?)?

    /// Serves HTTPS with this PEM certificate chain and key (before ``start(environment:)``);
    /// `caFile` is `server.tls.ca_file`, for `sync-now` and `status` to verify the daemon with.
    public func useTLS(certificate: String, key: String, caFile: String? = nil) throws {
        tls = (certificate, key, caFile)
        try writeConfiguration()
    }
    /// Whether the daemon process is running.
    public var isRunning: Bool { process?.isRunning ?? false }

    /// The daemon's process identifier, while it runs.
    public var processIdentifier: Int32? {
        guard let process, process.isRunning else { return nil }
        return process.processIdentifier
    }

    /// The daemon's resident memory in bytes (`VmRSS` of /proc), while it runs.
    public var residentMemory: Int? { memoryFigure("VmRSS:") }

    /// The most resident memory the daemon has had since it started, in bytes (`VmHWM` of /proc), while it runs.
    public var peakResidentMemory: Int? { memoryFigure("VmHWM:") }

    private func memoryFigure(_ name: String) -> Int? {
        guard let process, process.isRunning else { return nil }
        return ProcessMemory.figure(name, of: process.processIdentifier)
    }

    /// The daemon's limit of open file descriptors (`prlimit --nofile`), when a test lowers it.
    public var descriptorLimit: Int?

    /// How many file descriptors the daemon has open (`/proc/PID/fd`), while it runs.
    public var openDescriptors: Int? {
        guard let process, process.isRunning,
              let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(process.processIdentifier)/fd") else { return nil }
        return entries.count
    }

    /// "running", or how the last daemon process ended (exit status or signal), for failure messages.
    public var processState: String {
        guard let process else { return "never started" }
        if process.isRunning { return "running" }
        switch process.terminationReason {
        case .uncaughtSignal: return "killed by signal \(process.terminationStatus)"
        default: return "exited with status \(process.terminationStatus)"
        }
    }

    /// Two peers "a" and "b" of `model`, connected both ways and started (with `environment`);
    /// `bStoreFolder` puts B's store file elsewhere (see ``init(name:model:pullInterval:maxBackoff:storeFolder:)``).
    public static func startedPair(model: String, pullInterval: Double = 0.5, maxBackoff: Double = 2, bStoreFolder: String? = nil,
                                   environment: [String: String] = [:]) throws -> (DaemonPeer, DaemonPeer) {
        let a = try DaemonPeer(name: "a", model: model, pullInterval: pullInterval, maxBackoff: maxBackoff)
        let b = try DaemonPeer(name: "b", model: model, pullInterval: pullInterval, maxBackoff: maxBackoff, storeFolder: bStoreFolder)
        try a.connect(to: b)
        try b.connect(to: a)
        try a.start(environment: environment)
        try b.start(environment: environment)
        return (a, b)
    }

    /// Makes this peer sync with `other` (presenting `token`, by default the right one),
    /// at `url` when given (a ``FaultProxy`` in front of it) or directly; `caFile` is the
    /// peer's `ca_file` (its HTTPS certificate checked against that CA, not the system store).
    public func connect(to other: DaemonPeer, token: String? = nil, via url: String? = nil, caFile: String? = nil) throws {
        peers.append((other.name, [url ?? other.url], token ?? other.peerToken, caFile, nil))
        try writeConfiguration()
    }

    /// Makes this peer sync with a peer named `name` reached at any of `urls` (relays sharing one
    /// database: `urls` in the configuration), presenting `token`; `snapshotUploadInterval` is the
    /// entry's `snapshot_upload_interval` (seconds between uploads of this store's snapshot to a relay).
    /// `caFile` is the entry's `ca_file` (HTTPS relays whose certificate a private CA signed).
    public func connect(name: String, urls: [String], token: String, snapshotUploadInterval: Double? = nil, caFile: String? = nil) throws {
        peers.append((name, urls, token, caFile, snapshotUploadInterval))
        try writeConfiguration()
    }

    /// The store's UUID and public key, as `ferry state` shows them (the store must exist: after
    /// ``start(environment:)`` or `ferry init`).
    /// Read in this process, as `ferry state` reads them.
    public func identity() throws -> (store: String, key: String) {
        let state = try historyState()
        guard let key = state.publicKey else {
            throw DaemonPeerError(description: "\(name): the store \(state.store.uuidString) has no public key, nor a key file beside it")
        }
        return (state.store.uuidString, key)
    }

    /// The store's state as `ferry state` prints it, read in this process.
    private func historyState() throws -> HistoryState {
        do {
            return try SQLiteStore.historyState(atPath: store)
        } catch {
            throw DaemonPeerError(description: "the state of \(name)'s store cannot be read: \(error)")
        }
    }

    /// Pins `other`'s key in this peer's configuration (`trust.keys`): how a store trusts one it
    /// does not talk to (the next start takes it).
    public func pin(_ other: DaemonPeer) throws {
        let identity = try other.identity()
        try pin(origin: identity.store, key: identity.key)
    }

    /// Pins `key` for `origin` in this peer's configuration (`trust.keys`).
    public func pin(origin: String, key: String) throws {
        pinned.append((origin, key))
        try writeConfiguration()
    }

    private func writeConfiguration() throws {
        var text = """
            store:
              path: \(store)
              model: \(model)
            server:
              host: 127.0.0.1
              port: \(port)
              tokens_file: tokens
            \(serverSettings.sorted(by: { $0.key < $1.key }).map { "  \($0.key): \($0.value)\n" }.joined())\
            \(tls.map { "  tls:\n    certificate: \($0.certificate)\n    key: \($0.key)\n" + ($0.caFile.map { "    ca_file: \($0)\n" } ?? "") } ?? "")sync:
              pull_interval: \(pullInterval)
              batch_size: 200
              request_timeout: 10
              max_backoff: \(maxBackoff)

            """
        if !peers.isEmpty {
            text += "peers:\n"
            for peer in peers {
                try peer.token.write(toFile: directory.file("to-\(peer.name).token"), atomically: true, encoding: .utf8)
                if peer.urls.count == 1 {
                    text += "  - name: \(peer.name)\n    url: \(peer.urls[0])\n    token_file: to-\(peer.name).token\n"
                } else {
                    text += "  - name: \(peer.name)\n    urls: [\(peer.urls.joined(separator: ", "))]\n    token_file: to-\(peer.name).token\n"
                }
                if let caFile = peer.caFile { text += "    ca_file: \(caFile)\n" }
                if let interval = peer.snapshotUploadInterval { text += "    snapshot_upload_interval: \(interval)\n" }
            }
        }
        if !trustSettings.isEmpty || !pinned.isEmpty {
            text += "trust:\n"
            for (key, value) in trustSettings.sorted(by: { $0.key < $1.key }) { text += "  \(key): \(value)\n" }
            if !pinned.isEmpty {
                text += "  keys:\n"
                for entry in pinned { text += "    - origin: \(entry.origin)\n      key: \(entry.key)\n" }
            }
        }
        try text.write(toFile: configuration, atomically: true, encoding: .utf8)
    }

    /// Starts `ferry run` without waiting for it to listen (to kill it at any moment of its start);
    /// returns its standard output.
    @discardableResult
    public func launch(environment: [String: String] = [:]) throws -> Pipe {
        let process = Process()
        if let descriptorLimit {
            // prlimit sets the limit and then becomes the daemon (same process).
            process.executableURL = URL(fileURLWithPath: "/usr/bin/prlimit")
            process.arguments = ["--nofile=\(descriptorLimit):\(descriptorLimit)", try FerryProcess.executable().path, "run", "--config", configuration]
        } else {
            process.executableURL = try FerryProcess.executable()
            process.arguments = ["run", "--config", configuration]
        }
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        let output = Pipe()
        process.standardOutput = output
        let log = FileHandle(forWritingAtPath: directory.file("daemon.log")) ?? {
            _ = FileManager.default.createFile(atPath: directory.file("daemon.log"), contents: nil)
            return FileHandle(forWritingAtPath: directory.file("daemon.log"))
        }()
        log?.seekToEndOfFile()
        process.standardError = log ?? FileHandle.nullDevice
        try process.run()
        self.process = process
        return output
    }

    /// How long ``start(environment:)`` waits for the daemon to say it listens.
    public static let startTimeout: TimeInterval = 60

    /// Starts `ferry run` (with `environment` added to this process's) and waits until it listens
    /// (at most ``startTimeout``; a daemon that has not said so by then is killed and the start fails).
    public func start(environment: [String: String] = [:]) throws {
        let output = try launch(environment: environment)
        let (listening, printed) = Self.awaitListening(output, timeout: Self.startTimeout)
        if listening { return }
        if let process, process.isRunning {
            BoundedWaiting.kill(process)
            throw DaemonPeerError(description: "\(name) did not say it listens within \(Int(Self.startTimeout)) s (killed): \(printed) \(log())")
        }
        throw DaemonPeerError(description: "\(name) did not start (\(processState)): \(printed) \(log())")
    }

    /// Reads a starting process's standard output until it says "listening on" (true), ends, or
    /// `timeout` passes (false); returns what it printed. poll(2) before each read, so a process
    /// that neither prints nor ends cannot block the test.
    static func awaitListening(_ output: Pipe, timeout: TimeInterval) -> (listening: Bool, printed: String) {
        let descriptor = output.fileHandleForReading.fileDescriptor
        var seen = Data()
        let deadline = Date().addingTimeInterval(timeout)
        var buffer = [UInt8](repeating: 0, count: 4096)
        while Date() < deadline {
            var request = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            let ready = poll(&request, 1, Int32(max(1, min(1000, deadline.timeIntervalSinceNow * 1000))))
            if ready < 0, errno == EINTR { continue }
            if ready <= 0 { continue }
            let count = read(descriptor, &buffer, buffer.count)
            if count <= 0 { break }  // the process ended (or closed its output)
            seen.append(contentsOf: buffer[0..<count])
            if String(decoding: seen, as: UTF8.self).contains("listening on") { return (true, String(decoding: seen, as: UTF8.self)) }
        }
        return (false, String(decoding: seen, as: UTF8.self))
    }

    /// How long ``stop()`` waits after SIGTERM before it kills the daemon: the daemon's own
    /// bounds on a graceful stop (`Daemon.ShutdownBounds`) and a margin for a loaded machine.
    public static let stopTimeout: TimeInterval = 60

    /// Stops the daemon with SIGTERM and waits; returns its exit status. A daemon still running
    /// ``stopTimeout`` seconds later is killed (its status then says so, and standard error and
    /// its log get a line). A daemon that does not exit with 0 has the end of its log written to
    /// standard error, so that the cause survives its temporary folder.
    @discardableResult
    public func stop() -> Int32 {
        guard let process, process.isRunning else { return process?.terminationStatus ?? 0 }
        let stopping = Date()
        process.terminate()
        if !BoundedWaiting.waitForExit(process, timeout: Self.stopTimeout) {
            let message = "ferry tests: \(name) (pid \(process.processIdentifier)) did not stop within \(Int(Self.stopTimeout)) s of SIGTERM; killed\n"
            FileHandle.standardError.write(Data(message.utf8))
            appendToLog(message)
            BoundedWaiting.kill(process)
        }
        let status = process.terminationStatus
        if status != 0 {
            let seconds = String(format: "%.1f", Date().timeIntervalSince(stopping))
            let report = "ferry tests: \(name) (pid \(process.processIdentifier)) exited with status \(status) \(seconds) s after SIGTERM; "
                + "the end of its log:\n\(logExcerpt(characters: 6000))\n"
            FileHandle.standardError.write(Data(report.utf8))
        }
        return status
    }

    /// Kills the daemon with SIGKILL (a crash) and waits.
    public func kill() {
        guard let process else { return }
        BoundedWaiting.kill(process)
    }

    private func appendToLog(_ text: String) {
        guard let log = FileHandle(forWritingAtPath: directory.file("daemon.log")) else { return }
        log.seekToEndOfFile()
        log.write(Data(text.utf8))
        try? log.close()
    }

    /// What the daemon logged so far.
    public func log() -> String {
        (try? String(contentsOfFile: directory.file("daemon.log"), encoding: .utf8)) ?? ""
    }

    /// The part of the log a failure message needs: when the daemon crashed, the crash
    /// report from its first line (the reason and the crashed thread's frames), else the end.
    public func logExcerpt(characters: Int = 3000) -> String {
        let text = log()
        let markers = ["Fatal error", "Program crashed", "crashed:"]
        guard let crash = markers.compactMap({ text.range(of: $0)?.lowerBound }).min() else {
            return String(text.suffix(characters))
        }
        let start = text.index(crash, offsetBy: -min(600, text.distance(from: text.startIndex, to: crash)))
        return String(text[start...].prefix(characters)) + "\n  …\n" + String(text.suffix(600))
    }

    /// Runs `ferry` with this peer's store and model appended after `arguments`.
    public func ferry(_ arguments: [String], input: String? = nil) throws -> FerryProcess.Result {
        try FerryProcess.run(arguments + ["--store", store, "--model", model], input: input)
    }

    /// The store's dump, as `ferry dump` prints it (the same SQL-streamed lines, each ended by a
    /// newline), read in this process: the store opened as `ferry dump` opens it (the peer's model
    /// and its earlier versions, never created), without a `ferry` process per call. Tests poll it
    /// every 0.1 s while daemons converge, where a process each time took a core's worth of the
    /// machine from the daemons. `ferry dump` itself is tested as a process (CommandLineTests).
    /// - Throws: ``DaemonPeerError`` when the store cannot be opened or read (a negative check such
    ///   as "B does not hold X" must not pass on an empty output).
    public func dump() throws -> String {
        do {
            let versions = try XcodeModelReader.readVersions(at: model)
            let opened = try SQLiteStore(path: store, model: versions.current,
                                         options: .init(createIfMissing: false, earlierModels: versions.earlier))
            var text = ""
            try opened.streamDump { line in
                text += line
                text += "\n"
            }
            return text
        } catch {
            throw DaemonPeerError(description: "the dump of \(name)'s store failed: \(error)")
        }
    }

    /// `result`, or an error naming `command` when it exited non-zero.
    private func succeeded(_ result: FerryProcess.Result, _ command: String) throws -> FerryProcess.Result {
        guard result.status == 0 else {
            throw DaemonPeerError(description: "ferry \(command) on \(name) exited with \(result.status): \(result.standardError.prefix(600))")
        }
        return result
    }

    /// A `ferry put` operations array inserting OrgChart's Person `prefix N` (id N) for each N of `range`.
    public static func people(_ prefix: String, _ range: Range<Int>) -> String {
        "[" + range.map { #"{"op":"insert","entity":"Person","ref":"\#(prefix)\#($0)","values":{"id":\#($0),"name":"\#(prefix) \#($0)"}}"# }
            .joined(separator: ",") + "]"
    }

    /// A `ferry put` operations array inserting OrgChart's Person with id N for each N of `ids`, each
    /// named with 58,000 characters that start with `mark`: 100 of them make one change set of some
    /// 5.8 MB of text with few objects, so that making and replaying it is quick.
    public static func longNamedPeople(_ ids: Range<Int>, mark: Int) -> String {
        let name = String(repeating: "\(mark)abcdefghij", count: 5_800).prefix(58_000)
        return "[" + ids.map { #"{"op":"insert","entity":"Person","ref":"p\#($0)","values":{"id":\#($0),"name":"\#(name)"}}"# }
            .joined(separator: ",") + "]"
    }

    /// The `last_error` of the daemon's first peer in its status document (`GET /v1/status`), "" when none.
    public func lastSyncError() throws -> String {
        (try firstPeerStatus()?["last_error"] as? String) ?? ""
    }

    /// How many sync rounds with the daemon's first peer failed in a row (`consecutive_failures` in
    /// its status document): a count that grows says another round ended, and how.
    public func consecutiveSyncFailures() throws -> Int {
        (try firstPeerStatus()?["consecutive_failures"] as? Int) ?? 0
    }

    /// The daemon's first peer in its status document (`GET /v1/status`), nil when it lists none.
    private func firstPeerStatus() throws -> [String: Any]? {
        let status = try FerryProcess.curl("GET", url + "/v1/status", token: adminToken)
        let json = try JSONSerialization.jsonObject(with: Data(status.body.utf8)) as? [String: Any]
        return (json?["peers"] as? [[String: Any]])?.first
    }

    /// Whether the daemon's first peer has a `last_success` in its status document (`GET /v1/status`):
    /// a sync round with it, push and pull, went through.
    public func hasSynced() throws -> Bool {
        let success = try firstPeerStatus()?["last_success"]
        return success != nil && !(success is NSNull)
    }

    /// Waits up to `timeout` seconds for ``lastSyncError()`` to contain `text`; the last one read.
    /// - Throws: ``DaemonPeerError`` with the last error read and the log's end when it never did.
    public func waitForSyncError(containing text: String, timeout: TimeInterval = 30) throws -> String {
        var lastError = ""
        guard try Self.waitUntil(timeout: timeout, { lastError = try lastSyncError(); return lastError.contains(text) }) else {
            throw DaemonPeerError(description: "\(name)'s status never said \"\(text)\" within \(Int(timeout)) s; " +
                                  "its last error: \(lastError)\n\(logExcerpt())")
        }
        return lastError
    }

    /// Saves the objects of one `ferry put` operations array; returns each ref's permanent URI.
    @discardableResult
    public func put(_ operations: String) throws -> [String: String] {
        let result = try ferry(["put", "-"], input: operations)
        guard result.status == 0 else { throw DaemonPeerError(description: "put on \(name) failed: \(result.standardError)") }
        let refs = try? JSONSerialization.jsonObject(with: Data(result.standardOutput.utf8)) as? [String: String]
        return refs ?? [:]
    }

    /// The store's change sets (`ferry history`), one JSON line each.
    public func history() throws -> [String] {
        try succeeded(ferry(["history"]), "history").standardOutput.split(separator: "\n").map(String.init)
    }

    /// The store's version vector (`ferry state`'s, read in this process): origin UUID → last
    /// sequence number taken in.
    public func vector() throws -> [String: Int] {
        Dictionary(uniqueKeysWithValues: try historyState().vector.map { ($0.key.uuidString, Int($0.value)) })
    }

    /// What SQLite's `PRAGMA integrity_check` says of the store file (`["ok"]` when sound).
    public func integrityCheck() throws -> [String] {
        try readOnlyStore().read { try String.fetchAll($0, sql: "PRAGMA integrity_check") }
    }

    /// The store file opened read-only (beside a running daemon).
    private func readOnlyStore() throws -> DatabaseQueue {
        var configuration = Configuration()
        configuration.readonly = true
        // A daemon killed a moment ago leaves a log the next connection must recover; wait for that.
        configuration.busyMode = .timeout(10)
        return try DatabaseQueue(path: store, configuration: configuration)
    }

    /// The store's UUID (its origin in change sets), read from the file.
    public func storeIdentifier() throws -> String {
        let found = try readOnlyStore().read { try String.fetchOne($0, sql: "SELECT Z_UUID FROM Z_METADATA WHERE Z_VERSION = 1") }
        guard let found else { throw DaemonPeerError(description: "\(name): the store has no Z_METADATA row") }
        return found
    }

    /// How many change sets of `origin` the store holds (one read of its log).
    public func changeSetCount(of origin: String) throws -> Int {
        try readOnlyStore().read { try Int.fetchOne($0, sql: "SELECT COUNT(*) FROM Z_FERRY_CHANGESET WHERE Z_ORIGIN = ?", arguments: [origin]) ?? 0 }
    }

    /// Every change set the store holds, as (origin, sequence, status, quarantine reason) rows
    /// of its log, and how many received change sets wait outside it.
    public func changeSetLog() throws -> (entries: [(origin: String, sequence: Int, status: Int, reason: String?)], pending: Int) {
        try readOnlyStore().read { db in
            let rows = try Row.fetchAll(db, sql: "SELECT Z_ORIGIN, Z_SEQ, Z_STATUS, Z_REASON FROM Z_FERRY_CHANGESET")
            let pending = try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM Z_FERRY_PENDING") ?? 0
            return (rows.map { (origin: $0[0], sequence: $0[1], status: $0[2], reason: $0[3]) }, pending)
        }
    }

    /// Waits (polling) until `condition` holds, up to `timeout` seconds.
    public static func waitUntil(timeout: TimeInterval = 30, _ condition: () throws -> Bool) rethrows -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if try condition() { return true }
            Thread.sleep(forTimeInterval: 0.1)
        }
        return try condition()
    }

    deinit {
        if let process { BoundedWaiting.kill(process) }
    }

    /// A TCP port nothing listens on now, on 127.0.0.1.
    static func freePort() throws -> Int {
        try LoopbackSocket.freePortForLater()
    }
}

/// A test peer that misbehaved.
public struct DaemonPeerError: Error, CustomStringConvertible {
    /// What went wrong.
    public let description: String

    /// Creates an error.
    public init(description: String) { self.description = description }
}
