import Foundation
import Testing
import FerryTestTraits
import FerryTestSupport

/// A daemon whose store cannot be opened at start keeps serving what it can,
/// says why everywhere (health, status, metrics, log, `sync-now`), refuses the
/// store's routes with 503 so senders keep their change sets, and opens the
/// store and catches up by itself once the cause is gone — no restart.
/// (The root-only reliability test does the same with a read-only file system;
/// here a file stands where the store's folder should be, which needs no root.)
@Suite("Store unavailable at start", .blocking)
struct StoreUnavailableTests {
    @Test("Serves health, status and metrics, answers 503 on store routes, then opens the store by itself")
    func waitsForTheStore() throws {
        let model = ReplicationTests.model
        let scratch = TemporaryDirectory(prefix: "ferry-blocked")
        let blocker = scratch.file("store-folder")
        try Data("not a folder".utf8).write(to: URL(fileURLWithPath: blocker))
        let a = try DaemonPeer(name: "a", model: model, pullInterval: 0.5, maxBackoff: 1)
        let b = try DaemonPeer(name: "b", model: model, pullInterval: 0.5, maxBackoff: 1, storeFolder: blocker)
        try a.connect(to: b)
        try b.connect(to: a)
        try a.start()
        try b.start()
        defer { a.stop(); b.stop() }
        try a.put("[\(ReplicationTests.person("ann", 1, "Ann"))]")

        let health = try FerryProcess.curl("GET", b.url + "/healthz", token: nil)
        #expect(health.status == 503, "health: \(health)")
        // healthz needs no token: it says the store is not open, but not where it is or why (status, for admins, does).
        #expect(health.body.contains("not open") && !health.body.contains(b.directory.path), "health: \(health.body)")
        let push = try FerryProcess.curl("POST", b.url + "/v1/changesets", token: b.peerToken, body: try #require(a.history().first) + "\n")
        #expect(push.status == 503 && push.body.contains("not open"), "push: \(push)")

        let status = try FerryProcess.run(["status", "--config", b.configuration])
        #expect(status.status == 0 && status.standardOutput.contains("store_error") && status.standardOutput.contains("waiting for the store"),
                "status: \(status.standardOutput) \(status.standardError)")
        let syncNow = try FerryProcess.run(["sync-now", "--config", b.configuration])
        #expect(syncNow.status != 0, "sync-now succeeded without a store")
        #expect(syncNow.standardError.contains("cannot sync now") && syncNow.standardError.contains("is a file, not a folder"),
                "sync-now: \(syncNow.standardError)")

        // A's pushes to B fail with the reason and are kept; B retries on its backoff and says so once.
        var statusA = ""
        let aSawIt = try DaemonPeer.waitUntil(timeout: 20) {
            statusA = try FerryProcess.run(["status", "--config", a.configuration]).standardOutput
            return statusA.contains("not open")
        }
        #expect(aSawIt, "A's status does not show B's store problem: \(statusA)")
        var metrics = ""
        let retried = try DaemonPeer.waitUntil(timeout: 10) {
            metrics = try FerryProcess.curl("GET", b.url + "/metrics", token: b.adminToken).body
            return Self.value(of: #"ferry_store_errors_total{operation="open"}"#, in: metrics) ?? 0 >= 3
        }
        #expect(retried, "B did not retry opening: \(metrics.split(separator: "\n").filter { $0.contains("ferry_store") })")
        #expect(Self.value(of: "ferry_store_open", in: metrics) == 0)
        let complaints = b.log().components(separatedBy: "cannot open store").count - 1
        #expect(complaints == 1, "B logged the same problem \(complaints) times:\n\(b.log().suffix(2000))")
        #expect(b.isRunning, "B ended: \(b.processState)")

        // The cause goes: B opens the store by itself and catches up.
        try FileManager.default.removeItem(atPath: blocker)
        // (B's store file may not exist yet: its dump fails until the daemon has created it.)
        let caughtUp = try DaemonPeer.waitUntil(timeout: 30) {
            guard let dumpB = try? b.dump() else { return false }
            return try a.dump() == dumpB
        }
        #expect(caughtUp, "B did not catch up once its folder could be made:\n\(b.log().suffix(2000))")
        #expect(try b.dump().contains("Ann"))
        #expect(b.log().contains("opened after"), "B did not say it opened the store:\n\(b.log().suffix(1000))")
        #expect(try FerryProcess.curl("GET", b.url + "/healthz", token: nil).status == 200)
        #expect(Self.value(of: "ferry_store_open", in: try FerryProcess.curl("GET", b.url + "/metrics", token: b.adminToken).body) == 1)
        #expect(try FerryProcess.run(["sync-now", "--config", b.configuration]).status == 0)
        #expect(a.stop() == 0 && b.stop() == 0)
    }

    /// The value of the Prometheus sample `name` (exact series, labels included), if present.
    static func value(of name: String, in metrics: String) -> Double? {
        metrics.split(separator: "\n").first { $0.hasPrefix(name + " ") }.flatMap { Double($0.split(separator: " ").last ?? "") }
    }
}
