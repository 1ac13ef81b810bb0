import Foundation
import Testing
import FerryTestSupport

@Suite("systemd unit")
struct SystemdUnitTests {
    static let unitPath = SampleModels.repositoryRoot + "/systemd/ferry.service"

    @Test("systemd-analyze verify accepts systemd/ferry.service without a single warning")
    func verify() throws {
        let analyzer = "/usr/bin/systemd-analyze"
        try #require(FileManager.default.isExecutableFile(atPath: analyzer), "systemd-analyze is missing: ./scripts/install-deps --test installs it")
        let directory = TemporaryDirectory()
        // The unit names the installed binary; point it at the one just built so the check can find it.
        let unit = try String(contentsOfFile: Self.unitPath, encoding: .utf8)
            .replacingOccurrences(of: "/usr/local/bin/ferry", with: try FerryProcess.executable().path)
        try unit.write(toFile: directory.file("ferry.service"), atomically: true, encoding: .utf8)
        let result = try FerryProcess.run(executable: analyzer, ["verify", directory.file("ferry.service")])
        let text = result.standardOutput + result.standardError
        #expect(result.status == 0, "\(text)")
        // systemd-analyze exits 0 for unknown keys and bad values too (it ignores them), so any output is a failure.
        #expect(text.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty, "\(text)")
    }

    @Test("The unit runs as a notify service with a watchdog, restarts on failure, and is hardened")
    func directives() throws {
        let lines = Set(try String(contentsOfFile: Self.unitPath, encoding: .utf8).split(separator: "\n").map(String.init))
        for required in ["Type=notify", "WatchdogSec=30", "Restart=on-failure", "StateDirectory=ferry", "User=ferry",
                         "ProtectSystem=strict", "NoNewPrivileges=yes", "ProtectHome=yes", "PrivateTmp=yes",
                         "ExecStart=/usr/local/bin/ferry run --config /etc/ferry/ferry.yaml"] {
            #expect(lines.contains(required), "missing \(required)")
        }
    }
}
