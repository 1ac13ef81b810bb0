import Foundation
import Testing
import FerryTestSupport

/// `ferry relay` against a real PostgreSQL cluster: daemons replicating through it, what it
/// refuses, each change set stored once, causal order, long polls, and failover between relays.
@Suite("Relay", .serialized)
struct RelayTests {
    @Test("two daemons replicate through a relay: saves on each reach the other, the relay holds each change set once")
    func replicateThroughRelay() throws {
        let cluster = try RelayFixtures.cluster()
        let peers = try RelayFixtures.peers(["a", "b"])
        let relay = try RelayProcess(name: "r1", cluster: cluster, database: "ferry", pinned: try RelayFixtures.keys(of: peers))
        try relay.start()
        for peer in peers {
            try peer.connect(name: "relay", urls: [relay.url], token: relay.peerToken)
            try peer.start()
        }
        let (a, b) = (peers[0], peers[1])
        try RelayFixtures.save("from a", on: a)
        try RelayFixtures.save("from b", on: b)
        let converged = try DaemonPeer.waitUntil(timeout: 30) {
            let dumps = try peers.map { try $0.dump() }
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
