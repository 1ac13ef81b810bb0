import Foundation
import Testing
import FerryTestTraits
import FerryModel
import FerryStore
import FerrySQLite
import FerrySigning
import FerryTestSupport

/// A fleet: two relays on one PostgreSQL database and twenty daemons writing everywhere, one relay
/// killed mid-run and started again: every daemon converges, nothing lost or doubled. The relays are
/// processes (one is killed); the daemons run in this process, and the test makes, writes and reads
/// their stores in it too, as an application beside its daemon does (no `ferry` process per call).
@Suite("Fleet through relays", .blocking, .serialized)
struct FleetTests {
    static let peerCount = 20

    @Test("twenty daemons, two relays, one relay killed mid-run and restarted: every daemon converges with every save once")
    func twentyPeersTwoRelays() async throws {
        let cluster = try RelayFixtures.cluster()
        let model = try XcodeModelReader.read(at: RelayFixtures.model)
        let peers = try (0..<Self.peerCount).map { try DaemonPeer(name: "p\($0)", model: RelayFixtures.model, pullInterval: 5, maxBackoff: 2) }
        // Each store made with its key beside it, as `ferry init` makes one.
        var stores: [SQLiteStore] = []
        var keys: [(origin: String, key: String)] = []
        for peer in peers {
            let key = StoreSigningKey()
            try key.write(to: StoreSigningKey.defaultPath(forStore: peer.store))
            let store = try SQLiteStore(path: peer.store, model: model, options: .init(signingKey: key))
            stores.append(store)
            keys.append((origin: store.identifier.uuidString, key: key.publicKey))
        }
        let containers = try stores.map { try PersistentContainer(store: $0) }
        func dump(_ index: Int) throws -> String { try StoreDump(store: stores[index]).entries().map(\.text).joined(separator: "\n") }
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
                let context = containers[index].newContext()
                try context.make("Person", ["name": "w\(wave)-\(peer.name)"])
                try context.save()
                saves += 1
            }
            if wave == 1 { try first.start() }
        }

        let expected = Set(peers.flatMap { peer in (0..<3).map { "w\($0)-\(peer.name)" } })
        let converged = try DaemonPeer.waitUntil(timeout: 120) {
            let dumps = try peers.indices.map(dump)
            return Set(dumps).count == 1 && expected.allSatisfy { dumps[0].contains("\"\($0)\"") }
        }
        let dumps = try peers.indices.map(dump)
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
