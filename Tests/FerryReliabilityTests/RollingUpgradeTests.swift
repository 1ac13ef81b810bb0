import Foundation
import Testing
import FerryTestTraits
import FerryModel
import FerryTestSupport

/// A rolling upgrade (issue 22, point 3): three daemons in a full mesh, each with its own copy of
/// the model bundle, upgraded one at a time through two versions — an additive one, then one
/// with a rename (Renaming ID) and a removal — with writes on every peer before, between and
/// after the upgrades. At the end they converge, nothing waits, and every note written is there.
@Suite("Rolling upgrade of three daemons", .blocking, .serialized)
struct RollingUpgradeTests {
    static let version1 = try! ManagedObjectModel {
        Entity("Note") { Attribute("text", .string); Attribute("stars", .integer16); Attribute("scratch", .string) }
    }
    /// Additive: a new optional attribute.
    static let version2 = try! ManagedObjectModel {
        Entity("Note") { Attribute("text", .string); Attribute("stars", .integer16); Attribute("scratch", .string); Attribute("color", .string) }
    }
    /// `text` renamed to `body` (Renaming ID), `scratch` removed.
    static let version3 = try! ManagedObjectModel {
        Entity("Note") { Attribute("body", .string, renamedFrom: "text"); Attribute("stars", .integer16); Attribute("color", .string) }
    }

    /// The bundle as it stands after `upgrades` upgrades: every version so far, the last current.
    static func writeBundle(_ path: String, upgrades: Int) throws {
        let versions = [("Notes", version1), ("Notes 2", version2), ("Notes 3", version3)].prefix(upgrades + 1)
        try ModelBundle.write(Array(versions), current: versions.last?.0 ?? "Notes", to: path)
    }

    @Test("Three daemons upgraded one by one through an additive and a rename-and-removal version, writing throughout, converge with nothing lost or waiting")
    func rollingUpgrade() throws {
        let bundles = TemporaryDirectory(prefix: "ferry-rolling")
        let names = ["a", "b", "c"]
        for name in names { try Self.writeBundle(bundles.file("\(name)/Notes.xcdatamodeld"), upgrades: 0) }
        let peers = try names.map { try DaemonPeer(name: $0, model: bundles.file("\($0)/Notes.xcdatamodeld"), pullInterval: 0.5, maxBackoff: 1) }
        for from in peers { for to in peers where to !== from { try from.connect(to: to) } }
        for peer in peers { try peer.start() }
        defer { for peer in peers { _ = peer.stop() } }

        var upgrades = [0, 0, 0]
        var written: [String] = []
        /// Each peer writes one note in the version it runs (the field names of that version).
        func writeEverywhere(_ round: String) throws {
            for (index, peer) in peers.enumerated() {
                let text = "\(round)-\(peer.name)"
                let values = upgrades[index] == 2 ? #""body":"\#(text)","stars":\#(index),"color":"c\#(index)""#
                    : upgrades[index] == 1 ? #""text":"\#(text)","stars":\#(index),"scratch":"s","color":"c\#(index)""#
                    : #""text":"\#(text)","stars":\#(index),"scratch":"s""#
                _ = try peer.put(#"[{"op":"insert","entity":"Note","values":{\#(values)}}]"#)
                written.append(text)
            }
        }
        func upgrade(_ index: Int) throws {
            #expect(peers[index].stop() == 0, "\(peers[index].name) did not stop cleanly\n\(peers[index].logExcerpt())")
            upgrades[index] += 1
            try Self.writeBundle(bundles.file("\(peers[index].name)/Notes.xcdatamodeld"), upgrades: upgrades[index])
            try peers[index].start()
            #expect(peers[index].log().contains("store migrated to the model's current version"), "\(peers[index].logExcerpt())")
        }

        /// `ferry status` of a peer, parsed.
        func status(_ peer: DaemonPeer) throws -> [String: Any] {
            let output = try FerryProcess.run(["status", "--config", peer.configuration]).standardOutput
            return try #require(try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any])
        }

        try writeEverywhere("start")
        for step in 0..<6 {
            try upgrade(step % 3)  // a, b, c to version 2, then a, b, c to version 3
            try writeEverywhere("after-\(step)")
            if step == 0 {
                // B, not yet upgraded, shows A's version and the change sets waiting for it.
                let seen = try DaemonPeer.waitUntil(timeout: 20) {
                    let document = try status(peers[1])
                    let peerA = (document["peers"] as? [[String: Any]])?.first { $0["name"] as? String == "a" }
                    return (document["waiting_for_model"] as? Int ?? 0) >= 1 && peerA?["model"] as? String == Self.version2.versionHash
                }
                #expect(seen, "b's status: \((try? status(peers[1])) ?? [:])")
            }
        }
        // Everyone runs version 3: the last writes bring every replay round in; nothing may wait.
        let settled = try DaemonPeer.waitUntil(timeout: 60) {
            let dumps = try peers.map { try $0.dump() }
            let pending = try peers.map { try $0.changeSetLog().pending }
            return Set(dumps).count == 1 && pending.allSatisfy { $0 == 0 }
        }
        let report = peers.map { "\($0.name): pending \((try? $0.changeSetLog().pending) ?? -1)\n\($0.logExcerpt(characters: 1500))" }.joined(separator: "\n")
        #expect(settled, "no convergence, or change sets still waiting, 60 s after the last upgrade\n\(report)")
        let notes = try peers[0].dump().split(separator: "\n").map { line in
            try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        }
        let bodies = Set(notes.compactMap { ($0["values"] as? [String: Any])?["body"] as? String })
        #expect(bodies == Set(written), "lost: \(Set(written).subtracting(bodies)); unexpected: \(bodies.subtracting(written))")
        #expect(notes.allSatisfy { ($0["values"] as? [String: Any])?["scratch"] == nil }, "the removed attribute is gone everywhere")
        #expect(notes.count == written.count)
        for peer in peers {
            // (A peer's version is refreshed when a round next asks it for its state.)
            let upToDate = try DaemonPeer.waitUntil(timeout: 20) {
                let document = try status(peer)
                let models = Set(((document["peers"] as? [[String: Any]]) ?? []).compactMap { $0["model"] as? String })
                return document["waiting_for_model"] as? Int == 0 && models == [Self.version3.versionHash]
            }
            #expect(upToDate, "\(peer.name): \((try? status(peer)) ?? [:])")
        }
    }
}
