import Foundation
import Testing
import FerryTestTraits
import FerryTestSupport

/// HTTPS with a CA and certificate the test makes itself (openssl), checked with curl.
@Suite("TLS", .blocking, .serialized)
struct TLSTests {
    /// Runs a command, returning its status and standard output (standard error after it).
    func run(_ executable: String, _ arguments: [String]) throws -> (status: Int32, output: String) {
        let result = try FerryProcess.run(executable: executable, arguments)
        return (result.status, result.standardOutput + result.standardError)
    }

    /// A CA (or the CA of `caFrom`), and a server certificate for `subjectAltName` signed by it.
    func makeCertificates(in directory: TemporaryDirectory, subjectAltName: String = "IP:127.0.0.1",
                          caFrom existing: (ca: String, certificate: String, key: String)? = nil) throws -> (ca: String, certificate: String, key: String) {
        try TestCertificates.make(in: directory, subjectAltName: subjectAltName, caFrom: existing)
    }

    @Test("With a certificate and key the daemon speaks HTTPS only, and peers verify it")
    func https() throws {
        let directory = TemporaryDirectory()
        let files = try makeCertificates(in: directory)
        let a = try DaemonPeer(name: "a", model: ReplicationTests.model, pullInterval: 3600)
        try a.useTLS(certificate: files.certificate, key: files.key)
        try a.start()
        try a.put("[\(ReplicationTests.person("ann", 1, "Ann"))]")

        let curl = "/usr/bin/curl"
        try #require(FileManager.default.isExecutableFile(atPath: curl), "curl is needed to check the server")
        let health = try run(curl, ["-sS", "--cacert", files.ca, "\(a.url)/healthz"])
        #expect(health.status == 0 && health.output == #"{"status":"ok"}"#, "\(health.output)")
        let state = try run(curl, ["-sS", "--cacert", files.ca, "-H", "Authorization: Bearer \(a.peerToken)", "\(a.url)/v1/state"])
        #expect(state.output.contains(#""vector""#), "\(state.output)")
        // Without the CA, the certificate is refused; plain HTTP gets no answer.
        #expect(try run(curl, ["-sS", "\(a.url)/healthz"]).status != 0)
        #expect(try run(curl, ["-sS", "http://127.0.0.1:\(a.port)/healthz"]).output.contains(#""status":"ok""#) == false)

        // A peer that does not trust the CA (it is not in the system store) refuses to sync, and nothing is applied.
        let b = try DaemonPeer(name: "b", model: ReplicationTests.model, pullInterval: 3600)
        try b.connect(to: a)
        #expect(try FerryProcess.run(["init", "--config", b.configuration]).status == 0)
        let sync = try FerryProcess.run(["sync-now", "--config", b.configuration])
        #expect(sync.status == 1 && sync.standardOutput.contains("a: FAILED (unreachable"), "\(sync.standardOutput) \(sync.standardError)")
        #expect(try b.dump().isEmpty)

        // A daemon that runs but cannot be verified is reported as such: not "not running", and no
        // second, in-process sync beside it.
        let status = try FerryProcess.run(["status", "--config", a.configuration])
        #expect(status.status == 1 && status.standardError.contains("did not answer") && !status.standardOutput.contains("not running"),
                "\(status.standardOutput) \(status.standardError)")
        let syncA = try FerryProcess.run(["sync-now", "--config", a.configuration])
        #expect(syncA.status == 1 && syncA.standardError.contains("did not answer") && !syncA.standardError.contains("syncing in this process"),
                "\(syncA.standardError)")
        #expect(a.stop() == 0)
    }

    @Test("With ca_file, peers whose CA is not in the system store sync both ways over HTTPS; another CA or a file with no certificate is refused")
    func privateCertificateAuthority() throws {
        let directory = TemporaryDirectory()
        let files = try makeCertificates(in: directory)
        let strangerFolder = TemporaryDirectory(prefix: "ferry-other-ca")
        let stranger = try makeCertificates(in: strangerFolder)
        let a = try DaemonPeer(name: "a", model: ReplicationTests.model, pullInterval: 0.5, maxBackoff: 1)
        let b = try DaemonPeer(name: "b", model: ReplicationTests.model, pullInterval: 0.5, maxBackoff: 1)
        try a.useTLS(certificate: files.certificate, key: files.key, caFile: files.ca)
        try b.useTLS(certificate: files.certificate, key: files.key, caFile: files.ca)
        try a.connect(to: b, caFile: files.ca)
        try b.connect(to: a, caFile: files.ca)
        try a.start()
        try b.start()
        try a.put("[\(ReplicationTests.person("ann", 1, "Ann"))]")
        try b.put("[\(ReplicationTests.person("bob", 2, "Bob"))]")
        var dumps = ("", "")
        let converged = try DaemonPeer.waitUntil(timeout: 30) {
            dumps = (try a.dump(), try b.dump())
            return dumps.0 == dumps.1 && dumps.0.contains("Ann") && dumps.0.contains("Bob")
        }
        #expect(converged, "a:\n\(dumps.0)\nb:\n\(dumps.1)\nlog a:\n\(a.logExcerpt())\nlog b:\n\(b.logExcerpt())")
        // With server.tls.ca_file, sync-now and status reach their own HTTPS daemon (not "not running",
        // not a second sync in their own process).
        let status = try FerryProcess.run(["status", "--config", b.configuration])
        #expect(status.status == 0 && status.standardOutput.contains(#""name":"a""#) && !status.standardOutput.contains("not running"),
                "\(status.standardOutput) \(status.standardError)")
        let syncB = try FerryProcess.run(["sync-now", "--config", b.configuration])
        #expect(syncB.status == 0 && syncB.standardOutput.contains("a: ok") && !syncB.standardError.contains("syncing in this process"),
                "\(syncB.standardOutput) \(syncB.standardError)")

        // A peer that names another CA refuses A's certificate, says which ca_file, and applies nothing.
        try expectRefused(by: "c", trusting: stranger.ca, of: a, saying: "ca_file \(stranger.ca)")

        // A ca_file that holds no certificate stops the start with the reason, before anything runs.
        let d = try DaemonPeer(name: "d", model: ReplicationTests.model, pullInterval: 3600)
        try d.connect(to: a, caFile: files.key)
        let run = try FerryProcess.run(["run", "--config", d.configuration])
        #expect(run.status != 0 && run.standardError.contains("peer a: ca_file: the CA file \(files.key) holds no PEM certificate"),
                "\(run.standardError)")
        let missing = try DaemonPeer(name: "e", model: ReplicationTests.model, pullInterval: 3600)
        try missing.connect(to: a, caFile: directory.file("no-such-ca.pem"))
        let sync = try FerryProcess.run(["sync-now", "--config", missing.configuration])
        #expect(sync.status != 0 && sync.standardError.contains("cannot read the CA file \(directory.file("no-such-ca.pem"))"),
                "\(sync.standardError)")
        #expect(b.stop() == 0)

        // The right CA, but a certificate for another host name (A restarted with it): refused.
        #expect(a.stop() == 0)
        let elsewhere = try makeCertificates(in: directory, subjectAltName: "DNS:peer.example", caFrom: files)
        try a.useTLS(certificate: elsewhere.certificate, key: elsewhere.key)
        try a.start()
        try expectRefused(by: "f", trusting: files.ca, of: a, saying: "not for the host")
        #expect(a.stop() == 0)
    }

    /// A new peer `name` with `caFile` for `server` runs `sync-now` (in its own process):
    /// the round fails as unreachable, `saying` why, and nothing is applied.
    func expectRefused(by name: String, trusting caFile: String, of server: DaemonPeer, saying reason: String) throws {
        let peer = try DaemonPeer(name: name, model: ReplicationTests.model, pullInterval: 3600)
        try peer.connect(to: server, caFile: caFile)
        #expect(try FerryProcess.run(["init", "--config", peer.configuration]).status == 0)
        let sync = try FerryProcess.run(["sync-now", "--config", peer.configuration])
        #expect(sync.status == 1 && sync.standardOutput.contains("\(server.name): FAILED (unreachable") && sync.standardOutput.contains(reason),
                "status \(sync.status): \(sync.standardOutput) \(sync.standardError)")
        #expect(try peer.dump().isEmpty)
    }
}
