import Foundation
import Testing
import FerryTestTraits
import FerryTestSupport
import FerryStore
import FerrySQLite
import GRDB

/// Change sets of many megabytes (one save of many objects) between `ferry run` processes: served
/// a piece at a time however slowly they are read, and, when larger than a peer takes in a push,
/// named as such instead of retried without a word.
@Suite("Large change sets", .blocking, .serialized)
struct LargeChangeSetTests {
    static let model = SampleModels.path("OrgChart")

    @Test("Ten clients that ask for one large change set and never read it: the daemon holds less than a copy of it for each")
    func greedyPullsOfOneLargeChangeSet() throws {
        let a = try DaemonPeer(name: "a", model: Self.model, pullInterval: 3600)
        try a.start()
        defer { _ = a.stop() }
        // One change set of some 14 MB of text (100,000 objects in one save); stored compressed, some 20 times smaller.
        _ = try a.put(DaemonPeer.people("big-", 0..<100_000))
        let measured = try UnreadPulls.measure(port: a.port, token: a.peerToken) { a.residentMemory }
        let (answer, baseline, stalled, growth) = (measured.answerBytes, measured.baseline, measured.stalled, measured.growth)
        #expect(answer > 12 << 20, "the warm-up pull got \(answer) bytes")
        // Each was answered, and the daemon is now waiting for it to read.
        for head in measured.heads {
            #expect(head.hasPrefix("HTTP/1.1 200") && head.contains(#""changes""#), "a greedy pull was not answered: \(head.prefix(200))")
        }
        // Built whole, each unread answer held the line about twice (27.9 MB each for this 14.1 MB change
        // set, the build before pieces). A piece at a time, each holds the stored form, a piece, and the
        // pieces it wrote before its connection stopped taking them: 2.1–3.6 MB each when the daemon's event
        // loops keep up, 9.2 MB each once in a full run of the suite (cause not found: busy
        // loops at a higher priority than the test's did not reproduce it; docs/RELIABILITY.md §10).
        #expect(growth < 10 * answer, "memory grew by \(growth >> 10) KiB with 10 unread pulls of a \(answer >> 10) KiB change set")
        print("greedy pulls of one large change set: resident memory \(baseline >> 20) MiB before, " +
              "\(stalled >> 20) MiB with 10 unread pulls of \(answer >> 10) KiB (+\(growth >> 10) KiB, \((growth / 10) >> 10) KiB each)")
        #expect(a.isRunning)
    }

    @Test("`ferry history` of a history of large change sets writes each line as it reads it: it holds about a piece of one, not the history")
    func historyWrittenAsRead() throws {
        let a = try DaemonPeer(name: "a", model: Self.model, pullInterval: 3600)
        #expect(try a.ferry(["init"]).status == 0)
        // Eight change sets of some 5.8 MB of text each (100 objects a save with a name of 58,000
        // characters: few objects, so that making them is quick), between small ones of one object.
        for part in 0..<8 {
            _ = try a.put(DaemonPeer.longNamedPeople(part * 1000 ..< part * 1000 + 100, mark: part))
            _ = try a.put(#"[{"op":"insert","entity":"Person","ref":"s","values":{"id":\#(90_000 + part),"name":"small \#(part)"}}]"#)
        }
        // What the history holds, read whole by the store in this process.
        let expected = try SQLiteStore(path: a.store, model: SampleModels.load("OrgChart"), options: .init(readOnly: true)).changeSetLines()
        let total = expected.reduce(0) { $0 + $1.utf8.count + 1 }
        #expect(expected.count == 16 && total > 44 << 20, "\(expected.count) change sets, \(total) bytes")
        let vector = try #require(String(data: JSONSerialization.data(withJSONObject: a.vector()), encoding: .utf8))

        // The same command with nothing to print: the process's own size, the store opened.
        let nothing = try FerryProcess.runMeasuringPeakMemory(["history", "--after", vector, "--store", a.store, "--model", a.model])
        #expect(nothing.result.status == 0 && nothing.result.standardOutput.isEmpty, "\(nothing.result.standardError)")
        let all = try FerryProcess.runMeasuringPeakMemory(["history", "--store", a.store, "--model", a.model])
        #expect(all.result.status == 0, "\(all.result.standardError)")
        #expect(all.result.standardOutput == expected.map { $0 + "\n" }.joined(), "ferry history printed other lines than the store holds")
        let growth = all.peakResidentMemory - nothing.peakResidentMemory
        print("ferry history: peak resident memory \(nothing.peakResidentMemory >> 20) MiB printing nothing, " +
              "\(all.peakResidentMemory >> 20) MiB printing \(total >> 20) MiB of change sets (+\(growth >> 10) KiB)")
        // Read whole before it printed (the build before), the history was held at least once, and each
        // large line briefly twice more while it was inflated; written as read, a large line's stored
        // form (some 20 times smaller) and a piece of it.
        #expect(nothing.peakResidentMemory > 0 && growth < total / 4, "ferry history's peak grew by \(growth >> 20) MiB printing \(total >> 20) MiB")

        // The last large change set damaged in the file: the lines before it are written whole, then the
        // command fails, saying so, with a non-zero status.
        try DatabaseQueue(path: a.store).write { db in
            try db.execute(sql: "UPDATE Z_FERRY_CHANGESET SET Z_BODY = substr(Z_BODY, 1, length(Z_BODY) / 2) WHERE Z_SEQ = 15")
        }
        let damaged = try a.ferry(["history"])
        #expect(damaged.status != 0 && damaged.standardError.contains("the store file is damaged"), "\(damaged.status): \(damaged.standardError)")
        let before = expected.prefix(14).map { $0 + "\n" }.joined()
        #expect(damaged.standardOutput.hasPrefix(before) && damaged.standardOutput.utf8.count < total,
                "ferry history of a damaged store printed \(damaged.standardOutput.utf8.count) bytes")
    }

    @Test("A backlog of large change sets is pushed a request at a time, each read as it goes: the pusher holds about one of them, not the backlog")
    func pushedBacklog() throws {
        let a = try DaemonPeer(name: "a", model: Self.model, pullInterval: 3600, maxBackoff: 1)
        let b = try DaemonPeer(name: "b", model: Self.model, pullInterval: 3600)
        // A pushes to B; B has no peer, so it takes A's change sets only as A pushes them (A's key pinned).
        try a.connect(to: b)
        #expect(try a.ferry(["init"]).status == 0)
        try b.pin(a)
        // Six change sets of some 5.8 MB of text each, each over a push's 4 MiB: 100 objects a save with
        // a name of 58,000 characters (few objects, so that making and replaying them is quick).
        for part in 0..<6 { _ = try a.put(DaemonPeer.longNamedPeople(0..<100, mark: part)) }
        let lines = try a.history()
        let total = lines.reduce(0) { $0 + $1.utf8.count }
        #expect(lines.count == 6 && total > 30 << 20, "\(lines.count) change sets, \(total) bytes")
        try a.start()
        defer { _ = a.stop(); _ = b.stop() }
        // B is not running yet: A's rounds fail before they read a change set. Its peak so far is the baseline.
        Thread.sleep(forTimeInterval: 1.5)
        let baseline = try #require(a.peakResidentMemory)
        try b.start()
        let origin = try a.storeIdentifier()
        let pushed = try DaemonPeer.waitUntil(timeout: 60) { try b.changeSetCount(of: origin) == 6 }
        #expect(pushed, "B did not get A's 6 change sets: \(a.logExcerpt())")
        let growth = try #require(a.peakResidentMemory) - baseline
        print("pushed backlog: A's peak resident memory grew by \(growth >> 20) MiB while it pushed 6 change sets of \(total >> 20) MiB in all")
        // Read whole on each round (the build before), the backlog alone is `total` (106–107 MiB of growth
        // for these 33 MiB); read as it goes, a change set and its request (18 MiB); each sent a piece at a
        // time from its stored form, 2 MiB.
        #expect(growth < total, "A's peak grew by \(growth >> 20) MiB pushing \(total >> 20) MiB of change sets")
        #expect(try a.dump() == b.dump())
    }

    @Test("A change set over a push request is pushed to each peer as it is read from the store, in pieces: the pusher holds a small part per peer, not copies")
    func largeChangeSetPushedInPieces() throws {
        let a = try DaemonPeer(name: "a", model: Self.model, pullInterval: 3600, maxBackoff: 1)
        let b = try DaemonPeer(name: "b", model: Self.model, pullInterval: 3600)
        let c = try DaemonPeer(name: "c", model: Self.model, pullInterval: 3600)
        // A pushes to B and C; they have no peer, so they take A's change set only as A pushes it (A's key
        // pinned), and take bodies up to 64 MiB.
        try a.connect(to: b)
        try a.connect(to: c)
        #expect(try a.ferry(["init"]).status == 0)
        for peer in [b, c] {
            try peer.pin(a)
            peer.serverSettings = ["max_body_bytes": "67108864"]
        }
        // One change set of some 35 MB of text: 600 objects with a name of 58,000 characters (few objects,
        // so that making and replaying it is quick).
        let name = String(repeating: "abcdefghij", count: 5_800)
        _ = try a.put("[" + (0..<600).map { #"{"op":"insert","entity":"Person","ref":"p\#($0)","values":{"id":\#($0),"name":"\#($0)\#(name)"}}"# }
            .joined(separator: ",") + "]")
        let lines = try a.history()
        let size = lines.first?.utf8.count ?? 0
        #expect(lines.count == 1 && size > 32 << 20, "\(lines.count) change sets, \(size) bytes")
        try a.start()
        defer { _ = a.stop(); _ = b.stop(); _ = c.stop() }
        // B and C are not running yet: A's rounds fail before they read the change set. Its peak so far is the baseline.
        Thread.sleep(forTimeInterval: 1.5)
        let baseline = try #require(a.peakResidentMemory)
        try b.start()
        try c.start()
        let origin = try a.storeIdentifier()
        let pushed = try DaemonPeer.waitUntil(timeout: 90) { try b.changeSetCount(of: origin) == 1 && c.changeSetCount(of: origin) == 1 }
        #expect(pushed, "B and C did not both get A's change set: \(a.logExcerpt())")
        let growth = try #require(a.peakResidentMemory) - baseline
        print("large push: A's peak resident memory grew by \(growth >> 10) KiB while it pushed a change set of \(size >> 20) MiB to two peers")
        // Read whole (the build before), the line and its request body are held for each peer: more than
        // the change set's size; read a piece at a time, the store's compressed form and a piece per peer.
        #expect(growth < size / 4, "A's peak grew by \(growth >> 20) MiB pushing a change set of \(size >> 20) MiB to two peers")
        #expect(try a.dump() == b.dump() && a.dump() == c.dump())
        #expect(try b.changeSetLog().entries.count == 1 && c.changeSetLog().entries.count == 1, "a peer took the change set other than once")
    }

    @Test("A large change set damaged in the pusher's store is met while its push is sent: the pusher says so, the peer applies nothing and keeps running")
    func damagedLargeChangeSetPushed() throws {
        let a = try DaemonPeer(name: "a", model: Self.model, pullInterval: 3600, maxBackoff: 1)
        let b = try DaemonPeer(name: "b", model: Self.model, pullInterval: 3600)
        try a.connect(to: b)
        #expect(try a.ferry(["init"]).status == 0)
        try b.pin(a)
        // One change set of some 2.3 MB of text (16,000 objects), its stored form then cut in half, as a
        // failing disk would leave it: its first pieces inflate, the rest is missing.
        _ = try a.put(DaemonPeer.people("big-", 0..<16_000))
        try DatabaseQueue(path: a.store).write { db in
            try db.execute(sql: "UPDATE Z_FERRY_CHANGESET SET Z_BODY = substr(Z_BODY, 1, length(Z_BODY) / 2) WHERE Z_SEQ = 1")
        }
        try b.start()
        try a.start()
        defer { _ = a.stop(); _ = b.stop() }
        let lastError = try a.waitForSyncError(containing: "the store file is damaged")
        print("damaged large push: A's status says: \(lastError)")
        #expect(lastError.contains("does not inflate") || lastError.contains("ends after"), "\(lastError)")
        // Counted as this machine's store failing to give what it sends, not as a pull's failure nor as the peer's answer.
        let metrics = try FerryProcess.curl("GET", a.url + "/metrics", token: a.adminToken).body
        #expect(metrics.contains(#"ferry_store_errors_total{operation="send"}"#) && !metrics.contains(#"ferry_store_errors_total{operation="pull"}"#),
                "\(metrics.split(separator: "\n").filter { $0.contains("ferry_store_errors") })")
        #expect(try b.changeSetCount(of: a.storeIdentifier()) == 0, "B took something of a damaged change set")
        #expect(try !b.dump().contains("big- "))
        #expect(a.isRunning && b.isRunning)
    }

    @Test("A large change set pulled through a link that cuts and resets answers mid-way arrives whole, once; the serving daemon keeps serving")
    func largePullThroughFaults() throws {
        let a = try DaemonPeer(name: "a", model: Self.model, pullInterval: 3600, maxBackoff: 1)
        let b = try DaemonPeer(name: "b", model: Self.model, pullInterval: 0.3, maxBackoff: 1)
        // At first every answer to B is cut inside its body, or reset, at a random byte.
        let toA = try FaultProxy(upstreamPort: a.port, plan: .init(truncateResponse: 0.6, reset: 0.4), seed: 20_261_129)
        defer { toA.stop() }
        try a.connect(to: b)
        try b.connect(to: a, via: toA.url)
        // A's change set is made before either starts, so that B's first round already asks for it.
        #expect(try a.ferry(["init"]).status == 0)
        _ = try a.put(DaemonPeer.people("big-", 0..<16_000))
        try a.start()
        try b.start()
        defer { _ = a.stop(); _ = b.stop() }
        func failedPulls() -> Int {
            b.log().split(separator: "\n").filter { $0.contains("sync with a failed") && $0.contains("POST /v1/changesets/pull") }.count
        }
        let cut = DaemonPeer.waitUntil(timeout: 30) { failedPulls() >= 3 }
        #expect(cut, "B's pulls of the large change set were not cut: \(toA.counts)\n\(b.logExcerpt())")
        #expect(try !b.dump().contains("big- 0"), "B took something of an answer that was cut")
        // Then half of them are.
        toA.setPlan(.init(truncateResponse: 0.3, reset: 0.2))
        let converged = try DaemonPeer.waitUntil(timeout: 90) { try a.dump() == b.dump() }
        #expect(converged, "B did not get the large change set whole: \(toA.counts)\n\(b.logExcerpt())")
        #expect(try b.changeSetLog().entries.count == 1, "B took the change set other than once")
        #expect(a.isRunning && b.isRunning)
        print("large pull through faults: \(failedPulls()) pulls failed (\(toA.counts)); converged")
    }

    @Test("A change set larger than the peer's max_body_bytes is named in the pusher's status with what lets it through; the peer still pulls it")
    func largerThanThePeerTakes() throws {
        let a = try DaemonPeer(name: "a", model: Self.model, pullInterval: 3600, maxBackoff: 2)
        let b = try DaemonPeer(name: "b", model: Self.model, pullInterval: 3600, maxBackoff: 2)
        b.serverSettings = ["max_body_bytes": "1048576"]
        try a.connect(to: b)
        try b.connect(to: a)
        // A first, so that B's first round (at its start) reaches A and B pulls next only in an hour:
        // started the other way, B's first pull failed and its retry could take the change sets
        // before the check below that A's push of them did not.
        try a.start()
        try b.start()
        defer { _ = a.stop(); _ = b.stop() }
        #expect(try DaemonPeer.waitUntil(timeout: 20) { try b.hasSynced() }, "B's first round with A did not go through: \(b.logExcerpt())")
        // One change set of some 2.3 MB of text (16,000 objects in one save): pushed alone, over B's 1 MiB.
        _ = try a.put(DaemonPeer.people("big-", 0..<16_000))
        _ = try a.put(DaemonPeer.people("after-", 0..<1))
        let lastError = try a.waitForSyncError(containing: "refuses the next change set to push")
        #expect(lastError.contains("(server.max_body_bytes on a daemon, server.max_change_set_bytes on a relay) is raised above 2.")
                && lastError.contains("a daemon peer may still pull it"), "\(lastError)")
        #expect(try !b.dump().contains("after- 0"))
        // B pulls what A could not push (here at once; on its schedule otherwise), and A's pushes go on.
        let pulled = try FerryProcess.run(["sync-now", "--config", b.configuration])
        #expect(pulled.status == 0, "\(pulled.standardError)")
        #expect(try DaemonPeer.waitUntil(timeout: 20) { try a.dump() == b.dump() })
        _ = try a.put(DaemonPeer.people("later-", 0..<1))
        #expect(try DaemonPeer.waitUntil(timeout: 20) { try b.dump().contains("later- 0") }, "\(a.logExcerpt())")
    }
}
