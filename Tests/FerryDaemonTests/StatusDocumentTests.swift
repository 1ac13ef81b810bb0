import Foundation
import GRDB
import Logging
import Testing
import FerryTestTraits
import FerryDaemon
import FerryTestSupport

/// The status document (`GET /v1/status`, `ferry status`) always has its
/// counts: read from the store, or `null` with `read_error` saying why — never
/// silently left out.
@Suite("Status document", .blocking)
struct StatusDocumentTests {
    @Test("Counts held change sets; when the store cannot be read, says so in read_error with the counts null")
    func readErrorIsReported() async throws {
        let model = ReplicationTests.model
        let a = try DaemonPeer(name: "a", model: model)
        let b = try DaemonPeer(name: "b", model: model)
        #expect(try a.ferry(["init"]).status == 0)
        try a.put("[\(ReplicationTests.person("ann", 1, "Ann"))]")
        try a.put("[\(ReplicationTests.person("bob", 2, "Bob"))]")
        let lines = try a.history()
        #expect(lines.count == 2)
        try b.pin(a)  // (a is not b's peer: its key is pinned, as for any store b takes change sets of)
        let parts = try Daemon.open(try Configuration.load(path: b.configuration), logger: Logger(label: "test"))

        // A's second change set without its first: held, waiting for it.
        let report = try await parts.endpoint.apply(lines: [try #require(lines.last)])
        #expect(report.waiting == 1)
        let readable = try Self.object(await parts.coordinator.status().json)
        #expect(readable["waiting"] as? Int == 1 && readable["quarantined"] as? Int == 0, "\(readable)")
        #expect(readable["read_error"] is NSNull && readable["vector"] is [String: Any], "\(readable)")
        #expect(readable["store"] as? String == parts.endpoint.storeIdentifier.uuidString)

        // The table of held change sets is gone (a damaged store): the counts cannot be read.
        let queue = try DatabaseQueue(path: b.store)
        try await queue.write { db in try db.execute(sql: "DROP TABLE Z_FERRY_PENDING") }
        let unreadable = try Self.object(await parts.coordinator.status().json)
        #expect(unreadable["waiting"] is NSNull && unreadable["quarantined"] is NSNull, "\(unreadable)")
        let message = try #require(unreadable["read_error"] as? String, "\(unreadable)")
        #expect(message.contains("waiting and quarantined") && message.contains("Z_FERRY_PENDING"), "\(message)")
        // What could still be read is still there.
        #expect(unreadable["vector"] is [String: Any] && unreadable["store"] as? String == parts.endpoint.storeIdentifier.uuidString,
                "\(unreadable)")
    }

    private static func object(_ text: String) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
    }
}
