import Foundation
import Testing
import FerryTestTraits
import FerryStore
import FerrySigning
import FerryTestSupport

/// Hostile pushes (issue 6, point 5), on a real daemon and below HTTP where
/// needed: a body cut off mid-way, change sets naming what the model does not
/// have, change sets of another model version, and a replayed request. None of
/// them applies anything it should not; the daemon keeps running.
/// (Malformed lines, wrong value types, oversized and wrongly encoded bodies:
/// `HTTPAPITests`; generated requests: `SchemathesisTests`.)
@Suite("Hostile pushes", .blocking, .serialized)
struct HostileRequestTests {
    static let model = SampleModels.path("OrgChart")

    /// B's state: its dump and vector, which a refused request must leave as they were.
    struct Snapshot: Equatable {
        let dump: String
        let vector: [String: Int]
        init(_ peer: DaemonPeer) throws {
            dump = try peer.dump()
            vector = try peer.vector()
        }
    }

    func push(_ body: String, to peer: DaemonPeer) throws -> (status: Int, body: String) {
        try FerryProcess.curl("POST", peer.url + "/v1/changesets", token: peer.peerToken, body: body)
    }

    @Test("Cut-off bodies, unknown entities and properties, another model version, and replays apply nothing they should not")
    func hostilePushes() throws {
        // Real change sets from another store of the same model, whose key B pins (trust.keys).
        let source = try DaemonPeer(name: "source", model: Self.model)
        _ = try source.ferry(["init"])
        let b = try DaemonPeer(name: "b", model: Self.model, pullInterval: 3600)
        try b.pin(source)
        try b.start()
        try b.put(#"[{"op":"insert","entity":"Person","ref":"a","values":{"id":1,"name":"Ann"}}]"#)
        for index in 0..<3 { try source.put(#"[{"op":"insert","entity":"Person","ref":"p","values":{"id":\#(10 + index),"name":"P\#(index)"}}]"#) }
        let lines = try source.history()
        try #require(lines.count == 3)
        let before = try Snapshot(b)

        // 1. A body cut off mid-way: the client promises 4 KB, sends two whole change sets and half
        //    of the third, and hangs up. Nothing of it applies, not even the whole lines.
        let connection = try RawConnection(port: b.port)
        let partial = lines[0] + "\n" + lines[1] + "\n" + String(lines[2].prefix(40))
        connection.send("POST /v1/changesets HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(b.peerToken)\r\n"
                        + "Content-Type: application/x-ndjson\r\nContent-Length: \(partial.utf8.count + 2000)\r\n\r\n" + partial)
        connection.close()
        Thread.sleep(forTimeInterval: 0.5)
        #expect(try Snapshot(b) == before, "a cut-off body applied something")
        #expect(b.isRunning)

        // 2. Entities and properties the model does not have (with the right model hash): 400, nothing applied.
        let unknownEntity = lines[0].replacingOccurrences(of: #""entity":"Person""#, with: #""entity":"Spaceship""#)
        let unknownProperty = lines[0].replacingOccurrences(of: #""name":"#, with: #""warpFactor":"#)
        for body in [unknownEntity, lines[1] + "\n" + unknownProperty] {
            let answer = try push(body, to: b)
            #expect(answer.status == 400, "\(answer)")
            #expect(answer.body.contains("Spaceship") || answer.body.contains("warpFactor"), "the error does not name the problem: \(answer.body)")
        }
        #expect(try Snapshot(b) == before, "a refused push applied something")

        // 3. Another model version (signed by its origin, as a store of that version would): kept aside
        //    (waiting), not applied, not lost. The same edit without signing it again is refused (422).
        let sourceKey = try StoreSigningKey(contentsOf: StoreSigningKey.defaultPath(forStore: source.store))
        let edit = { (line: String) in
            line.replacing(#/"model":"[0-9a-f]+"/#, with: #""model":"0000000000000000000000000000000000000000000000000000000000000000""#)
        }
        let altered = edit(lines[0])
        let refusedEdit = try push(altered, to: b)
        #expect(refusedEdit.status == 422 && refusedEdit.body.contains("bad_signature"), "\(refusedEdit)")
        let otherModel = try SignedLines.edited(lines[0], resignedWith: sourceKey, edit)
        let held = try push(otherModel, to: b)
        #expect(held.status == 200 && held.body.contains(#""waiting":1"#) && held.body.contains(#""applied":0"#), "\(held)")
        #expect(try b.dump() == before.dump)
        #expect(try b.ferry(["conflicts", "list"]).standardOutput.contains("made with model"))

        // 4. A replayed request: applied once, then only duplicates.
        let all = lines.joined(separator: "\n")
        let first = try push(all, to: b)
        #expect(first.status == 200 && first.body.contains(#""applied":3"#), "\(first)")
        let afterFirst = try Snapshot(b)
        for _ in 0..<3 {
            let again = try push(all, to: b)
            #expect(again.status == 200 && again.body.contains(#""applied":0"#) && again.body.contains(#""duplicate":3"#), "\(again)")
        }
        #expect(try Snapshot(b) == afterFirst, "a replayed request changed the store")
        #expect(try b.changeSetLog().entries.count == 4)
        #expect(b.stop() == 0)
    }
}
