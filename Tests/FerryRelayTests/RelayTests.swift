import Foundation
import Testing
import FerryTestTraits
import FerryTestSupport

/// `ferry relay` against a real PostgreSQL cluster: daemons replicating through it, what it
/// refuses, each change set stored once, causal order, long polls, and failover between relays.
@Suite("Relay", .blocking, .serialized)
struct RelayTests {
    @Test("two daemons replicate through a relay: saves on each reach the other, the relay holds each change set once")
    func replicateThroughRelay() throws {
        let (cluster, relay, a, b) = try RelayFixtures.pairThroughRelay()
        try RelayFixtures.save("from a", on: a)
        try RelayFixtures.save("from b", on: b)
        let converged = try DaemonPeer.waitUntil(timeout: 30) {
            let dumps = try [a, b].map { try $0.dump() }
            return dumps[0] == dumps[1] && dumps[0].contains("from a") && dumps[0].contains("from b")
        }
        #expect(converged, "a and b did not converge through the relay: \(a.logExcerpt()) \(b.logExcerpt()) \(relay.log().suffix(2000))")
        #expect(try RelayFixtures.storedRows(in: cluster) == 2)
        let state = try RelayFixtures.state(of: relay)
        #expect(state["relay"] as? Bool == true)
        #expect((state["vector"] as? [String: Any])?.count == 2)
        // The relay publishes the keys pinned in it: what its peers take on first use.
        #expect((state["keys"] as? [Any])?.count == 2)
    }
}

/// Change sets larger than a relay takes in one usual request.
@Suite("Relay body limit", .blocking, .serialized)
struct RelayBodyLimitTests {
    @Test("a change set larger than the relay's max_body_bytes is taken alone, stored in pieces, and served whole, with what came after it")
    func changeSetLargerThanABody() throws {
        let (cluster, relay, a, b) = try RelayFixtures.pairThroughRelay(maxBodyBytes: 1 << 20)
        // One change set of some 2.3 MB of text (16,000 objects in one save), then a small one.
        _ = try a.put(DaemonPeer.people("big", 0..<16_000))
        try RelayFixtures.save("after the big one", on: a)
        let flowed = try DaemonPeer.waitUntil(timeout: 60) {
            let dump = try b.dump()
            return dump.contains("after the big one") && dump.contains("big 15999")
        }
        #expect(flowed, "the large change set did not pass the relay: \(a.logExcerpt()) \(relay.log().suffix(2000))")
        #expect(try a.dump() == b.dump())
        // Stored in pieces of 256 KiB (its row holds none of its text), and served back from them whole.
        let pieces = try cluster.sql("SELECT count(*), coalesce(sum(octet_length(data)), 0) FROM ferry_changeset_pieces", database: "ferry")
        let stored = try cluster.sql("SELECT pieces, size, octet_length(line) FROM ferry_changesets WHERE pieces > 0", database: "ferry")
        let big = try #require(try a.history().first)
        let count = (big.utf8.count + (256 << 10) - 1) / (256 << 10)
        #expect(pieces.trimmingCharacters(in: .whitespacesAndNewlines) == "\(count)|\(big.utf8.count)", "\(pieces)")
        #expect(stored.trimmingCharacters(in: .whitespacesAndNewlines) == "\(count)|\(big.utf8.count)|0", "\(stored)")
        #expect(try RelayFixtures.pull(from: relay).lines.first == big)
    }

    @Test("change sets that fit the relay's max_body_bytes one by one but not together: the pusher sends fewer per request, and they flow")
    func fewerPerRequest() throws {
        let (cluster, relay, a, b) = try RelayFixtures.pairThroughRelay(maxBodyBytes: 1 << 20)
        defer { withExtendedLifetime(cluster) {} }
        #expect(a.stop() == 0)
        // Two change sets of some 0.7 MB each: one request of both (under the daemon's own 4 MiB) is past the relay's 1 MiB.
        _ = try a.put(DaemonPeer.people("first", 0..<5_000))
        _ = try a.put(DaemonPeer.people("second", 0..<5_000))
        let sizes = try a.history().map(\.utf8.count)
        #expect(sizes.count == 2 && sizes.allSatisfy { $0 < 1 << 20 } && sizes.reduce(0, +) > 1 << 20, "\(sizes)")
        try a.start()
        let flowed = try DaemonPeer.waitUntil(timeout: 60) {
            let dump = try b.dump()
            return dump.contains("first 4999") && dump.contains("second 4999")
        }
        #expect(flowed, "the two change sets did not reach b: \(a.logExcerpt()) \(relay.log().suffix(2000))")
    }

    @Test("a change set over the relay's max_change_set_bytes: sender's status and log say so and what lets it through; raised, it flows with what came after")
    func changeSetLargerThanTheRelayTakes() throws {
        let (cluster, relay, a, b) = try RelayFixtures.pairThroughRelay(maxBodyBytes: 1 << 20, maxChangeSetBytes: 2 << 20)
        defer { withExtendedLifetime(cluster) {} }  // (the relay's database stops with it)
        _ = try a.put(DaemonPeer.people("big", 0..<16_000))
        try RelayFixtures.save("after the big one", on: a)
        let lastError = try a.waitForSyncError(containing: "refuses the next change set to push")
        #expect(lastError.contains("larger than server.max_change_set_bytes (2097152 bytes)") && lastError.contains("is raised above 2.")
                && lastError.contains("a relay pulls nothing"), "\(lastError)")
        #expect(a.log().contains("error ferry: [FerryDaemon] sync with relay failed: the peer refuses the next change set"), "\(a.logExcerpt())")
        #expect(try !b.dump().contains("after the big one"))

        _ = relay.stop()
        try relay.setMaxChangeSetBytes(16 << 20)
        try relay.start()
        let flowed = try DaemonPeer.waitUntil(timeout: 60) {
            let dump = try b.dump()
            return dump.contains("after the big one") && dump.contains("big 15999")
        }
        #expect(flowed, "nothing flowed once the relay's limit was raised: \(a.logExcerpt()) \(relay.log().suffix(2000))")
    }

    @Test("Ten clients that ask a relay for one large change set and never read it: the relay holds a piece of it for each, not a copy")
    func greedyPullsFromARelay() throws {
        let (cluster, relay, a, b) = try RelayFixtures.pairThroughRelay()
        defer { withExtendedLifetime(cluster) {} }
        let before = try #require(relay.peakResidentMemory)
        // One change set of some 14 MB of text (100,000 objects in one save).
        _ = try a.put(DaemonPeer.people("big-", 0..<100_000))
        #expect(try DaemonPeer.waitUntil(timeout: 120) { try b.dump().contains("big- 99999") }, "\(relay.log().suffix(2000))")
        let size = try #require(try a.history().first?.utf8.count)
        let takenIn = try #require(relay.peakResidentMemory) - before
        print("a relay taking in one change set of \(size >> 10) KiB: peak resident memory +\(takenIn >> 10) KiB")
        // Its text is held once, unpacked straight into its line (`GzipBodyText`). Unpacked with CompressNIO's
        // decompress, it was held about twice (growing buffers copied into one, then the line: 2.1 times);
        // parsed into a tree to read its envelope, it cost ten times its size.
        #expect(takenIn < 3 * size / 2, "taking in a change set of \(size >> 10) KiB grew the relay's peak by \(takenIn >> 10) KiB")

        let measured = try UnreadPulls.measure(port: relay.port, token: relay.peerToken) { relay.residentMemory }
        let (answer, baseline, stalled, growth) = (measured.answerBytes, measured.baseline, measured.stalled, measured.growth)
        #expect(answer > size, "the warm-up pull got \(answer) bytes")
        for head in measured.heads {
            #expect(head.hasPrefix("HTTP/1.1 200") && head.contains(#""changes""#), "a greedy pull was not answered: \(head.prefix(200))")
        }
        // Read whole from the database, each unread answer held the line nearly twice (26.9 MB each); a piece
        // (256 KiB) at a time, each holds a few (the one in the socket's buffer, the next): 1.2 MB each.
        #expect(growth < 10 * answer / 4, "memory grew by \(growth >> 10) KiB with 10 unread pulls of a \(answer >> 10) KiB change set")
        print("greedy pulls of one large change set from a relay: resident memory \(baseline >> 20) MiB before, " +
              "\(stalled >> 20) MiB with 10 unread pulls of \(answer >> 10) KiB (+\(growth >> 10) KiB, \((growth / 10) >> 10) KiB each)")
        #expect(relay.isRunning)
    }

    @Test("Pulls of a relay's backlog of many middling change sets read about an answer's worth each, not the backlog; a new store still gets all of it")
    func backlogPulls() throws {
        let (cluster, relay, a, b) = try RelayFixtures.pairThroughRelay()
        defer { withExtendedLifetime(cluster) {} }
        // A hundred change sets of some 400 KB each, 40 MB, from one `ferry put` of a hundred saves (100 objects
        // each, with names of 4,000 characters: few objects, so that making and replaying them is quick).
        let saves = (0..<100).map { part in
            let name = "part\(part)-" + String(repeating: "abcdefghij", count: 400)
            return "[" + (0..<100).map { #"{"op":"insert","entity":"Person","ref":"p\#(part)-\#($0)","values":{"id":\#(part * 100 + $0),"name":"\#(name)"}}"# }
                .joined(separator: ",") + "]"
        }
        _ = try a.put(saves.joined(separator: "\n"))
        let total = try a.history().reduce(0) { $0 + $1.utf8.count }
        #expect(total > 38 << 20, "\(total) bytes")
        #expect(try DaemonPeer.waitUntil(timeout: 120) { try b.dump().contains("part99-") }, "\(relay.log().suffix(2000))")
        // (One pull of it all to the end first, so that the baseline holds what one pull leaves.)
        #expect(try RelayFixtures.pull(from: relay).status == 200)
        let baseline = try #require(relay.peakResidentMemory)

        // Four pulls of the backlog from its start at once: each answer is about 1 MiB.
        let calls = (0..<4).map { _ in RelayFixtures.Call { try RelayFixtures.pull(from: relay) } }
        for call in calls {
            let answer = try call.value(timeout: 60)
            #expect(answer.status == 200 && (1...4).contains(answer.lines.count), "\(answer.status), \(answer.lines.count) lines")
        }
        let growth = try #require(relay.peakResidentMemory) - baseline
        print("four pulls at once of a relay's backlog of \(total >> 20) MiB: peak resident memory +\(growth >> 10) KiB")
        // Read whole, each pull's page would hold the backlog (up to 500 change sets); read to an answer's bytes, about 1 MiB.
        #expect(growth < total / 2, "four pulls of a backlog of \(total >> 10) KiB grew the relay's peak by \(growth >> 10) KiB")

        // A new store walks the whole backlog, answer by answer.
        let c = try #require(try RelayFixtures.peers(["c"]).first)
        try c.connect(name: "relay", urls: [relay.url], token: relay.peerToken)
        try c.start()
        let walked = try DaemonPeer.waitUntil(timeout: 120) { try c.dump() == a.dump() }
        #expect(walked, "\(c.logExcerpt()) \(relay.log().suffix(2000))")
    }

    @Test("a database of relay schema 1 is upgraded when a relay of this Ferry starts on it: what it held is served, and older relays are then refused")
    func schemaUpgrade() throws {
        let (cluster, relay, a, b) = try RelayFixtures.pairThroughRelay(maxBodyBytes: 1 << 20)
        try RelayFixtures.save("before the upgrade", on: a)
        #expect(try DaemonPeer.waitUntil(timeout: 30) { try b.dump().contains("before the upgrade") })
        _ = relay.stop()
        // Back to schema 1, as a relay of an earlier Ferry left it.
        _ = try cluster.sql("""
            ALTER TABLE ferry_changesets DROP COLUMN pieces, DROP COLUMN size; DROP TABLE ferry_changeset_pieces; UPDATE ferry_relay SET schema_version = 1
            """, database: "ferry")
        try relay.start()
        #expect(relay.log().contains("upgraded the relay tables from schema 1 to 2"), "\(relay.log().suffix(2000))")
        #expect(try cluster.sql("SELECT schema_version FROM ferry_relay", database: "ferry").trimmingCharacters(in: .whitespacesAndNewlines) == "2")
        // A new store gets what the database held before, and a large change set made after.
        let c = try #require(try RelayFixtures.peers(["c"]).first)
        try c.connect(name: "relay", urls: [relay.url], token: relay.peerToken)
        try c.start()
        _ = try a.put(DaemonPeer.people("big", 0..<16_000))
        let flowed = try DaemonPeer.waitUntil(timeout: 60) {
            let dump = try c.dump()
            return dump.contains("before the upgrade") && dump.contains("big 15999")
        }
        #expect(flowed, "\(c.logExcerpt()) \(relay.log().suffix(2000))")
        // A database of a newer schema than this Ferry's is refused, saying what to do.
        _ = relay.stop()
        _ = try cluster.sql("UPDATE ferry_relay SET schema_version = 3", database: "ferry")
        #expect(throws: DaemonPeerError.self) { try relay.start() }
        #expect(relay.log().contains("holds relay tables of schema 3; this Ferry writes schema 2: upgrade Ferry on this relay"), "\(relay.log().suffix(1000))")
    }
}

/// The relay's database going away and coming back.
@Suite("Relay database outage", .blocking, .serialized)
struct RelayDatabaseOutageTests {
    @Test("while PostgreSQL is down the relay answers 503 (health too), daemons keep their saves; once back, the relay serves again by itself; all flows")
    func outage() throws {
        let (cluster, relay, a, b) = try RelayFixtures.pairThroughRelay()
        try RelayFixtures.save("before the outage", on: a)
        #expect(try DaemonPeer.waitUntil(timeout: 30) { try b.dump().contains("before the outage") })

        cluster.stop()
        let health = try FerryProcess.curl("GET", relay.url + "/healthz", token: nil)
        #expect(health.status == 503 && health.body.contains("database"), "\(health)")
        let state = try FerryProcess.curl("GET", relay.url + "/v1/state", token: relay.peerToken)
        #expect(state.status == 503, "\(state)")
        try RelayFixtures.save("during the outage", on: a)
        // Nothing can reach b meanwhile; a keeps its save. Checked once a round of a's has failed on
        // the relay (503) since the save (whose commit starts one): the relay, without its database,
        // takes nothing, and b has no other way to the save. (Waiting for a round that surely began
        // after the save, or for one of b's, costs its pull interval or backoff: 10-30 s more in the
        // blocking queue.)
        let aFailures = try a.consecutiveSyncFailures()
        let aFailed = try DaemonPeer.waitUntil(timeout: 30) { try a.consecutiveSyncFailures() > aFailures }
        let aError = try a.lastSyncError()
        #expect(aFailed && aError.contains("503"), "a's round after the save did not fail on the relay: \(aError)")
        #expect(try !b.dump().contains("during the outage"))
        #expect(relay.isRunning, "the relay ended when its database went away: \(relay.log().suffix(2000))")

        try cluster.start()
        let flowed = try DaemonPeer.waitUntil(timeout: 60) { try b.dump().contains("during the outage") }
        #expect(flowed, "nothing flowed after the database came back: \(relay.log().suffix(3000)) \(a.logExcerpt())")
        try RelayFixtures.save("after the outage", on: b)
        #expect(try DaemonPeer.waitUntil(timeout: 30) { try a.dump().contains("after the outage") }, "\(relay.log().suffix(3000))")
        #expect(try RelayFixtures.storedRows(in: cluster) == 3)
    }
}

/// Keys that change after the relay's configuration was written.
@Suite("Relay key rotation", .blocking, .serialized)
struct RelayKeyRotationTests {
    @Test("a daemon's rotated key reaches the relay through the daemon's endorsed offer (every relay on the database takes it); an unendorsed key is refused")
    func rotation() throws {
        let cluster = try RelayFixtures.cluster()
        let peers = try RelayFixtures.peers(["a", "b"])
        let (a, b) = (peers[0], peers[1])
        let keys = try RelayFixtures.keys(of: peers)
        let first = try RelayProcess(name: "r1", cluster: cluster, database: "ferry", pinned: keys)
        let second = try RelayProcess(name: "r2", cluster: cluster, database: "ferry", pinned: keys, sharingTokensWith: first)
        try first.start()
        try second.start()
        try a.connect(name: "relays", urls: [first.url, second.url], token: first.peerToken)
        try b.connect(name: "relays", urls: [second.url, first.url], token: first.peerToken)
        for peer in peers { try peer.start() }
        try RelayFixtures.save("before rotation", on: a)
        #expect(try DaemonPeer.waitUntil(timeout: 30) { try b.dump().contains("before rotation") })

        // An offer of a key nobody endorsed is refused.
        let origin = try a.identity().store
        let forged = #"{"keys":[{"origin":"\#(origin)","key":"\#(keys[1].key)","from":50}]}"#
        let offered = try FerryProcess.run(executable: "/usr/bin/curl", ["-sS", "-X", "PUT", "-H", "Authorization: Bearer \(first.peerToken)",
                                                                        "--data-binary", forged, first.url + "/v1/keys"])
        #expect(offered.standardOutput == #"{"learned":0,"refused":1}"#, "\(offered.standardOutput) \(offered.standardError)")

        #expect(a.stop() == 0)
        let rotated = try a.ferry(["key", "rotate"])
        #expect(rotated.status == 0, "\(rotated.standardError)")
        let newKey = rotated.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines)
        try a.start()
        try RelayFixtures.save("after rotation", on: a)
        let flowed = try DaemonPeer.waitUntil(timeout: 40) { try b.dump().contains("after rotation") }
        #expect(flowed, "a's change sets after the rotation did not reach b: \(a.logExcerpt()) \(first.log().suffix(2000))")
        // Both relays publish the rotation (the one a offered it to, and the other, told through the database).
        for relay in [first, second] {
            let published = try #require(try RelayFixtures.state(of: relay)["keys"] as? [[String: Any]])
            #expect(published.contains { $0["key"] as? String == newKey && $0["endorsement"] != nil }, "\(relay.name): \(published)")
        }
    }
}

/// Relays speaking HTTPS.
@Suite("Relay over HTTPS", .blocking, .serialized)
struct RelayTLSTests {
    @Test("with a certificate and key the relay speaks HTTPS only, and daemons that trust its CA replicate through it")
    func https() throws {
        let cluster = try RelayFixtures.cluster()
        let peers = try RelayFixtures.peers(["a", "b"])
        let folder = TemporaryDirectory()
        let files = try TestCertificates.make(in: folder)
        let relay = try RelayProcess(name: "r1", cluster: cluster, database: "ferry", pinned: try RelayFixtures.keys(of: peers),
                                     certificate: (files.certificate, files.key))
        try relay.start()
        #expect(relay.url.hasPrefix("https://"))
        let plain = try FerryProcess.run(executable: "/usr/bin/curl", ["-sS", "-m", "5", "http://127.0.0.1:\(relay.port)/healthz"])
        #expect(!plain.standardOutput.contains("ok"), "the relay answered plain HTTP: \(plain.standardOutput)")
        let health = try FerryProcess.run(executable: "/usr/bin/curl", ["-sS", "-m", "5", "--cacert", files.ca, relay.url + "/healthz"])
        #expect(health.standardOutput == #"{"status":"ok"}"#, "\(health.standardOutput) \(health.standardError)")
        for peer in peers {
            try peer.connect(name: "relay", urls: [relay.url], token: relay.peerToken, caFile: files.ca)
            try peer.start()
        }
        try RelayFixtures.save("over https", on: peers[0])
        #expect(try DaemonPeer.waitUntil(timeout: 30) { try peers[1].dump().contains("over https") }, "\(peers[1].logExcerpt())")
    }
}

/// What a relay refuses, and what it keeps of what it takes: each push checked whole before anything
/// is stored, each change set stored once, served in an order that applies as is.
@Suite("Relay checks and order", .blocking, .serialized)
struct RelayCheckTests {
    /// A relay over a fresh cluster trusting `peers`, started.
    func startedRelay(_ cluster: PostgresCluster, trusting peers: [DaemonPeer]) throws -> RelayProcess {
        let relay = try RelayProcess(name: "r1", cluster: cluster, database: "ferry", pinned: try RelayFixtures.keys(of: peers))
        try relay.start()
        return relay
    }

    @Test("malformed, unsigned, forged and unknown-origin pushes are refused whole (400, 422) and nothing is stored")
    func refusals() throws {
        let cluster = try RelayFixtures.cluster()
        let peers = try RelayFixtures.peers(["a", "stranger"])
        let (a, stranger) = (peers[0], peers[1])
        let relay = try startedRelay(cluster, trusting: [a])
        try RelayFixtures.save("one", on: a)
        try RelayFixtures.save("two", on: a)
        try RelayFixtures.save("elsewhere", on: stranger)
        let genuine = try a.history()
        #expect(genuine.count == 2)

        let malformed = try RelayFixtures.push(genuine[0] + "\n{\"format\":1}", to: relay)
        #expect(malformed.status == 400 && malformed.body.contains("line 2"), "\(malformed)")
        let unsigned = try RelayFixtures.push(genuine[0] + "\n" + SignedLines.unsigned(genuine[1]), to: relay)
        #expect(unsigned.status == 422 && unsigned.body.contains("line 2") && unsigned.body.contains("unsigned"), "\(unsigned)")
        let forged = try SignedLines.edited(genuine[1], resignedWith: nil) { $0.replacingOccurrences(of: "two", with: "owt") }
        // (Edited but keeping the old signature: the bytes signed are no longer the bytes sent.)
        let tampered = String(forged.dropLast()) + "," + genuine[1].split(separator: ",").last!
        let badSignature = try RelayFixtures.push(genuine[0] + "\n" + tampered, to: relay)
        #expect(badSignature.status == 422 && badSignature.body.contains("bad_signature"), "\(badSignature)")
        let unknown = try RelayFixtures.push(try stranger.history()[0], to: relay)
        #expect(unknown.status == 422 && unknown.body.contains("unknown_origin"), "\(unknown)")
        #expect(try RelayFixtures.storedRows(in: cluster) == 0, "a refused push stored something")

        let accepted = try RelayFixtures.push(genuine.joined(separator: "\n"), to: relay)
        #expect(accepted.status == 200 && accepted.body.contains(#""applied":2"#), "\(accepted)")
        let again = try RelayFixtures.push(genuine.joined(separator: "\n"), to: relay)
        #expect(again.status == 200 && again.body.contains(#""duplicate":2"#) && again.body.contains(#""applied":0"#), "\(again)")
        #expect(try RelayFixtures.storedRows(in: cluster) == 2)
        // Served back byte for byte: the signatures still verify at the next store.
        #expect(try RelayFixtures.pull(from: relay).lines == genuine)
    }

    @Test("pulls come in causal order: a change set pushed before what it depends on, or past a gap, waits for it")
    func causalOrder() throws {
        let cluster = try RelayFixtures.cluster()
        let peers = try RelayFixtures.peers(["a", "b"])
        let (a, b) = (peers[0], peers[1])
        let relay = try startedRelay(cluster, trusting: peers)
        try RelayFixtures.save("a1", on: a)
        try RelayFixtures.save("a2", on: a)
        let fromA = try a.history()
        // b takes a's first save in, then saves: its change set depends on a's first.
        let applied = try b.ferry(["apply", "-"], input: fromA[0])
        #expect(applied.status == 0, "\(applied.standardError)")
        try RelayFixtures.save("b1", on: b)
        let ownOfB = try #require(try b.history().last)
        #expect(ownOfB.contains(#""deps":{""#))

        // b's change set first, and a's second without its first: neither can be applied yet, so neither is served.
        #expect(try RelayFixtures.push(ownOfB, to: relay).status == 200)
        #expect(try RelayFixtures.push(fromA[1], to: relay).body.contains(#""waiting":1"#))
        #expect(try RelayFixtures.pull(from: relay).lines.isEmpty)
        // The vector says what the relay holds from each origin's first on: b's, not a's second (past a gap).
        let vectorBefore = try #require(try RelayFixtures.state(of: relay)["vector"] as? [String: Int])
        #expect(vectorBefore == [try b.identity().store: 1], "\(vectorBefore)")

        // a's first arrives: all three are served, each after what it needs.
        #expect(try RelayFixtures.push(fromA[0], to: relay).status == 200)
        let served = try RelayFixtures.pull(from: relay).lines
        #expect(served.count == 3)
        let positions = served.map { line in [fromA[0], fromA[1], ownOfB].firstIndex(of: line) ?? -1 }
        #expect(positions.first == 0 && Set(positions) == [0, 1, 2], "not causal: \(positions)")
        // A caller holding a's first gets the other two.
        let idA = try a.identity().store
        let after = try RelayFixtures.pull(#"{"after":{"\#(idA)":1}}"#, from: relay).lines
        #expect(Set(after) == [fromA[1], ownOfB])
    }

    @Test("two relays on one database: the same change sets pushed to both at once are stored once, and a long poll at one wakes for a push at the other")
    func twoRelaysShareOneDatabase() async throws {
        let cluster = try RelayFixtures.cluster()
        let peers = try RelayFixtures.peers(["a"])
        let keys = try RelayFixtures.keys(of: peers)
        let first = try RelayProcess(name: "r1", cluster: cluster, database: "ferry", pinned: keys)
        let second = try RelayProcess(name: "r2", cluster: cluster, database: "ferry", pinned: keys, sharingTokensWith: first)
        try first.start()
        try second.start()
        for index in 0..<20 { try RelayFixtures.save("p\(index)", on: peers[0]) }
        let lines = try peers[0].history()
        let body = lines.joined(separator: "\n")
        // Both at once, several times over.
        let pushes = [first, second, first, second].map { relay in RelayFixtures.Call { try RelayFixtures.push(body, to: relay) } }
        for push in pushes { #expect(try push.value().status == 200) }
        #expect(try RelayFixtures.storedRows(in: cluster) == 20)
        let stateOfFirst = try RelayFixtures.state(of: first)
        let stateOfSecond = try RelayFixtures.state(of: second)
        #expect(stateOfFirst["store"] as? String == stateOfSecond["store"] as? String, "two relays on one database must look like one peer")
        #expect((stateOfFirst["vector"] as? [String: Int])?.values.first == 20)

        // A long poll at the second relay, for what comes after the twenty, answered by a push at the first.
        try RelayFixtures.save("late", on: peers[0])
        let late = try #require(try peers[0].history().last)
        let origin = try peers[0].identity().store
        let started = Date()
        let polled = RelayFixtures.Call {
            try RelayFixtures.longPoll(#"{"after":{"\#(origin)":20},"wait_ms":20000}"#, from: second, seconds: 40)
        }
        try await Task.sleep(for: .milliseconds(500))
        #expect(try RelayFixtures.push(late, to: first).status == 200)
        let answer = try polled.value()
        let waited = Date().timeIntervalSince(started)
        #expect(answer.lines == [late], """
            \(answer.status) after \(Date().timeIntervalSince(started)) s; \
            the second relay's log: \(second.log().suffix(4000)); the first's: \(first.log().suffix(2000))
            """)
        // (Its wait was 20 s, after which it would have found the change set anyway: well before that, it was woken.
        // Seconds of margin, for a loaded machine starting curl processes.)
        #expect(waited < 15, "the long poll at the second relay took \(waited) s to hear of a push at the first")
        #expect(waited >= 0.4, "the long poll answered before the push (\(waited) s)")
        // With nothing new, a long poll ends empty when its wait is over.
        let quiet = Date()
        #expect(try RelayFixtures.pull(#"{"after":{"\#(origin)":21},"wait_ms":700}"#, from: second).lines.isEmpty)
        #expect(Date().timeIntervalSince(quiet) >= 0.6)

        // A relay asked to stop answers its long polls at once instead of waiting them out.
        let held = RelayFixtures.Call {
            try RelayFixtures.longPoll(#"{"after":{"\#(origin)":21},"wait_ms":30000}"#, from: second, seconds: 40)
        }
        // (Once the poll waits there: the relay's status counts it.)
        let waiting = DaemonPeer.waitUntil(timeout: 20) {
            ((try? FerryProcess.curl("GET", second.url + "/v1/status", token: second.peerToken).body) ?? "").contains(#""long_polls":1"#)
        }
        #expect(waiting, "the long poll never reached the relay")
        let stopping = Date()
        #expect(second.stop() == 0)
        let stopped = Date().timeIntervalSince(stopping)
        #expect(stopped < 10, "the relay took \(stopped) s to stop with a long poll open")
        let cut = try held.value()
        #expect(cut.status == 200 && cut.lines.isEmpty, "\(cut)")
    }
}

/// Peers that list several relays, a relay lost and back, and what retention drops.
@Suite("Relay failover and retention", .blocking, .serialized)
struct RelayFailoverTests {
    @Test("a peer listing two relays fails over when the one in use dies, ferry status shows which is in use, and saves keep flowing")
    func failover() throws {
        let cluster = try RelayFixtures.cluster()
        let peers = try RelayFixtures.peers(["a", "b"])
        let keys = try RelayFixtures.keys(of: peers)
        let first = try RelayProcess(name: "r1", cluster: cluster, database: "ferry", pinned: keys)
        let second = try RelayProcess(name: "r2", cluster: cluster, database: "ferry", pinned: keys, sharingTokensWith: first)
        try first.start()
        try second.start()
        for peer in peers {
            try peer.connect(name: "relays", urls: [first.url, second.url], token: first.peerToken)
            try peer.start()
        }
        let (a, b) = (peers[0], peers[1])
        try RelayFixtures.save("before", on: a)
        #expect(try DaemonPeer.waitUntil(timeout: 30) { try b.dump().contains("before") }, "\(b.logExcerpt())")
        let before = try status(of: b)
        #expect(before.url == first.url && before.urls == [first.url, second.url] && before.relay == true, "\(before)")

        first.kill()
        try RelayFixtures.save("after", on: a)
        try RelayFixtures.save("from b", on: b)
        let converged = try DaemonPeer.waitUntil(timeout: 60) {
            let (left, right) = (try a.dump(), try b.dump())
            return left == right && left.contains("after") && left.contains("from b")
        }
        #expect(converged, "no failover: \(a.logExcerpt()) \(b.logExcerpt())")
        #expect(try status(of: b).url == second.url)
        #expect(try status(of: a).url == second.url)

        // The first comes back: nothing was lost or doubled, and it serves what came meanwhile.
        try first.start()
        #expect(try RelayFixtures.storedRows(in: cluster) == 3)
        #expect(try RelayFixtures.pull(from: first).lines.count == 3)
    }

    /// `ferry status` of `peer`'s daemon: its one peer's URL in use, URLs and whether it is a relay.
    func status(of peer: DaemonPeer) throws -> (url: String?, urls: [String]?, relay: Bool?) {
        let result = try FerryProcess.run(["status", "--config", peer.configuration])
        let json = try JSONSerialization.jsonObject(with: Data(result.standardOutput.utf8)) as? [String: Any]
        let entry = (json?["peers"] as? [[String: Any]])?.first
        return (entry?["url"] as? String, entry?["urls"] as? [String], entry?["relay"] as? Bool)
    }

    @Test("retention drops what every pulling store has, made long enough ago; a store asking for dropped change sets gets 410, restarts from relay's snapshot")
    func retention() throws {
        let cluster = try RelayFixtures.cluster()
        let peers = try RelayFixtures.peers(["a", "b", "latecomer"])
        let relay = try RelayProcess(name: "r1", cluster: cluster, database: "ferry", pinned: try RelayFixtures.keys(of: peers),
                                     retention: ["keep": "0", "interval": "0.5"])
        try relay.start()
        let (a, b, latecomer) = (peers[0], peers[1], peers[2])
        try a.connect(name: "relay", urls: [relay.url], token: relay.peerToken, snapshotUploadInterval: 1)
        try b.connect(name: "relay", urls: [relay.url], token: relay.peerToken)
        for peer in [a, b] { try peer.start() }
        try RelayFixtures.save("one", on: a)
        try RelayFixtures.save("two", on: a)
        #expect(try DaemonPeer.waitUntil(timeout: 30) { try b.dump().contains("two") })
        // Both have both, and both pull (long polls) with vectors that say so: the relay drops them.
        let dropped = try DaemonPeer.waitUntil(timeout: 30) { try RelayFixtures.storedRows(in: cluster) == 0 }
        let kept = try RelayFixtures.storedRows(in: cluster)
        #expect(dropped, "retention kept \(kept) change sets")
        let origin = try a.identity().store
        let gone = try FerryProcess.curl("POST", relay.url + "/v1/changesets/pull", token: relay.peerToken, body: "{}")
        #expect(gone.status == 410 && gone.body.contains(origin) && gone.body.contains("snapshot"), "\(gone)")
        // Saves after the purge still flow.
        try RelayFixtures.save("three", on: a)
        #expect(try DaemonPeer.waitUntil(timeout: 30) { try b.dump().contains("three") })
        let relayStatus = try FerryProcess.curl("GET", relay.url + "/v1/status", token: relay.adminToken)
        #expect(relayStatus.body.contains(#""purged_through":{"\#(origin)":2}"#), "\(relayStatus.body)")

        // A store that joins now gets 410 from the relay, starts again from the snapshot a uploaded there
        // (sync.bootstrap), and has everything.
        #expect(try DaemonPeer.waitUntil(timeout: 30) {
            try FerryProcess.curl("GET", relay.url + "/v1/snapshot", token: relay.peerToken).status == 200
        }, "a never uploaded a snapshot: \(a.logExcerpt())")
        try RelayFixtures.save("elsewhere first", on: latecomer)
        try latecomer.connect(name: "relay", urls: [relay.url], token: relay.peerToken)
        try latecomer.start()
        let joined = try DaemonPeer.waitUntil(timeout: 60) {
            let dump = try latecomer.dump()
            return dump.contains("one") && dump.contains("three") && dump.contains("elsewhere first")
        }
        #expect(joined, "the latecomer did not start again from the relay's snapshot: \(latecomer.logExcerpt())")
        #expect(latecomer.log().contains("snapshot of relay installed"), "\(latecomer.logExcerpt())")
        #expect(try DaemonPeer.waitUntil(timeout: 30) { try a.dump().contains("elsewhere first") })
    }

    @Test("a new store starts from the snapshot a daemon uploaded to the relay (ferry init --from-peer RELAY), then pulls what came after")
    func joinFromRelaySnapshot() throws {
        let cluster = try RelayFixtures.cluster()
        let a = try RelayFixtures.peers(["a"])[0]
        // No store yet: it is made from the relay's snapshot.
        let newcomer = try DaemonPeer(name: "newcomer", model: RelayFixtures.model, pullInterval: 30, maxBackoff: 2)
        let relay = try RelayProcess(name: "r1", cluster: cluster, database: "ferry", pinned: try RelayFixtures.keys(of: [a]))
        let limited = "push-only-a-" + UUID().uuidString
        try relay.addToken("push \(limited) origins=\(try a.identity().store)")
        try relay.start()
        let missing = try FerryProcess.curl("GET", relay.url + "/v1/snapshot", token: relay.peerToken)
        #expect(missing.status == 404 && missing.body.contains("snapshot_upload_interval"), "\(missing)")
        let notSQLite = try FerryProcess.run(executable: "/usr/bin/curl",
                                             ["-sS", "-X", "PUT", "-w", "\n%{http_code}", "-H", "Authorization: Bearer \(relay.peerToken)",
                                              "-H", "Ferry-Snapshot-Of: \(UUID().uuidString)", "--data-binary", "not a database at all",
                                              relay.url + "/v1/snapshot"])
        #expect(notSQLite.standardOutput.hasSuffix("400"), "\(notSQLite.standardOutput)")
        // A token limited to a's origin may not upload a snapshot of another store.
        let otherStore = try FerryProcess.run(executable: "/usr/bin/curl",
                                              ["-sS", "-X", "PUT", "-w", "\n%{http_code}", "-H", "Authorization: Bearer \(limited)",
                                               "-H", "Ferry-Snapshot-Of: \(UUID().uuidString)", "--data-binary", "SQLite format 3",
                                               relay.url + "/v1/snapshot"])
        #expect(otherStore.standardOutput.hasSuffix("403"), "\(otherStore.standardOutput)")

        try a.connect(name: "relay", urls: [relay.url], token: relay.peerToken, snapshotUploadInterval: 1)
        try a.start()
        for index in 0..<30 { try RelayFixtures.save("before \(index)", on: a) }
        // A snapshot taken after the thirty saves: the second upload from now (one under way now may
        // have been taken before the last save; on a slow machine two uploads happened during the saves,
        // and waiting for two in all took a snapshot without the last ones).
        func uploads() -> Int { a.log().components(separatedBy: "uploaded a snapshot").count - 1 }
        let uploadsDuringSaves = uploads()
        let uploaded = DaemonPeer.waitUntil(timeout: 30) { uploads() >= uploadsDuringSaves + 2 }
        #expect(uploaded, "\(a.logExcerpt())")

        try relay.peerToken.write(toFile: newcomer.directory.file("relay.token"), atomically: true, encoding: .utf8)
        let joined = try FerryProcess.run(["init", "--from-peer", relay.url, "--token-file", newcomer.directory.file("relay.token"),
                                           "--store", newcomer.store, "--model", newcomer.model])
        #expect(joined.status == 0, "\(joined.standardError)")
        let before = try a.dump()
        #expect(before.contains("before 29"))
        #expect(try newcomer.dump() == before, "the store made from the relay's snapshot differs from a's")

        // Then it follows the relay like any store of the fleet.
        try RelayFixtures.save("after the snapshot", on: a)
        try newcomer.connect(name: "relay", urls: [relay.url], token: relay.peerToken)
        try newcomer.start()
        let caughtUp = try DaemonPeer.waitUntil(timeout: 30) { try newcomer.dump() == a.dump() }
        #expect(caughtUp, "\(newcomer.logExcerpt())")
    }
}
