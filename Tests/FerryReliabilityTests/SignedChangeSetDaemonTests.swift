import Foundation
import Testing
import FerryTestTraits
import FerryStore
import FerrySigning
import FerryTestSupport

/// Trust between peers (issue 23) with real `ferry run` daemons: what a peer holding one of B's
/// tokens can no longer do, key rotation through the CLI, and a store made before keys joining.
@Suite("Signed change sets between daemons", .blocking, .serialized)
struct SignedChangeSetDaemonTests {
    static let model = SampleModels.path("OrgChart")

    func push(_ body: String, to peer: DaemonPeer, token: String? = nil) throws -> (status: Int, body: String) {
        try FerryProcess.curl("POST", peer.url + "/v1/changesets", token: token ?? peer.peerToken, body: body)
    }

    /// The value of one counter line of `peer`'s `/metrics` (0 when absent).
    func counter(_ peer: DaemonPeer, _ line: String) throws -> Int {
        let text = try FerryProcess.curl("GET", peer.url + "/metrics", token: peer.peerToken).body
        let found = text.split(separator: "\n").first { $0.hasPrefix(line + " ") }
        return found.flatMap { Int($0.split(separator: " ").last ?? "") } ?? 0
    }

    @Test("B refuses a third peer's forgeries (as A's next, unsigned, altered, renumbered; pull-only token); none apply; A's real ones reach B; A, B converge")
    func thirdPeerForgeries() throws {
        let (a, b) = try DaemonPeer.startedPair(model: Self.model)
        let refs = try a.put(#"[{"op":"insert","entity":"Person","ref":"ann","values":{"id":1,"name":"Ann"}}]"#)
        #expect(try DaemonPeer.waitUntil(timeout: 30) { try b.dump().contains("Ann") })
        let origin = try #require(UUID(uuidString: a.storeIdentifier()))
        let annURI = try #require(refs["ann"])
        let genuine = try #require(try a.history().first)
        let modelHash = try #require(try JSONValue.parse(genuine)["model"]?.stringValue)
        // M: a store of its own (its own key) holding a peer token of B, as any of B's peers does.
        let m = try DaemonPeer(name: "m", model: Self.model)
        #expect(try m.ferry(["init"]).status == 0)
        let mKey = try StoreSigningKey(contentsOf: StoreSigningKey.defaultPath(forStore: m.store))
        let rename = ChangeSetCodec.encode(ChangeSet(origin: origin, sequence: 2, timestamp: .wall(Date()), modelHash: modelHash, changes: [
            ObjectChange(kind: .update, uri: annURI, entity: "Person", values: ["name": .attribute(.string("Mallory"))]),
        ]))
        let before = try b.dump()

        let forged = try push(SignedLines.signed(rename, with: mKey), to: b)
        #expect(forged.status == 422 && forged.body.contains("bad_signature") && forged.body.contains(origin.uuidString), "\(forged)")
        let unsigned = try push(rename, to: b)
        #expect(unsigned.status == 422 && unsigned.body.contains("(unsigned)"), "\(unsigned)")
        let altered = try push(genuine.replacingOccurrences(of: #""name":"Ann""#, with: #""name":"Mallory""#), to: b)
        #expect(altered.status == 422 && altered.body.contains("bad_signature"), "\(altered)")
        let renumbered = try push(genuine.replacingOccurrences(of: #""seq":1,"#, with: #""seq":2,"#), to: b)
        #expect(renumbered.status == 422 && renumbered.body.contains("bad_signature"), "\(renumbered)")
        let pullOnly = try push(genuine, to: b, token: b.pullToken)
        #expect(pullOnly.status == 403, "\(pullOnly)")

        #expect(try b.dump() == before && !b.dump().contains("Mallory"), "a forgery applied")
        #expect(try b.vector()[origin.uuidString] == 1, "a forgery advanced B's vector")
        #expect(try counter(b, #"ferry_changesets_refused_total{reason="bad_signature",via="push"}"#) == 3)
        #expect(try counter(b, #"ferry_changesets_refused_total{reason="unsigned",via="push"}"#) == 1)
        #expect(!b.log().contains("Mallory"), "a refused body was logged")
        #expect(b.log().contains("refused a change set that does not prove its origin"))

        // A's genuine change set 2 reaches B (it was not taken for a duplicate), and they converge.
        try a.put(#"[{"op":"update","object":"\#(annURI)","values":{"name":"Ann Smith"}}]"#)
        let converged = try DaemonPeer.waitUntil(timeout: 30) { try a.dump() == b.dump() && b.dump().contains("Ann Smith") }
        #expect(converged, "\(b.logExcerpt())")
        for peer in [a, b] { #expect(peer.stop() == 0) }
    }

    @Test("`ferry key rotate`: A signs with its new key; peer B learns it from A; C, talking only to B, with A's first key pinned, learns it through B")
    func rotation() throws {
        let a = try DaemonPeer(name: "a", model: Self.model, pullInterval: 0.5, maxBackoff: 2)
        let b = try DaemonPeer(name: "b", model: Self.model, pullInterval: 0.5, maxBackoff: 2)
        let c = try DaemonPeer(name: "c", model: Self.model, pullInterval: 0.5, maxBackoff: 2)
        try a.connect(to: b)
        try b.connect(to: a)
        try b.connect(to: c)
        try c.connect(to: b)
        #expect(try a.ferry(["init"]).status == 0 && c.ferry(["init"]).status == 0)
        try c.pin(a)
        try a.pin(c)
        for peer in [a, b, c] { try peer.start() }
        try a.put(#"[{"op":"insert","entity":"Person","ref":"p","values":{"id":1,"name":"Before rotation"}}]"#)
        #expect(try DaemonPeer.waitUntil(timeout: 30) { try c.dump().contains("Before rotation") })
        let firstKey = try a.identity().key

        #expect(a.stop() == 0)
        let rotated = try a.ferry(["key", "rotate"])
        #expect(rotated.status == 0, "\(rotated.standardError)")
        let secondKey = rotated.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines)
        let shown = try a.identity().key
        #expect(secondKey != firstKey && shown == secondKey)
        #expect(FileManager.default.fileExists(atPath: StoreSigningKey.defaultPath(forStore: a.store)))
        try a.start()
        try a.put(#"[{"op":"insert","entity":"Person","ref":"p","values":{"id":2,"name":"After rotation"}}]"#)
        let everywhere = try DaemonPeer.waitUntil(timeout: 40) {
            let dumps = try [a.dump(), b.dump(), c.dump()]
            return Set(dumps).count == 1 && dumps[0].contains("After rotation")
        }
        #expect(everywhere, "b:\n\(b.logExcerpt())\nc:\n\(c.logExcerpt())")
        let cKeys = try c.ferry(["trust", "list"]).standardOutput
        #expect(cKeys.contains(secondKey) && cKeys.contains(#""source":"rotation""#), "\(cKeys)")
        for peer in [a, b, c] { #expect(peer.stop() == 0) }
    }

    @Test("A store from before keys: its unsigned change sets refused where unknown origins are, taken where accepted; upgraded, old and new reach its peer")
    func storeMadeBeforeKeys() throws {
        let legacy = try DaemonPeer(name: "legacy", model: Self.model, pullInterval: 0.5, maxBackoff: 2)
        #expect(try legacy.ferry(["init"]).status == 0)
        // No key yet: as a store made by an earlier Ferry (the store was never opened with the key `ferry init` wrote).
        try FileManager.default.removeItem(atPath: StoreSigningKey.defaultPath(forStore: legacy.store))
        try legacy.put(#"[{"op":"insert","entity":"Person","ref":"p","values":{"id":1,"name":"Old one"}}]"#)
        try legacy.put(#"[{"op":"insert","entity":"Person","ref":"p","values":{"id":2,"name":"Old two"}}]"#)
        let lines = try legacy.history()
        #expect(lines.count == 2 && !lines.contains { $0.contains(#""sig":"#) })

        let b = try DaemonPeer(name: "b", model: Self.model, pullInterval: 0.5, maxBackoff: 2)
        try b.start()
        let refused = try push(lines.joined(separator: "\n"), to: b)
        #expect(refused.status == 422 && refused.body.contains("unknown_origin"), "\(refused)")
        #expect(b.stop() == 0)
        b.trustSettings = ["unknown_origins": "accept"]
        try b.start()
        let taken = try push(lines.joined(separator: "\n"), to: b)
        #expect(taken.status == 200 && taken.body.contains(#""applied":2"#), "\(taken)")
        #expect(b.stop() == 0)

        // Upgraded: the daemon makes the store's key (signing from change set 3 on); B, back to refusing
        // unknown origins and now listing it as a peer, trusts its key on first use.
        b.trustSettings = [:]
        try b.connect(to: legacy)
        try legacy.connect(to: b)
        try legacy.start()
        try b.start()
        try legacy.put(#"[{"op":"insert","entity":"Person","ref":"p","values":{"id":3,"name":"New three"}}]"#)
        let converged = try DaemonPeer.waitUntil(timeout: 30) { try b.dump() == legacy.dump() && b.dump().contains("New three") }
        #expect(converged, "\(b.logExcerpt())")
        let history = try legacy.history()
        #expect(history.map { $0.contains(#""sig":"#) } == [false, false, true])
        let published = try legacy.identity()
        #expect(try b.ferry(["trust", "list"]).standardOutput.contains(published.key))
        for peer in [legacy, b] { #expect(peer.stop() == 0) }
    }
}
