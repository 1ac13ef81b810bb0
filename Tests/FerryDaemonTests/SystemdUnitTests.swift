import Foundation
import Testing
import FerryTestTraits
import FerryTestSupport

@Suite("systemd unit", .blocking)
struct SystemdUnitTests {
    static let unitPath = SampleModels.repositoryRoot + "/systemd/ferry.service"

    @Test("systemd-analyze verify accepts the daemon's and the relay's units without a single warning",
          arguments: ["ferry.service", "ferry-relay.service"])
    func verify(unitName: String) throws {
        let analyzer = "/usr/bin/systemd-analyze"
        try #require(FileManager.default.isExecutableFile(atPath: analyzer), "systemd-analyze is missing: ./scripts/install-deps --test installs it")
        let directory = TemporaryDirectory()
        // The unit names the installed binary; point it at the one just built so the check can find it.
        let unit = try String(contentsOfFile: SampleModels.repositoryRoot + "/systemd/" + unitName, encoding: .utf8)
            .replacingOccurrences(of: "/usr/local/bin/ferry", with: try FerryProcess.executable().path)
        try unit.write(toFile: directory.file(unitName), atomically: true, encoding: .utf8)
        let result = try FerryProcess.run(executable: analyzer, ["verify", directory.file(unitName)])
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

    @Test("The relay's unit runs ferry relay, restarts always, and is hardened")
    func relayDirectives() throws {
        let lines = Set(try String(contentsOfFile: SampleModels.repositoryRoot + "/systemd/ferry-relay.service", encoding: .utf8)
            .split(separator: "\n").map(String.init))
        for required in ["Restart=always", "User=ferry", "ProtectSystem=strict", "NoNewPrivileges=yes", "ProtectHome=yes", "PrivateTmp=yes",
                         "ExecStart=/usr/local/bin/ferry relay --config /etc/ferry/relay.yaml"] {
            #expect(lines.contains(required), "missing \(required)")
        }
    }
}
