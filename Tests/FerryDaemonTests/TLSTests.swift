import Foundation
import Testing
import FerryTestSupport

/// HTTPS with a CA and certificate the test makes itself (openssl), checked with curl.
@Suite("TLS", .serialized)
struct TLSTests {
    /// Runs a command, returning its status and standard output (standard error after it).
    func run(_ executable: String, _ arguments: [String]) throws -> (status: Int32, output: String) {
        let result = try FerryProcess.run(executable: executable, arguments)
        return (result.status, result.standardOutput + result.standardError)
    }

    /// A CA, and a server certificate for 127.0.0.1 signed by it.
    func makeCertificates(in directory: TemporaryDirectory) throws -> (ca: String, certificate: String, key: String) {
        let openssl = "/usr/bin/openssl"
        try #require(FileManager.default.isExecutableFile(atPath: openssl), "openssl is needed to make the test's certificates")
        let ca = directory.file("ca.pem"), caKey = directory.file("ca.key")
        let key = directory.file("server.key"), request = directory.file("server.csr"), certificate = directory.file("server.pem")
        let extensions = directory.file("san.ext")
        try "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n"
            .write(toFile: extensions, atomically: true, encoding: .utf8)
        for arguments in [
            ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", caKey, "-out", ca, "-days", "2", "-subj", "/CN=Ferry Test CA"],
            ["req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", request, "-subj", "/CN=127.0.0.1"],
            ["x509", "-req", "-in", request, "-CA", ca, "-CAkey", caKey, "-CAcreateserial", "-out", certificate, "-days", "2", "-extfile", extensions],
        ] {
            let result = try run(openssl, arguments)
            try #require(result.status == 0, "openssl \(arguments.joined(separator: " ")): \(result.output)")
        }
        return (ca, certificate, key)
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
}
