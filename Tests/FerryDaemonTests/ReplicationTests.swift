import Foundation
import Testing
import FerryTestTraits
import FerryTestSupport

/// Peer-to-peer replication with real `ferry run` processes on 127.0.0.1, real
/// store files and real HTTP. Serialized: each test starts its own daemons, and
/// the machine has two cores.
@Suite("Replication between ferry run processes", .blocking, .serialized)
struct ReplicationTests {
    static let model = SampleModels.path("OrgChart")

    static func person(_ ref: String, _ id: Int, _ name: String, manager: String? = nil) -> String {
        let managerPart = manager.map { #","manager":"\#($0)""# } ?? ""
        return #"{"op":"insert","entity":"Person","ref":"\#(ref)","values":{"id":\#(id),"name":"\#(name)"\#(managerPart)}}"#
    }

    /// Two peers connected both ways, started.
    func pair(pullInterval: Double = 1) throws -> (DaemonPeer, DaemonPeer) {
        let a = try DaemonPeer(name: "a", model: Self.model, pullInterval: pullInterval)
        let b = try DaemonPeer(name: "b", model: Self.model, pullInterval: pullInterval)
        try a.connect(to: b)
        try b.connect(to: a)
        try a.start()
        try b.start()
        return (a, b)
    }

    func converged(_ peers: DaemonPeer..., containing count: Int) throws -> Bool {
        let dumps = try peers.map { try $0.dump() }
        return Set(dumps).count == 1 && dumps[0].split(separator: "\n").count == count
    }

    @Test("Two peers writing both ways converge without anyone asking")
    func twoWay() throws {
        let (a, b) = try pair(pullInterval: 60)  // pushes alone must carry the changes
        try a.put("[\(Self.person("john", 1, "John")), \(Self.person("jane", 2, "Jane", manager: "john"))]")
        try b.put("[\(Self.person("bill", 3, "Bill"))]")
        let done = try DaemonPeer.waitUntil(timeout: 20) { try converged(a, b, containing: 3) }
        #expect(done, "a:\n\((try? a.dump()) ?? "")\nb:\n\((try? b.dump()) ?? "")\nlog a:\n\(a.log())\nlog b:\n\(b.log())")
        // Each store holds each change set once: its own and the other's.
        for peer in [a, b] {
            let history = try peer.ferry(["history"]).standardOutput.split(separator: "\n")
            #expect(history.count == 2 && Set(history).count == 2)
        }
        #expect(a.stop() == 0)
        #expect(b.stop() == 0)
    }

    @Test("In a line A–B–C, A's changes reach C through B, and nothing comes back to A as new")
    func line() throws {
        let a = try DaemonPeer(name: "a", model: Self.model)
        let b = try DaemonPeer(name: "b", model: Self.model)
        let c = try DaemonPeer(name: "c", model: Self.model)
        try a.connect(to: b)
        try b.connect(to: a)
        try b.connect(to: c)
        try c.connect(to: b)
        // A and C never talk: each pins the other's key (B trusts both on first use, as they trust B).
        #expect(try a.ferry(["init"]).status == 0 && c.ferry(["init"]).status == 0)
        try a.pin(c)
        try c.pin(a)
        for peer in [a, b, c] { try peer.start() }
        try a.put("[\(Self.person("ann", 1, "Ann"))]")
        try c.put("[\(Self.person("cid", 3, "Cid"))]")
        let done = try DaemonPeer.waitUntil(timeout: 30) { try converged(a, b, c, containing: 2) }
        #expect(done, "a:\n\((try? a.dump()) ?? "")\nc:\n\((try? c.dump()) ?? "")\nlog b:\n\(b.log())")
        for peer in [a, b, c] {
            let history = try peer.ferry(["history"]).standardOutput.split(separator: "\n")
            #expect(history.count == 2 && Set(history).count == 2, "\(peer.name): \(history.count) change sets")
        }
        // A took in exactly C's change set besides its own: nothing of its own came back as new.
        let state = try #require(try JSONSerialization.jsonObject(with: Data(FerryProcess.run(["state", "--store", a.store]).standardOutput.utf8))
                                    as? [String: Any])
        let vector = try #require(state["vector"] as? [String: Int])
        #expect(vector.count == 2 && vector.values.allSatisfy { $0 == 1 }, "\(vector)")
    }

    @Test("sync-now goes through the running daemon, and runs in-process when none runs, leaving the store as one file")
    func syncNow() throws {
        let (a, b) = try pair(pullInterval: 3600)
        b.stop()  // B is down: A's push fails and backs off
        // A daemon stopped by SIGTERM closes its store: the file alone holds it (its log was left behind before).
        #expect(!FileManager.default.fileExists(atPath: b.store + "-wal"), "the stopped daemon left the store's write-ahead log")
        try a.put("[\(Self.person("ann", 1, "Ann"))]")
        // With no daemon for B, `sync-now` on B syncs in its own process.
        let offline = try FerryProcess.run(["sync-now", "--config", b.configuration])
        #expect(offline.status == 0, "\(offline.standardError)")
        #expect(offline.standardError.contains("no daemon answers"))
        #expect(offline.standardOutput.contains("a: ok; pulled 1 applied"), "\(offline.standardOutput)")
        #expect(try converged(a, b, containing: 1))
        // Done in its own process, it leaves B's store as one file; so does `status` with no daemon.
        #expect(!FileManager.default.fileExists(atPath: b.store + "-wal"), "sync-now left the store's write-ahead log")
        let localStatus = try FerryProcess.run(["status", "--config", b.configuration])
        #expect(localStatus.status == 0 && localStatus.standardOutput.contains(#""daemon":"not running""#), "\(localStatus)")
        #expect(!FileManager.default.fileExists(atPath: b.store + "-wal"), "status left the store's write-ahead log")

        // With B's daemon running, `sync-now` asks it (an admin request) and prints its per-peer answer.
        try b.start()
        try a.put("[\(Self.person("abe", 2, "Abe"))]")
        let online = try FerryProcess.run(["sync-now", "--config", b.configuration, "--peer", "a"])
        #expect(online.status == 0, "\(online.standardError)")
        #expect(!online.standardError.contains("no daemon answers"))
        #expect(online.standardOutput.hasPrefix("a: ok;"), "\(online.standardOutput)")
        #expect(try DaemonPeer.waitUntil(timeout: 10) { try converged(a, b, containing: 2) })

        let unknown = try FerryProcess.run(["sync-now", "--config", b.configuration, "--peer", "nobody"])
        #expect(unknown.status != 0 && unknown.standardError.contains("no peer named 'nobody'"))

        let status = try FerryProcess.run(["status", "--config", b.configuration])
        #expect(status.status == 0)
        #expect(status.standardOutput.contains(#""state":"idle""#) && status.standardOutput.contains(#""retry_at":null"#), "\(status.standardOutput)")
        #expect(status.standardOutput.contains(#""name":"a""#) && status.standardOutput.contains(#""last_success":"20"#), "\(status.standardOutput)")
        #expect(status.standardOutput.contains(#""quarantined":0"#) && status.standardOutput.contains(#""waiting":0"#))
    }

    @Test("A peer down for a while catches up when it comes back; a crashed peer resumes")
    func downAndBack() throws {
        let (a, b) = try pair()
        b.kill()  // a crash, not a clean stop
        var operations: [String] = []
        for index in 0..<300 { operations.append(Self.person("p\(index)", index, "P\(index)", manager: index > 0 ? "p\(index / 10)" : nil)) }
        try a.put("[" + operations.joined(separator: ",") + "]")
        for index in 300..<310 { try a.put("[\(Self.person("q\(index)", index, "Q\(index)"))]") }
        try b.start()
        // Kill B again in the middle of its catch-up, then let it finish.
        Thread.sleep(forTimeInterval: 0.3)
        b.kill()
        try b.start()
        let done = try DaemonPeer.waitUntil(timeout: 30) { try converged(a, b, containing: 310) }
        #expect(done, "log b:\n\(b.log())")
        let history = try b.ferry(["history"]).standardOutput.split(separator: "\n")
        #expect(history.count == 11 && Set(history).count == 11, "every change set once")
        let check = try b.ferry(["conflicts", "list"])
        #expect(check.status == 0 && check.standardOutput.isEmpty, "nothing quarantined or waiting: \(check.standardOutput)")
    }

    @Test("A wrong token is refused with 401, reported, and nothing is applied")
    func wrongToken() throws {
        let a = try DaemonPeer(name: "a", model: Self.model, pullInterval: 3600)
        let b = try DaemonPeer(name: "b", model: Self.model, pullInterval: 3600)
        try a.connect(to: b, token: "not-the-right-token-at-all-0000")
        try b.connect(to: a)
        try a.start()
        try b.start()
        try a.put("[\(Self.person("ann", 1, "Ann"))]")
        let result = try FerryProcess.run(["sync-now", "--config", a.configuration])
        #expect(result.status == 1)
        // The failed session waits out its backoff, and says so.
        let status = try FerryProcess.run(["status", "--config", a.configuration]).standardOutput
        // (It retries on its own meanwhile, so a status read at that moment says syncing.)
        #expect((status.contains(#""state":"backing_off""#) || status.contains(#""state":"syncing""#)) && !status.contains(#""consecutive_failures":0"#),
                "\(status)")
        #expect(result.standardOutput.contains("b: FAILED") && result.standardOutput.contains("401"), "\(result.standardOutput)")
        #expect(try b.dump().isEmpty)
        // The token never reaches a log, on either side.
        for peer in [a, b] {
            #expect(!peer.log().contains("not-the-right-token"))
            #expect(!peer.log().contains(peer.peerToken) && !peer.log().contains(peer.adminToken))
        }
    }

    @Test("A peer with another model version holds the change sets, reports them, and loses nothing")
    func otherModel() throws {
        let directory = TemporaryDirectory()
        let changed = directory.file("OrgChart2.xcdatamodel")
        try FileManager.default.createDirectory(atPath: changed, withIntermediateDirectories: true)
        let original = try String(contentsOfFile: Self.model + "/OrgChart.xcdatamodel/contents", encoding: .utf8)
        try original.replacingOccurrences(of: #"<attribute name="name" optional="YES" attributeType="String"/>"#,
                                          with: #"<attribute name="name" optional="YES" attributeType="String"/>"# +
                                              #"<attribute name="nickname" optional="YES" attributeType="String"/>"#)
            .write(toFile: changed + "/contents", atomically: true, encoding: .utf8)
        let a = try DaemonPeer(name: "a", model: Self.model, pullInterval: 3600)
        let b = try DaemonPeer(name: "b", model: changed, pullInterval: 3600)
        try a.connect(to: b)
        try b.connect(to: a)
        try a.start()
        try b.start()
        try a.put("[\(Self.person("ann", 1, "Ann"))]")
        _ = try FerryProcess.run(["sync-now", "--config", a.configuration])
        let status = try FerryProcess.run(["status", "--config", b.configuration]).standardOutput
        #expect(status.contains(#""waiting":1"#), "\(status)")
        #expect(try b.dump().isEmpty)
        let held = try b.ferry(["conflicts", "list"]).standardOutput
        #expect(held.contains(#""status":"waiting""#) && held.contains("made with model"), "\(held)")
        // Still held after a restart: kept in the store, not in memory.
        #expect(b.stop() == 0)
        try b.start()
        // Polled, for a daemon that has just started; every answer has the counts, or
        // read_error saying why not (the last answer is printed if none says 1).
        var answer = ""
        let counted = try DaemonPeer.waitUntil(timeout: 10) {
            answer = try FerryProcess.run(["status", "--config", b.configuration]).standardOutput
            return answer.contains(#""waiting":1"#)
        }
        #expect(counted, "\(answer)")
        #expect(try b.ferry(["conflicts", "list"]).standardOutput.contains("made with model"))
    }
}
