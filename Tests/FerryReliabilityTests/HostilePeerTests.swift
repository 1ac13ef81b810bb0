import Foundation
import Testing
import FerryTestTraits
import FerryTestSupport

/// What a peer holding one valid *peer* token could do to a fleet (issue 19), against real
/// `ferry run` daemons on loopback: each attack is refused or contained, the daemons keep
/// running, and genuine saves still reach every replica afterwards.
@Suite("Hostile peers", .blocking, .serialized)
struct HostilePeerTests {
    static let model = SampleModels.path("OrgChart")

    /// Two daemons connected both ways, started, with one save each already exchanged.
    /// `acceptingUnknownOrigins`: both take change sets of origins they hold no key of
    /// (`trust.unknown_origins: accept`, a fleet moving to signatures), so that a forged change set
    /// reaches the checks after trust; by default it is refused before them (SignedChangeSetTests).
    func pair(acceptingUnknownOrigins: Bool = false) throws -> (DaemonPeer, DaemonPeer) {
        let a = try DaemonPeer(name: "a", model: Self.model, pullInterval: 0.5)
        let b = try DaemonPeer(name: "b", model: Self.model, pullInterval: 0.5)
        if acceptingUnknownOrigins {
            a.trustSettings = ["unknown_origins": "accept"]
            b.trustSettings = ["unknown_origins": "accept"]
        }
        try a.connect(to: b)
        try b.connect(to: a)
        try a.start()
        try b.start()
        return (a, b)
    }

    func push(_ body: String, to peer: DaemonPeer, seconds: Int = 10) throws -> (status: Int, body: String) {
        try FerryProcess.curl("POST", peer.url + "/v1/changesets", token: peer.peerToken, body: body, seconds: seconds)
    }

    func modelHash(of peer: DaemonPeer) throws -> String {
        let output = try FerryProcess.run(["state", "--store", peer.store]).standardOutput
        let state = try #require(try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any])
        return try #require(state["model"] as? String)
    }

    /// A genuine save on `from` shows up on `to` (within 30 s).
    func expectReplicates(_ name: String, from: DaemonPeer, to: DaemonPeer, _ context: String) throws {
        try from.put(#"[{"op":"insert","entity":"Person","ref":"x","values":{"name":"\#(name)"}}]"#)
        let arrived = try DaemonPeer.waitUntil(timeout: 30) { try to.dump().contains(name) }
        #expect(arrived, "\(context): a genuine save on \(from.name) did not reach \(to.name)\n\(to.logExcerpt())")
    }

    @Test("A change set at the largest clock waits on the receiver; saves and replication go on at the wall clock")
    func clockAtTheMaximum() throws {
        let (a, b) = try pair(acceptingUnknownOrigins: true)
        let origin = UUID().uuidString
        let forged = #"{"changes":[],"format":1,"hlc":9223372036854775807,"model":"\#(try modelHash(of: b))","origin":"\#(origin)","seq":1}"#
        let answer = try push(forged, to: b)
        #expect(answer.status == 200 && answer.body.contains(#""waiting":1"#), "\(answer)")
        // Saves on b still work (a clock at the maximum used to trap every later save), and replicate both ways.
        try expectReplicates("after the forged clock (b)", from: b, to: a, "clock")
        try expectReplicates("after the forged clock (a)", from: a, to: b, "clock")
        #expect(a.isRunning && b.isRunning)
        let (stopA, stopB) = (a.stop(), b.stop())
        #expect(stopA == 0 && stopB == 0)
    }

    @Test("Two thousand fresh origins do not stop pulls: the vector travels in a POST body, and saves keep flowing both ways")
    func originFlood() throws {
        let (a, b) = try pair(acceptingUnknownOrigins: true)
        let hash = try modelHash(of: b)
        let now = Int64(Date().timeIntervalSince1970 * 1000) << 16
        let flood = (0..<2_000).map { _ in #"{"changes":[],"format":1,"hlc":\#(now),"model":"\#(hash)","origin":"\#(UUID().uuidString)","seq":1}"# }
        // 2,000 change sets in one push: a debug daemon on a loaded machine takes more than curl's usual 10 s.
        let answer = try push(flood.joined(separator: "\n"), to: b, seconds: 120)
        #expect(answer.status == 200, "\(answer.status) \(answer.body.prefix(300))")
        #expect(try b.vector().count >= 2_000)
        // a pulls b's vector of 2,000 origins and more; a's own saves still reach b, and b's reach a.
        try expectReplicates("after the flood (a)", from: a, to: b, "flood")
        try expectReplicates("after the flood (b)", from: b, to: a, "flood")
        let spread = try DaemonPeer.waitUntil(timeout: 30) { try a.vector().count >= 2_000 }
        #expect(spread, "the flood's change sets did not reach a (pulls stopped)\n\(a.logExcerpt())")
        #expect(!(a.log() + b.log()).contains("answered 400"), "a pull was refused:\n\(a.logExcerpt())")
        let (stopA, stopB) = (a.stop(), b.stop())
        #expect(stopA == 0 && stopB == 0)
    }

    @Test("Inserts under the receiver's namespace are refused, unsigned change sets under its own origin too; its objects keep their names")
    func namespaceTakeover() throws {
        let (a, b) = try pair()
        try b.put(#"[{"op":"insert","entity":"Person","ref":"x","values":{"name":"Bea"}}]"#)
        let me = try b.storeIdentifier()
        let hash = try modelHash(of: b)
        let now = Int64(Date().timeIntervalSince1970 * 1000) << 16
        let before = try b.dump()
        // An insert naming b's row 1 under another origin: refused whole.
        let takeover = #"{"changes":[{"entity":"Person","op":"insert","uri":"x-coredata://\#(me)/Person/p1","values":{"name":"Mallory"}}],"# +
            #""format":1,"hlc":\#(now),"model":"\#(hash)","origin":"\#(UUID().uuidString)","seq":1}"#
        let refused = try push(takeover, to: b)
        #expect(refused.status == 400 && refused.body.contains("an insert must name an object of its change set's origin"), "\(refused)")
        // A change set under b's own origin, past what b wrote: refused, as b signs all it records (422, unsigned).
        let planted = #"{"changes":[{"entity":"Person","op":"insert","uri":"x-coredata://\#(me)/Person/p99","values":{"name":"Mallory"}}],"# +
            #""format":1,"hlc":\#(now),"model":"\#(hash)","origin":"\#(me)","seq":99}"#
        let held = try push(planted, to: b)
        #expect(held.status == 422 && held.body.contains("(unsigned)"), "\(held)")
        #expect(try b.ferry(["conflicts", "list"]).standardOutput.isEmpty, "the refused change set was kept as held")
        #expect(try b.dump() == before && !b.dump().contains("Mallory"))
        try expectReplicates("after the takeover", from: a, to: b, "namespace")
        #expect(try !a.dump().contains("Mallory"))
        let (stopA, stopB) = (a.stop(), b.stop())
        #expect(stopA == 0 && stopB == 0)
    }

    @Test("Idle connections past server.max_connections wait in the kernel's queue: the daemon's descriptors stay bounded, it keeps serving")
    func connectionCap() throws {
        let b = try DaemonPeer(name: "b", model: Self.model, pullInterval: 3600)
        try b.start(environment: ["FERRY_SERVER_MAX_CONNECTIONS": "8"])
        // The baseline once the daemon has settled: "listening" comes before its sync loop has subscribed
        // to the store's commits and its first reads opened a reader connection, which under the load of
        // a full test run can come after a baseline taken at once (seen once: 14 more descriptors, not 12).
        #expect(try FerryProcess.run(["status", "--config", b.configuration]).status == 0)
        Thread.sleep(forTimeInterval: 0.5)
        let baseline = try #require(b.openDescriptors)
        // Two hundred idle connections (no token needed to open one).
        let idle = try (0..<200).map { _ in try RawConnection(port: b.port) }
        Thread.sleep(forTimeInterval: 1)
        let held = try #require(b.openDescriptors)
        #expect(held - baseline <= 8 + 4, "the daemon took \(held - baseline) more descriptors for 200 idle connections (cap 8)")
        #expect(b.isRunning)
        // A request on one of the last connections before the bound hears 503 with Retry-After, not silence.
        for connection in idle { connection.close() }
        // Once the daemon has taken and closed the 192 that waited in the kernel's queue (a loaded run
        // once took longer than the half second this waited before), a request is answered again.
        let closed = Date()
        let drained = DaemonPeer.waitUntil(timeout: 20) {
            (try? FerryProcess.curl("GET", b.url + "/healthz", token: nil).status) == 200
        }
        print("connection cap: answered again \(String(format: "%.2f", Date().timeIntervalSince(closed))) s after the 200 idle connections closed")
        #expect(drained, "healthz did not answer after the 200 idle connections closed\n\(b.logExcerpt())")
        let nearBound = try (0..<7).map { _ in try RawConnection(port: b.port) }  // the 8th (curl) is past 8 - 8/8
        Thread.sleep(forTimeInterval: 0.3)
        let busy = try FerryProcess.run(executable: "/usr/bin/curl",
                                        ["-sS", "-m", "5", "-i", "-H", "Authorization: Bearer \(b.peerToken)", b.url + "/v1/state"])
        #expect(busy.standardOutput.contains("503") && busy.standardOutput.lowercased().contains("retry-after: 1"),
                "\(busy.standardOutput) \(busy.standardError)")
        for connection in nearBound { connection.close() }
        // Once they go, it serves again.
        let serving = DaemonPeer.waitUntil(timeout: 20) {
            (try? FerryProcess.curl("GET", b.url + "/healthz", token: nil).status) == 200
        }
        #expect(serving, "healthz did not answer after the idle connections closed\n\(b.logExcerpt())")
        #expect(b.stop() == 0)
    }

    @Test("Under a low descriptor limit the daemon lowers its connection cap: idle connections wait, it never runs out of descriptors, serves once they go")
    func descriptorLimit() throws {
        let b = try DaemonPeer(name: "b", model: Self.model, pullInterval: 3600)
        b.descriptorLimit = 100
        try b.start()  // server.max_connections left at 256
        #expect(b.log().contains("server.max_connections lowered from 256"), "\(b.logExcerpt())")
        let idle = try (0..<150).map { _ in try RawConnection(port: b.port) }
        Thread.sleep(forTimeInterval: 1)
        let held = try #require(b.openDescriptors)
        #expect(held <= 100 - 16, "the daemon holds \(held) descriptors of 100 with 150 idle connections")
        #expect(b.isRunning)
        for connection in idle { connection.close() }
        let serving = DaemonPeer.waitUntil(timeout: 20) {
            (try? FerryProcess.curl("GET", b.url + "/healthz", token: nil).status) == 200
        }
        #expect(serving, "healthz did not answer after the idle connections closed\n\(b.logExcerpt())")
        try b.put(#"[{"op":"insert","entity":"Person","ref":"x","values":{"name":"still saving"}}]"#)
        #expect(b.stop() == 0)
    }

    @Test("An HTTP/1.0 request is answered and its connection closed, unless it asks to keep it; HTTP/1.1 connections stay open")
    func http10() throws {
        let b = try DaemonPeer(name: "b", model: Self.model, pullInterval: 3600)
        try b.start()
        func exchange(_ request: String) throws -> (answer: String, closed: Bool) {
            let connection = try RawConnection(port: b.port)
            defer { connection.close() }
            #expect(connection.send(request))
            let started = Date()
            let answer = connection.read(timeout: 3)
            return (answer, Date().timeIntervalSince(started) < 2)  // read ends early only when the daemon closes
        }
        let plain = try exchange("GET /healthz HTTP/1.0\r\n\r\n")
        #expect(plain.answer.contains("200") && plain.answer.lowercased().contains("connection: close") && plain.closed, "\(plain)")
        let keptAlive = try exchange("GET /healthz HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
        #expect(keptAlive.answer.contains("200") && !keptAlive.closed, "\(keptAlive)")
        let modern = try exchange("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        #expect(modern.answer.contains("200") && !modern.closed, "\(modern)")
        #expect(b.stop() == 0)
    }
}
