// Workload W7: a new peer bootstraps from a peer holding N objects (default
// 1,000,000): `ferry init --from-peer` against a running `ferry run`, end to end (the
// source writes its snapshot, streams it over HTTP, the new store checks and installs it).
// Compared with raw sqlite3 inserting the same N rows (WAL, synchronous=FULL) in the same
// run; the new peer's peak resident memory is its VmHWM, read while it runs.
//
//     swift build -c release --product ferry && swift build -c release --product FerryBenchmarks
//     .build/release/FerryBenchmarks --bootstrap [--count N] [--relay]
//
// With --relay, the same new peer also joins through a relay (`ferry relay` on a PostgreSQL cluster
// started here): from the source's snapshot uploaded there, timed against the peer in the same run.
import Foundation
import FerryModel
import FerryStore
import FerrySQLite
import FerrySync
import FerryTestSupport

enum BootstrapWorkload {
    /// `VmHWM` of /proc/PID/status, in KB (nil once the process is gone).
    static func highWaterMark(of pid: Int32) -> Int? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }) else { return nil }
        return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "")
    }

    static func run(count: Int, model: ManagedObjectModel, throughRelay: Bool = false) async throws {
        print("W7 bootstrap: a new peer starts from a snapshot of a running peer holding \(count) Person objects (ferry init --from-peer)")
        let source = try DaemonPeer(name: "source", model: SampleModels.path("OrgChart"))
        var settings = Settings(arguments: [])
        settings.count = count
        settings.batch = 10_000
        let made = try ferryInsert(settings, model: model, path: source.store)
        print(String(format: "  source store made in %.1f s (%.1f MB)", made, Double(try StoreFileSize.bytes(source.store)) / 1_048_576))
        let directory = TemporaryDirectory(prefix: "ferry-w7")
        let raw = try rawInsert(settings, model: model, path: directory.file("raw.sqlite"))
        try source.start()
        defer { _ = source.stop() }
        let token = directory.file("token")
        try source.peerToken.write(toFile: token, atomically: true, encoding: .utf8)
        let fromPeer = try initFromPeer(source.url, tokenFile: token, target: directory.file("new.sqlite"), model: model, count: count)
        print(String(format: "  raw sqlite3 inserts: %.2f s; bootstrap end to end: %.2f s; new store %.1f MB", raw, fromPeer.seconds,
                     Double(try StoreFileSize.bytes(directory.file("new.sqlite"))) / 1_048_576))
        printRates(count: count, rawSeconds: raw, ferrySeconds: fromPeer.seconds, ferryLabel: "Ferry bootstrap (snapshot):")
        print(String(format: "peak RSS of the new peer (ferry init): %.0f MB (target <= 200 MB)", fromPeer.peakMB))
        guard throughRelay else { return }

        // The same store joining through a relay: the source's snapshot, uploaded to the relay beforehand
        // (what a daemon's snapshot_upload_interval does, not timed), taken by `ferry init --from-peer RELAY`.
        let cluster = try PostgresCluster(durable: true)
        defer { withExtendedLifetime(cluster) {} }  // (the relay's database stops with it)
        try cluster.createDatabase("join")
        let relay = try RelayProcess(name: "join", cluster: cluster, database: "join")
        try relay.start()
        defer { relay.stop() }
        let store = try SQLiteStore(path: source.store, model: model)
        let snapshot = try store.writeSnapshot()
        let uploadSeconds = try await asyncSeconds {
            try await PeerClient(baseURL: URL(string: relay.url)!, token: relay.peerToken, timeout: 600).uploadSnapshot(snapshot, of: store.identifier)
        }
        try? snapshot.handle.close()
        let relayToken = directory.file("relay-token")
        try relay.peerToken.write(toFile: relayToken, atomically: true, encoding: .utf8)
        let fromRelay = try initFromPeer(relay.url, tokenFile: relayToken, target: directory.file("via-relay.sqlite"), model: model, count: count)
        print(String(format: "  through a relay: the snapshot uploaded in %.2f s (not counted); ferry init --from-peer RELAY %.2f s, " +
                         "from the peer %.2f s in this run: %.2fx the peer's time; peak RSS %.0f MB",
                     uploadSeconds, fromRelay.seconds, fromPeer.seconds, fromRelay.seconds / fromPeer.seconds, fromRelay.peakMB))
    }

    /// `ferry init --from-peer URL` into `target`, timed, with the new peer's peak resident memory; the
    /// new store is checked to hold `count` people.
    static func initFromPeer(_ url: String, tokenFile: String, target: String, model: ManagedObjectModel,
                             count: Int) throws -> (seconds: Double, peakMB: Double) {
        let process = Process()
        process.executableURL = try FerryProcess.executable()
        process.arguments = ["init", "--from-peer", url, "--token-file", tokenFile, "--store", target, "--model", SampleModels.path("OrgChart")]
        process.standardOutput = FileHandle.nullDevice
        // The child's own high-water mark (VmHWM), read while it runs: the kernel's figure for
        // waited children would count this process's memory, which a spawned child starts from.
        var peakKB = 0
        let elapsed = try seconds {
            try process.run()
            while process.isRunning {
                peakKB = max(peakKB, highWaterMark(of: process.processIdentifier) ?? 0)
                usleep(2_000)
            }
        }
        guard process.terminationStatus == 0 else { throw RawSQLiteError.failed("ferry init --from-peer \(url) exited with \(process.terminationStatus)") }
        let copied = try SQLiteStore(path: target, model: model, options: .init(createIfMissing: false))
        let objects = try copied.count(FetchRequest(entityName: "Person"))
        guard objects == count else { throw RawSQLiteError.failed("the new store holds \(objects) objects, not \(count)") }
        return (elapsed, Double(peakKB) / 1024)
    }

    static func asyncSeconds(_ body: () async throws -> Void) async rethrows -> Double {
        let start = DispatchTime.now().uptimeNanoseconds
        try await body()
        return Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
    }
}
