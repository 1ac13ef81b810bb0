import Foundation

/// A certificate authority and server certificates made with openssl for TLS tests.
public enum TestCertificates {
    /// Why the certificates could not be made.
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    /// A CA (or the CA of `caFrom`), and a server certificate for `subjectAltName` signed by it, in `directory`.
    public static func make(in directory: TemporaryDirectory, subjectAltName: String = "IP:127.0.0.1",
                            caFrom existing: (ca: String, certificate: String, key: String)? = nil) throws -> (ca: String, certificate: String, key: String) {
        let openssl = "/usr/bin/openssl"
        guard FileManager.default.isExecutableFile(atPath: openssl) else {
            throw Failure(description: "openssl is needed to make the test's certificates (scripts/install-deps --test installs it)")
        }
        let name = UUID().uuidString.prefix(8)
        let ca = existing?.ca ?? directory.file("ca-\(name).pem")
        let caKey = existing.map { URL(fileURLWithPath: $0.ca).deletingLastPathComponent().appendingPathComponent("ca.key").path } ?? directory.file("ca.key")
        let key = directory.file("server-\(name).key"), request = directory.file("server-\(name).csr"), certificate = directory.file("server-\(name).pem")
        let extensions = directory.file("san-\(name).ext")
        try "subjectAltName=\(subjectAltName)\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n"
            .write(toFile: extensions, atomically: true, encoding: .utf8)
        var steps = [
            ["req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", request, "-subj", "/CN=\(subjectAltName.split(separator: ":").last ?? "")"],
            ["x509", "-req", "-in", request, "-CA", ca, "-CAkey", caKey, "-CAcreateserial", "-out", certificate, "-days", "2", "-extfile", extensions],
        ]
        if existing == nil {
            steps.insert(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", caKey, "-out", ca, "-days", "2", "-subj", "/CN=Ferry Test CA"], at: 0)
        }
        for arguments in steps {
            let result = try FerryProcess.run(executable: openssl, arguments)
            guard result.status == 0 else {
                throw Failure(description: "openssl \(arguments.joined(separator: " ")): \(result.standardOutput)\(result.standardError)")
            }
        }
        return (ca, certificate, key)
    }
}
