// A serving peer's memory while slow peers pull one large change set (docs/RELIABILITY.md §10):
// one save of N Person objects on A (default 400,000: a change set of 86.9 MB of text),
// `ferry run` serving it, then P connections (default 10) that each ask for it (gzip, as peers
// do, or not with --identity) and read only the answer's first kilobytes. Prints A's resident
// memory before the pullers and with them, per puller, against the change set's size; and
// first, what a new peer's `ferry sync-now` of it takes and what the same save by `ferry put`
// takes (seconds, peak resident memory).
//
//     swift build -c release --product ferry && swift build -c release --product FerryBenchmarks
//     .build/release/FerryBenchmarks --slow-pullers [--count N] [--runs P] [--identity]
import Foundation
import GRDBSQLite
import FerryModel
import FerryStore
import FerrySQLite
import FerryTestSupport

enum SlowPullersWorkload {
    static func run(count: Int, pullers: Int, gzip: Bool, model: ManagedObjectModel) throws {
        print("Slow pullers: \(pullers) peers pull one change set of \(count) Person objects from `ferry run` (\(gzip ? "gzip" : "identity")) and stop reading")
        let a = try DaemonPeer(name: "a", model: SampleModels.path("OrgChart"), pullInterval: 3600)
        var settings = Settings(arguments: [])
        settings.count = count
        settings.batch = count
        let made = try ferryInsert(settings, model: model, path: a.store)
        let lineBytes = try firstChangeSetBytes(at: a.store, model: model)
        let storedBytes = try {
            let raw = try RawDatabase(path: a.store)
            let statement = try raw.prepare("SELECT length(Z_BODY) FROM Z_FERRY_CHANGESET")
            defer { sqlite3_finalize(statement) }
            return sqlite3_step(statement) == SQLITE_ROW ? Int(sqlite3_column_int64(statement, 0)) : 0
        }()
        print(String(format: "  the change set: %.1f MB of text, %.1f MB as stored (compressed), saved in %.1f s",
                     Double(lineBytes) / 1_048_576, Double(storedBytes) / 1_048_576, made))
        try a.start()
        defer { _ = a.stop() }
        let body = #"{"after":{},"limit":10000}"#
        func request(closing: Bool) -> String {
            "POST /v1/changesets/pull HTTP/1.1\r\nHost: 127.0.0.1\r\n\(closing ? "Connection: close\r\n" : "")Authorization: Bearer \(a.peerToken)\r\n"
                + "Content-Type: application/json\r\nAccept-Encoding: \(gzip ? "gzip" : "identity")\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)"
        }

        // One whole pull first, read to its end: what serving it once leaves behind is in the baseline.
        let whole = try RawConnection(port: a.port)
        whole.send(request(closing: true))
        let pullStarted = DispatchTime.now().uptimeNanoseconds
        let wholeBytes = whole.readBytes(timeout: 120, limit: .max).count
        let pullSeconds = Double(DispatchTime.now().uptimeNanoseconds - pullStarted) / 1e9
        whole.close()

        // What taking it in costs a peer: a new store's `ferry sync-now` from A (the whole line held, decoded and replayed).
        let taken = try ReplicationWorkload.syncNow(from: a, into: "b", settings: settings)
        print(String(format: "  a new peer's sync-now of it: %.1f s, peak resident memory %.0f MB", taken.seconds, taken.peakMegabytes))
        // What making it costs: the same save by `ferry put` into a new store.
        let put = try putPeak(count: count, model: SampleModels.path("OrgChart"))
        print(String(format: "  the same save made by `ferry put` into a new store: %.1f s, peak resident memory %.0f MB", put.seconds, put.peakMegabytes))
        Thread.sleep(forTimeInterval: 1)
        let before = try residentMegabytes(of: a)

        var connections: [RawConnection] = []
        defer { connections.forEach { $0.close() } }
        var firstBytes: [Int] = []
        for _ in 0..<pullers {
            let connection = try RawConnection(port: a.port)
            connection.shrinkReceiveBuffer()
            connection.send(request(closing: false))
            firstBytes.append(connection.readBytes(timeout: 5, limit: 4096).count)
            connections.append(connection)
        }
        // The daemon has sent what the sockets take and waits on each; its memory settles.
        var samples: [Double] = []
        for _ in 0..<20 {
            Thread.sleep(forTimeInterval: 0.25)
            samples.append(try residentMegabytes(of: a))
        }
        let with = samples.max() ?? 0
        print(String(format: "  one whole pull: %.1f MB on the wire in %.2f s; every puller had the answer's head (%@ bytes read each)",
                     Double(wholeBytes) / 1_048_576, pullSeconds, Set(firstBytes).sorted().map(String.init).joined(separator: ", ")))
        print(String(format: "  A's resident memory: %.0f MB before, %.0f MB with %d slow pullers (the most in 5 s): " +
                         "%.1f MB per puller, %.2f× the change set's %.1f MB",
                     before, with, pullers, (with - before) / Double(pullers), (with - before) / Double(pullers) / (Double(lineBytes) / 1_048_576),
                     Double(lineBytes) / 1_048_576))
    }

    /// One `ferry put` of `count` Person objects (the save the workload made in-process) into a new
    /// store: its seconds and peak resident memory.
    static func putPeak(count: Int, model: String) throws -> (seconds: Double, peakMegabytes: Double) {
        let directory = TemporaryDirectory()
        let operations = URL(fileURLWithPath: directory.file("operations.json"))
        try Data(DaemonPeer.people("big-", 0..<count).utf8).write(to: operations)
        let store = directory.file("made.sqlite")
        let made = try FerryProcess.run(["init", "--store", store, "--model", model])
        guard made.status == 0 else { throw RawSQLiteError.failed("ferry init failed: \(made.standardError)") }
        return try ReplicationWorkload.measuredFerry(["put", "--store", store, "--model", model, "-"], input: operations, describing: "ferry put")
    }

    /// The text's length of the first change set in the store at `path`.
    static func firstChangeSetBytes(at path: String, model: ManagedObjectModel) throws -> Int {
        let store = try SQLiteStore(path: path, model: model)
        defer { try? store.close() }
        return try store.changeSetPage(after: [:], cursor: 0, limit: 1).lines.first?.byteCount ?? 0
    }

    static func residentMegabytes(of peer: DaemonPeer) throws -> Double {
        guard let bytes = peer.residentMemory else { throw DaemonPeerError(description: "\(peer.name) is not running:\n\(peer.logExcerpt())") }
        return Double(bytes) / 1_048_576
    }
}
