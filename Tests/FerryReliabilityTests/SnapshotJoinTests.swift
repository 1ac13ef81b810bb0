import Foundation
import Testing
import FerryTestTraits
import FerryStore
import FerryTestSupport

/// A new peer starts from a snapshot (issue 21, point 3): `ferry snapshot`, `GET /v1/snapshot`,
/// `ferry init --from-snapshot` and `--from-peer`, with real daemons.
@Suite("A new peer starts from a snapshot", .blocking, .serialized)
struct SnapshotJoinTests {
    static let model = SampleModels.path("OrgChart")

    @Test("C starts from A's snapshot over HTTP (and D from a snapshot file): the same objects under the same URIs, then it replicates like any peer")
    func joinFromSnapshot() throws {
        let (a, b) = try DaemonPeer.startedPair(model: Self.model)
        let refs = try a.put(NewPeerTests.people("a", 0..<200))
        try b.put(NewPeerTests.people("b", 0..<50))
        try a.put(#"[{"op":"delete","object":"\#(try #require(refs["a7"]))"}]"#)
        #expect(try DaemonPeer.waitUntil(timeout: 30) { try a.dump() == b.dump() })

        let c = try DaemonPeer(name: "c", model: Self.model, pullInterval: 0.5, maxBackoff: 2)
        let token = c.directory.file("a.token")
        try a.peerToken.write(toFile: token, atomically: true, encoding: .utf8)
        let started = try c.ferry(["init", "--from-peer", a.url, "--token-file", token])
        #expect(started.status == 0, "\(started.standardError)")
        #expect(UUID(uuidString: started.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines)) != nil)
        #expect(started.standardError.contains("started from a snapshot of \(try a.storeIdentifier())"), "\(started.standardError)")
        #expect(try c.storeIdentifier() != a.storeIdentifier())
        #expect(try c.dump() == a.dump(), "every object under its origin URI")
        #expect(try c.vector() == a.vector())
        #expect(try c.integrityCheck() == ["ok"])

        // D from a file written by `ferry snapshot` while A runs.
        let d = try DaemonPeer(name: "d", model: Self.model)
        let file = d.directory.file("a.snapshot")
        let written = try a.ferry(["snapshot", file])
        #expect(written.status == 0, "\(written.standardError)")
        #expect(try d.ferry(["init", "--from-snapshot", file]).status == 0)
        #expect(try d.dump() == a.dump())

        // C joins through B and everyone writes on: they converge, nothing replayed twice. C trusts
        // A's and B's keys as A did (they came with the snapshot), besides its own; B trusts C on first use; A, which
        // never talks to C, pins C's key (trust.keys).
        #expect(try Set(c.ferry(["trust", "list"]).standardOutput
            .split(separator: "\n").compactMap { try? JSONValue.parse(String($0))["origin"]?.stringValue })
                == [a.storeIdentifier(), b.storeIdentifier(), c.storeIdentifier()])
        try c.connect(to: b)
        try b.connect(to: c)
        try a.pin(c)
        _ = b.stop()
        _ = a.stop()
        try a.start()
        try b.start()
        try c.start()
        try c.put(#"[{"op":"update","object":"\#(try #require(refs["a5"]))","values":{"name":"a5 from C"}}]"#)
        try c.put(NewPeerTests.people("c", 0..<10))
        try a.put(NewPeerTests.people("x", 0..<10))
        let converged = try DaemonPeer.waitUntil(timeout: 40) {
            let dumps = try [a.dump(), b.dump(), c.dump()]
            return Set(dumps).count == 1 && dumps[0].split(separator: "\n").count == 199 + 50 + 20
        }
        let counts = try [a, b, c].map { "\($0.name): \(try $0.dump().split(separator: "\n").count)" }
        #expect(converged, "no convergence: \(counts)")
        #expect(try a.dump().contains(#""name":"a5 from C""#))
        for peer in [a, b, c] { #expect(peer.stop() == 0) }
    }

    @Test("A refused snapshot leaves nothing at --store, and says why: wrong token, no daemon, a file that is not a snapshot, an existing store")
    func refusals() throws {
        let (a, b) = try DaemonPeer.startedPair(model: Self.model)
        defer { _ = a.stop(); _ = b.stop() }
        let c = try DaemonPeer(name: "c", model: Self.model)
        let wrong = c.directory.file("wrong.token")
        try "not-the-token".write(toFile: wrong, atomically: true, encoding: .utf8)
        let refused = try c.ferry(["init", "--from-peer", a.url, "--token-file", wrong])
        #expect(refused.status != 0 && refused.standardError.contains("401"), "\(refused.standardError)")
        #expect(!FileManager.default.fileExists(atPath: c.store))
        let refusing = try RefusingPort()
        let nobody = try c.ferry(["init", "--from-peer", refusing.url.absoluteString, "--token-file", wrong])
        #expect(nobody.status != 0 && nobody.standardError.contains("not listening"), "\(nobody.standardError)")
        let junk = c.directory.file("junk")
        try "junk".write(toFile: junk, atomically: true, encoding: .utf8)
        let bad = try c.ferry(["init", "--from-snapshot", junk])
        #expect(bad.status != 0 && bad.standardError.contains("not a SQLite database"), "\(bad.standardError)")
        #expect(!FileManager.default.fileExists(atPath: c.store))
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: c.directory.path).filter { $0.contains("partial") }
        #expect(leftovers.isEmpty, "\(leftovers)")
        let usage = try c.ferry(["init", "--from-peer", a.url])
        #expect(usage.status == 64 && usage.standardError.contains("--token-file"), "\(usage.standardError)")
        #expect(try a.ferry(["init", "--from-snapshot", junk]).standardError.contains("already exists"))
    }
}
