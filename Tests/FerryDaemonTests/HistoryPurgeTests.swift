import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
import FerryTestTraits
import FerryStore
import FerryTestSupport

/// The daemon purging its history on its own (docs/SYNC.md, "Bounded history"), with real
/// `ferry run` processes.
@Suite("Daemons purging their history", .blocking)
struct HistoryPurgeTests {
    /// Purge every 0.3 s, keep nothing for its age, remember deletes for an hour.
    static let purging = ["FERRY_HISTORY_PURGE_INTERVAL": "0.3", "FERRY_HISTORY_RETENTION": "0", "FERRY_HISTORY_TOMBSTONE_HORIZON": "3600"]

    func status(_ peer: DaemonPeer) throws -> JSONValue {
        try JSONValue.parse(try FerryProcess.run(["status", "--config", peer.configuration]).standardOutput)
    }

    func metrics(_ peer: DaemonPeer) async throws -> String {
        var request = URLRequest(url: try #require(URL(string: peer.url + "/metrics")))
        request.setValue("Bearer \(peer.peerToken)", forHTTPHeaderField: "Authorization")
        return String(decoding: try await URLSession.shared.data(for: request).0, as: UTF8.self)
    }

    @Test("A daemon purges what every peer acknowledged, on its interval, and shows its history in status and /metrics")
    func purgesWhatPeersHave() async throws {
        let (a, b) = try DaemonPeer.startedPair(model: ReplicationTests.model, environment: Self.purging)
        defer { _ = a.stop(); _ = b.stop() }
        for index in 1...3 { try a.put("[\(ReplicationTests.person("p\(index)", index, "P\(index)"))]") }
        let origin = try #require(try status(a)["store"]?.stringValue)
        // B takes them in, acknowledges them in a round with A, and A purges them (B too: A has them all).
        var last = JSONValue.null
        let purged = try DaemonPeer.waitUntil(timeout: 30) {
            last = try status(a)
            return last["history"]?["change_sets"] == .integer(0)
        }
        #expect(purged, "A's history: \(last["history"]?.text ?? "none"); log a:\n\(a.logExcerpt())")
        let history = try #require(last["history"])
        #expect(history["purged_through"] == .sortedObject([origin: .integer(3)]), "\(history.text)")
        #expect(history["bytes"] == .integer(0) && history["tombstones"] == .integer(0) && history["horizon"]?.stringValue != nil)
        #expect(history["last_purge"]?.stringValue != nil)
        #expect(try DaemonPeer.waitUntil(timeout: 30) { try status(b)["history"]?["change_sets"] == .integer(0) }, "B purges A's change sets too")
        let text = try await metrics(a)
        #expect(text.contains("ferry_history_changesets 0") && text.contains("ferry_history_tombstones 0"), "\(text.prefix(3000))")
        #expect(text.contains("ferry_history_purged_changesets_total 3"), "\(text.prefix(3000))")
        // Replication goes on after the purge: sequence numbers continue, B takes in the next one.
        try a.put("[\(ReplicationTests.person("p4", 4, "P4"))]")
        #expect(try DaemonPeer.waitUntil(timeout: 30) { try b.ferry(["dump"]).standardOutput.contains("P4") })
        // A new, empty store cannot be seeded from A's history any more: 410, with what to do.
        var request = URLRequest(url: try #require(URL(string: a.url + "/v1/changesets/pull")))
        request.httpMethod = "POST"
        request.httpBody = Data("{}".utf8)
        request.setValue("Bearer \(a.peerToken)", forHTTPHeaderField: "Authorization")
        let (data, response) = try await URLSession.shared.data(for: request)
        #expect((response as? HTTPURLResponse)?.statusCode == 410)
        #expect(String(decoding: data, as: UTF8.self).contains("were purged"))
    }

    @Test("A daemon whose peer has not synced since it started purges nothing; history.purge_interval 0 never purges")
    func waitsForEveryPeer() async throws {
        let a = try DaemonPeer(name: "a", model: ReplicationTests.model, pullInterval: 0.5, maxBackoff: 1)
        let b = try DaemonPeer(name: "b", model: ReplicationTests.model, pullInterval: 0.5, maxBackoff: 1)
        try a.connect(to: b)
        try a.start(environment: Self.purging)  // B never runs
        defer { _ = a.stop() }
        for index in 1...2 { try a.put("[\(ReplicationTests.person("p\(index)", index, "P\(index)"))]") }
        // Several purge intervals pass.
        #expect(try DaemonPeer.waitUntil(timeout: 30) { try status(a)["history"]?["last_purge"]?.stringValue != nil })
        try await Task.sleep(for: .seconds(1))
        let history = try #require(try status(a)["history"])
        #expect(history["change_sets"] == .integer(2) && history["purged_through"] == .sortedObject([:]), "\(history.text)")

        let off = try DaemonPeer(name: "off", model: ReplicationTests.model, pullInterval: 0.5)
        try off.start(environment: ["FERRY_HISTORY_PURGE_INTERVAL": "0", "FERRY_HISTORY_RETENTION": "0"])
        defer { _ = off.stop() }
        try off.put("[\(ReplicationTests.person("q", 1, "Q"))]")
        try await Task.sleep(for: .seconds(1))
        let never = try #require(try status(off)["history"])
        #expect(never["last_purge"] == .null && never["change_sets"] == .integer(1), "\(never.text)")
    }
}
