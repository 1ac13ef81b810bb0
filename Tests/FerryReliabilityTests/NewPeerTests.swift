import Foundation
import Testing
import FerryTestTraits
import FerryTestSupport

/// A new peer with data of its own joins an existing pair (issue 6, point 4):
/// nothing on either side is lost or overwritten wholesale — every object each
/// side had before the join is, byte for byte, in every store afterwards.
@Suite("A new peer with its own data joins", .blocking, .serialized)
struct NewPeerTests {
    static let model = SampleModels.path("OrgChart")

    static func people(_ prefix: String, _ range: Range<Int>) -> String {
        "[" + range.map { index in
            let manager = index > range.lowerBound ? #","manager":"\#(prefix)\#(range.lowerBound)""# : ""
            return #"{"op":"insert","entity":"Person","ref":"\#(prefix)\#(index)","values":{"id":\#(index),"name":"\#(prefix)\#(index)"\#(manager)}}"#
        }.joined(separator: ",") + "]"
    }

    @Test("C, with 300 people of its own (ids overlapping the pair's), joins A–B through B: the union, nothing replaced")
    func joinWithOwnData() throws {
        let (a, b) = try DaemonPeer.startedPair(model: Self.model)
        let c = try DaemonPeer(name: "c", model: Self.model, pullInterval: 0.5, maxBackoff: 2)
        try a.put(Self.people("a", 0..<200))
        try b.put(Self.people("b", 0..<100))
        let paired = try DaemonPeer.waitUntil(timeout: 30) { try a.dump() == b.dump() }
        #expect(paired)

        // C has lived on its own: same ids as the pair's people, other objects; edited after its first save.
        #expect(try c.ferry(["init"]).status == 0)
        let cRefs = try c.put(Self.people("c", 0..<300))
        try c.put(#"[{"op":"update","object":"\#(try #require(cRefs["c5"]))","values":{"name":"c5 renamed"}}]"#)
        let before = try Set([a.dump(), c.dump()].flatMap { $0.split(separator: "\n").map(String.init) })
        #expect(before.count == 300 + 300)

        // C joins through B (B's configuration gains C; a restart picks it up). A and C never talk:
        // each pins the other's key (trust.keys), the documented way to add a store to a fleet;
        // B trusts C on first use, as C trusts B.
        try c.connect(to: b)
        try b.connect(to: c)
        try c.pin(a)
        try a.pin(c)
        b.stop()
        a.stop()
        try a.start()
        try b.start()
        try c.start()
        // And everyone keeps writing.
        try a.put(Self.people("x", 0..<10))
        try c.put(Self.people("y", 0..<10))

        let converged = try DaemonPeer.waitUntil(timeout: 40) {
            let dumps = try [a.dump(), b.dump(), c.dump()]
            return Set(dumps).count == 1 && dumps[0].split(separator: "\n").count == 620
        }
        let counts = try [a, b, c].map { "\($0.name) \(try $0.dump().split(separator: "\n").count) objects, \($0.processState)" }
        #expect(converged, "no convergence: \(counts)")
        let after = try Set(c.dump().split(separator: "\n").map(String.init))
        let lost = before.subtracting(after)
        #expect(lost.isEmpty, "objects lost or changed by the join: \(lost.prefix(3))")
        #expect(after.contains { $0.contains(#""name":"c5 renamed""#) })
        try expectEveryChangeSetOnce(in: [a, b, c], saves: 6, context: "join")
        for peer in [a, b, c] { #expect(peer.stop() == 0) }
    }
}
