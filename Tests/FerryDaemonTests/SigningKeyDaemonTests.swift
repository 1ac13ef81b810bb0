import Foundation
import FerryStore
import FerrySigning
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
import FerryTestTraits
import FerrySync
import FerryTestSupport

/// A daemon and its store's signing key (issue 23, point 1).
@Suite("A daemon's signing key", .blocking)
struct SigningKeyDaemonTests {
    @Test("A keyless store gets a signing key at start (owner-only, public half logged); GET /v1/state, ferry state show it; a key others may read stops start")
    func madeAtStart() async throws {
        let peer = try DaemonPeer(name: "keyed", model: SampleModels.path("OrgChart"))
        let keyFile = peer.store + ".key"
        #expect(!FileManager.default.fileExists(atPath: keyFile))
        try peer.start()
        let publicKey = try StoreSigningKey(contentsOf: keyFile).publicKey
        #expect(try FileManager.default.attributesOfItem(atPath: keyFile)[.posixPermissions] as? Int == 0o600)
        #expect(peer.log().contains("made the store's signing key") && peer.log().contains(publicKey))
        let secret = try String(contentsOfFile: keyFile, encoding: .utf8).split(separator: " ").last
            .map { $0.trimmingCharacters(in: .whitespacesAndNewlines) } ?? ""
        #expect(!secret.isEmpty && !peer.log().contains(secret), "the private key is never logged")
        var request = URLRequest(url: try #require(URL(string: peer.url + "/v1/state")))
        request.setValue("Bearer \(peer.pullToken)", forHTTPHeaderField: "Authorization")
        let (data, _) = try await URLSession.shared.data(for: request)
        let state = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        #expect(state["public_key"] as? String == publicKey)
        let printed = try FerryProcess.run(["state", "--store", peer.store])
        #expect(printed.standardOutput.contains(#""public_key":"\#(publicKey)""#))
        // A token used beyond its role is refused, counted in /metrics and logged without the token.
        var pull = URLRequest(url: try #require(URL(string: peer.url + "/v1/changesets")))
        pull.setValue("Bearer \(peer.pushToken)", forHTTPHeaderField: "Authorization")
        let (_, refused) = try await URLSession.shared.data(for: pull)
        #expect((refused as? HTTPURLResponse)?.statusCode == 403)
        var metrics = URLRequest(url: try #require(URL(string: peer.url + "/metrics")))
        metrics.setValue("Bearer \(peer.adminToken)", forHTTPHeaderField: "Authorization")
        let (text, _) = try await URLSession.shared.data(for: metrics)
        #expect(String(decoding: text, as: UTF8.self).contains(#"ferry_requests_forbidden_total{reason="role"} 1"#))
        #expect(peer.log().contains("refused a request beyond its token's role") && !peer.log().contains(peer.pushToken))
        #expect(peer.stop() == 0)
        // The same key the next time; and a key others may read is refused, naming the fix.
        try peer.start()
        #expect(try StoreSigningKey(contentsOf: keyFile).publicKey == publicKey)
        #expect(peer.stop() == 0)
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: keyFile)
        #expect(throws: (any Error).self) { try peer.start() }
        #expect(peer.log().contains("chmod 600") && !peer.log().contains(secret))
    }
}
