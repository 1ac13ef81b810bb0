import Foundation
import Testing
import FerryTestTraits
import FerryTestSupport

/// The HTTP API under Schemathesis (issue 6, point 5): generated and mangled
/// requests against a real daemon; no 5xx, and every response matches
/// docs/openapi.yaml. `FERRY_SCHEMATHESIS_EXAMPLES` sets the examples per
/// operation (25 by default; `./scripts/schemathesis` alone runs longer).
@Suite("Schemathesis against docs/openapi.yaml", .blocking, .serialized)
struct SchemathesisTests {
    @Test("No 5xx, every response as documented, for generated requests on every operation")
    func schemathesis() throws {
        let examples = ProcessInfo.processInfo.environment["FERRY_SCHEMATHESIS_EXAMPLES"] ?? "25"
        let peer = try DaemonPeer(name: "api", model: SampleModels.path("OrgChart"), pullInterval: 3600)
        try peer.start()
        try peer.put(#"[{"op":"insert","entity":"Person","ref":"a","values":{"id":1,"name":"Ann"}},"#
                     + #"{"op":"insert","entity":"Person","ref":"b","values":{"id":2,"name":"Bob","manager":"a"}}]"#)
        // Change sets from another store of the same model, so generated pushes can apply something new.
        let other = try DaemonPeer(name: "other", model: SampleModels.path("OrgChart"))
        _ = try other.ferry(["init"])
        try other.put(#"[{"op":"insert","entity":"Person","ref":"c","values":{"id":3,"name":"Cid"}}]"#)
        try other.put(#"[{"op":"insert","entity":"Organization","ref":"o","values":{"name":"Org"}}]"#)
        let changeSets = peer.directory.file("changesets.jsonl")
        try (try peer.history() + other.history()).joined(separator: "\n").write(toFile: changeSets, atomically: true, encoding: .utf8)

        let script = SampleModels.repositoryRoot + "/scripts/schemathesis"
        let run = try FerryProcess.run(executable: script, [peer.url, changeSets, examples],
                                       environment: ["FERRY_TOKEN": peer.adminToken], timeout: 1200)
        let text = run.standardOutput + run.standardError
        #expect(run.status == 0, "Schemathesis found problems:\n\(text.suffix(6000))")
        #expect(text.contains("No issues found"), "\(text.suffix(2000))")
        #expect(peer.isRunning, "the daemon ended: \(peer.processState)")
        if let summary = text.split(separator: "\n").first(where: { $0.contains("generated") }) {
            print("schemathesis: \(summary.trimmingCharacters(in: .whitespaces)) (\(examples) examples per operation)")
        }
        #expect(peer.stop() == 0)
    }
}
