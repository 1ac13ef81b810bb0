import Foundation
import Testing
import FerryTestTraits
import FerryTestSupport

/// Network faults (issue 6, point 2): two daemons talk only through
/// ``FaultProxy``s that delay, drop, cut off requests and responses mid-body
/// and reset connections. While the faults last, syncs fail and back off;
/// once they stop, the peers converge with nothing lost or applied twice.
@Suite("Network faults between two daemons", .blocking, .serialized)
struct NetworkFaultTests {
    static let model = SampleModels.path("OrgChart")

    /// About half the connections misbehave, one way or another.
    static let hostile = FaultProxy.FaultPlan(delay: 0.12, maxDelay: 0.15, drop: 0.1, truncateRequest: 0.1,
                                              truncateResponse: 0.1, truncateHeaders: 0.05, reset: 0.1)
    /// The faults the plan makes, each of which must have changed some bytes by the end.
    static let kinds: [FaultProxy.Fault] = [.delay, .drop, .truncateRequest, .truncateResponse, .truncateHeaders, .reset]

    @Test("Delays, drops, cut-off bodies and resets: syncs fail and retry; once the faults stop, the peers converge, nothing lost or doubled")
    func faultsThenConvergence() throws {
        let environment = ProcessInfo.processInfo.environment
        let seed = environment["FERRY_SEED"].flatMap(UInt64.init) ?? UInt64.random(in: 1...999_999)
        let rounds = environment["FERRY_FAULT_ROUNDS"].flatMap(Int.init) ?? 14
        var random = SeededGenerator(seed: seed)
        let context = "seed \(seed) (rerun with FERRY_SEED=\(seed))"

        let a = try DaemonPeer(name: "a", model: Self.model, pullInterval: 0.3, maxBackoff: 2)
        let b = try DaemonPeer(name: "b", model: Self.model, pullInterval: 0.3, maxBackoff: 2)
        let toA = try FaultProxy(upstreamPort: a.port, plan: Self.hostile, seed: seed)
        let toB = try FaultProxy(upstreamPort: b.port, plan: Self.hostile, seed: seed &+ 1)
        defer { toA.stop(); toB.stop() }
        try a.connect(to: b, via: toB.url)
        try b.connect(to: a, via: toA.url)
        try a.start()
        try b.start()

        var writer = PeopleWriter()
        // The rounds, then more (up to 40) until every kind of fault has happened at least once: the
        // daemons back off after each failure, so a fast run may make only a handful of requests.
        func unseen() -> [FaultProxy.Fault] {
            let counts = [toA.counts, toB.counts].reduce(into: [FaultProxy.Fault: Int]()) { $0.merge($1, uniquingKeysWith: +) }
            return Self.kinds.filter { counts[$0, default: 0] == 0 }
        }
        var round = 0
        while round < rounds || (round < rounds + 40 && !unseen().isEmpty) {
            try writer.save(on: a, count: Int.random(in: 50...400, using: &random), random: &random)
            try writer.save(on: b, count: Int.random(in: 5...60, using: &random), random: &random)
            Thread.sleep(forTimeInterval: Double.random(in: 0.1...0.5, using: &random))
            round += 1
        }
        toA.setPlan(.none)
        toB.setPlan(.none)
        let healed = Date()

        let converged = try DaemonPeer.waitUntil(timeout: 60) {
            let dumps = try [a.dump(), b.dump()]
            return dumps[0] == dumps[1] && dumps[0].split(separator: "\n").count == writer.objects
        }
        let seconds = Date().timeIntervalSince(healed)
        if !converged {
            print("daemon a: \(a.processState), daemon b: \(b.processState)")
            let keep = FileManager.default.temporaryDirectory.path + "/ferry-network-faults-\(seed)"
            try? FileManager.default.createDirectory(atPath: keep, withIntermediateDirectories: true)
            for peer in [a, b] { try? peer.log().write(toFile: "\(keep)/\(peer.name).log", atomically: true, encoding: .utf8) }
            print("logs kept in \(keep)")
        }
        #expect(converged, """
            \(context): no convergence 60 s after the faults stopped; proxy to a: \(toA.counts), to b: \(toB.counts)
            log a:
            \(a.logExcerpt())
            log b:
            \(b.logExcerpt())
            """)
        try expectEveryChangeSetOnce(in: [a, b], saves: writer.saves, context: context)

        // The faults really happened, each kind, and the daemons saw failures and retried.
        var counts: [FaultProxy.Fault: Int] = [:]
        for proxy in [toA, toB] { counts.merge(proxy.counts, uniquingKeysWith: +) }
        for fault in Self.kinds {
            #expect(counts[fault, default: 0] > 0, "\(context): no connection got \(fault): \(counts)")
        }
        let failures = (a.log() + b.log()).components(separatedBy: "failed:").count - 1
        #expect(failures > 0, "\(context): no sync failed while the faults lasted")
        let (stopA, stopB) = (a.stop(), b.stop())
        #expect(stopA == 0 && stopB == 0,
                "exit statuses a \(stopA) (\(a.processState)), b \(stopB) (\(b.processState))\nlog a:\n\(a.logExcerpt())\nlog b:\n\(b.logExcerpt())")
        print("network faults: \(counts.values.reduce(0, +)) connections "
              + "(\(counts.sorted { $0.key.rawValue < $1.key.rawValue }.map { "\($0.key.rawValue) \($0.value)" }.joined(separator: ", "))), "
              + "\(failures) failed syncs retried; converged \(String(format: "%.1f", seconds)) s after the faults stopped; "
              + "\(writer.saves) saves, \(writer.objects) objects; \(context)")
    }

    /// URLSession, the peers' client before AsyncHTTPClient, ended the process on a response cut
    /// inside its header block (swift-corelibs-foundation#5285). Here every answer B's daemon gets
    /// from A is cut inside its headers for a while: B's rounds fail and back off, B keeps running
    /// and serving, and once the cuts stop the two converge.
    @Test("Answers cut inside their headers: the daemon's rounds fail, the daemon lives on, and the peers converge once the cuts stop")
    func responseCutInsideHeaders() throws {
        let a = try DaemonPeer(name: "a", model: Self.model, pullInterval: 0.3, maxBackoff: 1)
        let b = try DaemonPeer(name: "b", model: Self.model, pullInterval: 0.3, maxBackoff: 1)
        let toA = try FaultProxy(upstreamPort: a.port, plan: .init(truncateHeaders: 1), seed: 1)
        defer { toA.stop() }
        try b.connect(to: a, via: toA.url)
        // A lists no peer: it pins B's key to take B's pushes.
        #expect(try b.ferry(["init"]).status == 0)
        try a.pin(b)
        try a.start()
        try b.start()
        var writer = PeopleWriter()
        var random = SeededGenerator(seed: 5)
        try writer.save(on: a, count: 20, random: &random)
        let cut = DaemonPeer.waitUntil(timeout: 30) { toA.counts[.truncateHeaders, default: 0] >= 5 }
        #expect(cut, "the proxy cut no answer inside its headers: \(toA.counts)")
        #expect(b.isRunning, "daemon b ended after answers cut inside their headers: \(b.processState)\n\(b.logExcerpt())")
        toA.setPlan(.none)
        try writer.save(on: b, count: 5, random: &random)
        let converged = try DaemonPeer.waitUntil(timeout: 30) {
            let dumps = try [a.dump(), b.dump()]
            return dumps[0] == dumps[1] && dumps[0].split(separator: "\n").count == writer.objects
        }
        #expect(converged, "no convergence 30 s after the cuts stopped\nlog b:\n\(b.logExcerpt())")
        #expect(b.log().contains("failed:"), "b logged no failed round while every answer was cut")
        let (stopA, stopB) = (a.stop(), b.stop())
        #expect(stopA == 0 && stopB == 0, "exit statuses a \(stopA), b \(stopB) (\(b.processState))")
    }
}

/// Saves of people through `ferry put` on any peer, counted, with edits of the peer's earlier objects.
struct PeopleWriter {
    private(set) var objects = 0
    private(set) var saves = 0
    private var own: [String: [String]] = [:]

    /// One save of `count` new people on `peer` (each managed by an earlier one of the save)
    /// and up to three edits of people that peer saved before.
    mutating func save(on peer: DaemonPeer, count: Int, random: inout SeededGenerator) throws {
        var operations = Self.inserts(from: objects, count: count)
        let earlier = own[peer.name] ?? []
        for _ in 0..<min(3, earlier.count) {
            let uri = earlier[Int.random(in: 0..<earlier.count, using: &random)]
            operations.append(#"{"op":"update","object":"\#(uri)","values":{"name":"edited on \#(peer.name) \#(saves)"}}"#)
        }
        let refs = try peer.put("[" + operations.joined(separator: ",") + "]")
        own[peer.name, default: []] += refs.values.sorted().prefix(5)
        objects += count
        saves += 1
    }

    /// `saves` saves of `perSave` new people each on `peer`, through one `ferry put` (JSON lines:
    /// one save per line), so that a backlog holds many change sets without a process per save.
    mutating func saveMany(on peer: DaemonPeer, saves count: Int, perSave: ClosedRange<Int>, random: inout SeededGenerator) throws {
        var lines: [String] = []
        var next = objects
        for _ in 0..<count {
            let size = Int.random(in: perSave, using: &random)
            lines.append("[" + Self.inserts(from: next, count: size).joined(separator: ",") + "]")
            next += size
        }
        let refs = try peer.put(lines.joined(separator: "\n"))
        own[peer.name, default: []] += refs.values.sorted().prefix(5)
        objects = next
        saves += count
    }

    /// The insert operations of people `first`, `first + 1`, … (each after the first of a save
    /// managed by an earlier one of the same save).
    private static func inserts(from first: Int, count: Int) -> [String] {
        (0..<count).map { offset in
            let id = first + offset
            let manager = offset > 0 ? #","manager":"r\#(first + offset / 4)""# : ""
            return #"{"op":"insert","entity":"Person","ref":"r\#(id)","values":{"id":\#(id),"name":"P\#(id)"\#(manager)}}"#
        }
    }
}

/// Each store holds every one of `saves` change sets exactly once, all applied, none held;
/// SQLite finds each file sound; the version vectors agree.
func expectEveryChangeSetOnce(in peers: [DaemonPeer], saves: Int, context: String,
                              sourceLocation: SourceLocation = #_sourceLocation) throws {
    for peer in peers {
        #expect(try peer.integrityCheck() == ["ok"], "\(context): \(peer.name)", sourceLocation: sourceLocation)
        let log = try peer.changeSetLog()
        let keys = log.entries.map { "\($0.origin)#\($0.sequence)" }
        #expect(keys.count == saves && Set(keys).count == saves,
                "\(context): \(peer.name) holds \(keys.count) change sets (\(Set(keys).count) distinct) of \(saves) saves",
                sourceLocation: sourceLocation)
        #expect(log.entries.allSatisfy { $0.status == 0 } && log.pending == 0,
                "\(context): \(peer.name) quarantined or held some", sourceLocation: sourceLocation)
    }
    let vectors = try peers.map { try $0.vector() }
    #expect(Set(vectors).count == 1, "\(context): vectors differ: \(vectors)", sourceLocation: sourceLocation)
}
