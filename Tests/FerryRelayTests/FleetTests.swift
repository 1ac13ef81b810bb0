import Foundation
import Testing
import FerryTestTraits
import FerryTestSupport

/// Issue 24's fleet: two relays on one PostgreSQL database and twenty daemons writing everywhere,
/// one relay killed mid-run and started again: every daemon converges, nothing lost or doubled.
@Suite("Fleet through relays", .blocking, .serialized)
struct FleetTests {
    static let peerCount = 20

    @Test("twenty daemons, two relays, one relay killed mid-run and restarted: every daemon converges with every save once")
    func twentyPeersTwoRelays() async throws {
        let cluster = try RelayFixtures.cluster()
        let names = (0..<Self.peerCount).map { "p\($0)" }
        let peers = try RelayFixtures.peers(names, pullInterval: 5)
        let keys = try RelayFixtures.keys(of: peers)
        let first = try RelayProcess(name: "r1", cluster: cluster, database: "ferry", pinned: keys)
        let second = try RelayProcess(name: "r2", cluster: cluster, database: "ferry", pinned: keys, sharingTokensWith: first)
        try first.start()
        try second.start()
        // Half the fleet lists the first relay first, half the second: both carry traffic.
        for (index, peer) in peers.enumerated() {
            let urls = index % 2 == 0 ? [first.url, second.url] : [second.url, first.url]
            try peer.connect(name: "relays", urls: urls, token: first.peerToken)
        }
        var daemons: [InProcessDaemon] = []
        for peer in peers { daemons.append(try await InProcessDaemon(peer)) }

        // Three waves of one save on every daemon; the first relay dies during the second wave and
        // comes back before the third.
        var saves = 0
        for wave in 0..<3 {
            for (index, peer) in peers.enumerated() {
                if wave == 1 && index == Self.peerCount / 2 { first.kill() }
                try RelayFixtures.save("w\(wave)-\(peer.name)", on: peer)
                saves += 1
            }
            if wave == 1 { try first.start() }
        }

        let expected = Set(peers.flatMap { peer in (0..<3).map { "w\($0)-\(peer.name)" } })
        let converged = try DaemonPeer.waitUntil(timeout: 120) {
            let dumps = try peers.map { try $0.dump() }
            return Set(dumps).count == 1 && expected.allSatisfy { dumps[0].contains("\"\($0)\"") }
        }
        let dumps = try peers.map { try $0.dump() }
        #expect(converged, """
            the fleet did not converge: \(Set(dumps).count) different dumps; p0's log: \(peers[0].logExcerpt()); p1's: \(peers[1].logExcerpt()); \
            r1's log: \(first.log().suffix(3000)); r2's: \(second.log().suffix(3000))
            """)
        // Nothing doubled: each store holds each save's object once, and the database each change set once.
        let people = dumps[0].components(separatedBy: "\"entity\":\"Person\"").count - 1
        #expect(people == saves, "\(people) people for \(saves) saves")
        #expect(try RelayFixtures.storedRows(in: cluster) == saves)
        let relayVector = try #require(try RelayFixtures.state(of: second)["vector"] as? [String: Int])
        #expect(relayVector.count == Self.peerCount && relayVector.values.allSatisfy { $0 == 3 }, "\(relayVector)")
        for peer in peers {
            let vector = try peer.vector()
            #expect(vector == relayVector, "\(peer.name): \(vector)")
        }
        for daemon in daemons { try await daemon.stop() }
    }
}
