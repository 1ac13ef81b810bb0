import Foundation
import Testing
import FerryTestTraits
import FerryTestSupport

/// Credentials (issue 6, point 6): a missing, wrong or peer-level token on an
/// admin route gets 401/403 and changes nothing; a push without a valid token
/// applies nothing; and no token ever reaches a log, even at trace level.
@Suite("Credentials", .blocking, .serialized)
struct CredentialTests {
    static let model = SampleModels.path("OrgChart")

    @Test("Missing, wrong and peer tokens on admin routes: 401/403, nothing done; pushes without a valid token apply nothing; no token in any log line")
    func credentials() throws {
        // Trace level: the most a daemon ever logs.
        let (a, b) = try DaemonPeer.startedPair(model: Self.model, environment: ["LOG_LEVEL": "trace"])
        try a.put(#"[{"op":"insert","entity":"Person","ref":"p","values":{"id":1,"name":"Ann"}}]"#)
        #expect(try DaemonPeer.waitUntil(timeout: 20) { try a.dump() == b.dump() })

        let wrong = "wrong-token-" + UUID().uuidString
        let before = try b.dump()
        let vector = try b.vector()
        // The admin route: a sync round.
        #expect(try FerryProcess.curl("POST", b.url + "/v1/sync", token: nil).status == 401)
        #expect(try FerryProcess.curl("POST", b.url + "/v1/sync", token: wrong).status == 401)
        let asPeer = try FerryProcess.curl("POST", b.url + "/v1/sync", token: b.peerToken)
        #expect(asPeer.status == 403, "\(asPeer)")
        #expect(!asPeer.body.contains(b.peerToken) && !asPeer.body.contains(b.adminToken))
        // A push with a change set made elsewhere: only a valid token gets it applied.
        let changeSet = try a.history().first ?? ""
        for token in [nil, wrong, b.peerToken.dropLast() + "x"] as [String?] {
            let answer = try FerryProcess.curl("POST", b.url + "/v1/changesets", token: token, body: changeSet)
            #expect(answer.status == 401, "\(answer)")
            // No detail: the same answer whatever was wrong with the token.
            #expect(answer.body == #"{"error":{"message":"unauthorized"}}"#, "\(answer.body)")
        }
        #expect(try b.dump() == before && b.vector() == vector, "a refused request changed the store")
        // Bearer tokens are compared whole: a prefix of the right one is wrong.
        #expect(try FerryProcess.curl("GET", b.url + "/v1/state", token: String(b.adminToken.prefix(10))).status == 401)
        // The right admin token works.
        #expect(try FerryProcess.curl("POST", b.url + "/v1/sync", token: b.adminToken).status == 200)
        let syncNow = try FerryProcess.run(["sync-now", "--config", b.configuration])
        let status = try FerryProcess.run(["status", "--config", b.configuration])
        #expect(syncNow.status == 0 && status.status == 0)

        #expect(a.stop() == 0 && b.stop() == 0)
        let everything = [a.log(), b.log(), syncNow.standardOutput, syncNow.standardError, status.standardOutput, status.standardError]
        let lines = everything.joined(separator: "\n").split(separator: "\n")
        #expect(lines.count > 20, "the daemons logged almost nothing at trace level: \(lines.count) lines")
        for token in [a.peerToken, a.adminToken, b.peerToken, b.adminToken, wrong] {
            let leaks = lines.filter { $0.contains(token) }
            #expect(leaks.isEmpty, "a token reached the logs: \(leaks.prefix(2))")
        }
        #expect(!lines.contains { $0.localizedCaseInsensitiveContains("bearer ") }, "an Authorization header was logged")
        print("credentials: \(lines.count) log and output lines checked, no token in any")
    }
}
