import Foundation
import Testing
import FerryTestTraits
import FerryTestSupport

/// Crash safety (issue 6, point 1): `ferry run` killed with SIGKILL at random
/// moments — while it pulls a large backlog, while it pushes, while it replays —
/// and restarted each time. Afterwards every change set is in each store exactly
/// once, SQLite finds the files sound, nothing is quarantined or left waiting,
/// and the replicas converge.
///
/// `FERRY_CRASH_KILLS=N` sets the number of kills (24 by default);
/// `FERRY_SEED=S` replays one run's schedule of writes and kill moments.
@Suite("Crash safety: SIGKILL at random moments", .blocking, .serialized)
struct CrashSafetyTests {
    static let model = SampleModels.path("OrgChart")

    /// What a round does before its kill.
    enum Moment: CaseIterable, CustomStringConvertible {
        /// B was down while A wrote a backlog; B is killed while it pulls and replays it.
        case pull
        /// A is killed while it pushes a backlog to B.
        case push
        /// A pushes a large backlog; B is killed while it replays it.
        case replay

        var description: String {
            switch self {
            case .pull: "during a pull"
            case .push: "during a push"
            case .replay: "during replay"
            }
        }
    }

    @Test("Killed while pulling, pushing and replaying (24 times; FERRY_CRASH_KILLS sets how many): every change set once, files sound, replicas equal")
    func killsAtRandomMoments() throws {
        let environment = ProcessInfo.processInfo.environment
        let kills = environment["FERRY_CRASH_KILLS"].flatMap(Int.init) ?? 24
        let seed = environment["FERRY_SEED"].flatMap(UInt64.init) ?? UInt64.random(in: 1...999_999)
        var random = SeededGenerator(seed: seed)
        let context = "seed \(seed) (rerun with FERRY_SEED=\(seed))"

        let (a, b) = try DaemonPeer.startedPair(model: Self.model)

        var writer = PeopleWriter()
        func save(on peer: DaemonPeer, count: Int) throws { try writer.save(on: peer, count: count, random: &random) }

        // Each round makes the victim some work, then kills it three times in a row at
        // random moments, restarting it in between: it must resume where it stopped.
        let killsPerRound = 3
        var tally: [String: Int] = [:]
        // Kills that provably landed inside a transfer: B held more of A's change sets than when
        // the victim started, and fewer than A has.
        var midTransfer: [String: Int] = [:]
        let originA = try a.storeIdentifier()
        for round in 0..<(kills + killsPerRound - 1) / killsPerRound {
            let moment = Moment.allCases[round % Moment.allCases.count]
            let victim: DaemonPeer
            switch moment {
            case .pull:
                // B is down while A writes a backlog; B starts, pulls it, and dies somewhere in it.
                b.stop()
                // Many change sets, so that the transfer takes many transactions and a kill lands inside it.
                try writer.saveMany(on: a, saves: 60, perSave: 15...40, random: &random)
                try b.launch()
                victim = b
            case .push:
                // A saves while its daemon is down (another process on the file); the daemon
                // starts, pushes the new change sets to B, and dies somewhere in it.
                a.stop()
                try writer.saveMany(on: a, saves: 60, perSave: 10...30, random: &random)
                try save(on: b, count: Int.random(in: 1...20, using: &random))
                try a.launch()
                victim = a
            case .replay:
                // A large backlog reaches B as pushes; B dies while replaying them.
                a.stop()
                try writer.saveMany(on: a, saves: 40, perSave: 30...60, random: &random)
                try a.launch()
                victim = b
            }
            let other = victim === a ? b : a
            let total = try a.changeSetCount(of: originA)
            for attempt in 0..<killsPerRound {
                // B takes in A's backlog in every moment: wait until it has started (the daemon is up and
                // the transfer runs), then kill at a random point a little later.
                let before = try b.changeSetCount(of: originA)
                let waitingSince = Date()
                while try b.changeSetCount(of: originA) == before, before < total, Date().timeIntervalSince(waitingSince) < 30 {
                    Thread.sleep(forTimeInterval: 0.005)
                }
                Thread.sleep(forTimeInterval: Double.random(in: 0...0.03, using: &random))
                victim.kill()
                tally[moment.description, default: 0] += 1
                let after = try b.changeSetCount(of: originA)
                if after > before && after < total { midTransfer[moment.description, default: 0] += 1 }
                if attempt < killsPerRound - 1 { try victim.launch() }
            }
            try victim.start()
            if !other.isRunning { try other.start() }
        }
        let killCount = tally.values.reduce(0, +)
        for moment in Moment.allCases where tally[moment.description, default: 0] > 0 {
            #expect(midTransfer[moment.description, default: 0] > 0,
                    "\(context): none of the \(tally[moment.description, default: 0]) kills \(moment) landed inside a transfer: \(midTransfer)")
        }

        let converged = try DaemonPeer.waitUntil(timeout: 120) {
            let dumps = try [a.dump(), b.dump()]
            return dumps[0] == dumps[1] && dumps[0].split(separator: "\n").count == writer.objects
        }
        #expect(converged, "\(context): the replicas did not converge\nlog a:\n\(a.logExcerpt())\nlog b:\n\(b.logExcerpt())")
        #expect(a.stop() == 0 && b.stop() == 0, "\(context): a clean stop after the crashes")

        try expectEveryChangeSetOnce(in: [a, b], saves: writer.saves, context: context)
        for peer in [a, b] {
            let conflicts = try peer.ferry(["conflicts", "list"])
            #expect(conflicts.status == 0 && conflicts.standardOutput.isEmpty, "\(context): \(conflicts.standardOutput)")
        }
        print("crash safety: \(killCount) kills (\(tally.sorted { $0.key < $1.key }.map { "\($0.value) \($0.key)" }.joined(separator: ", "))), "
              + "inside a transfer: \(midTransfer.sorted { $0.key < $1.key }.map { "\($0.value) \($0.key)" }.joined(separator: ", ")); "
              + "\(writer.saves) saves, \(writer.objects) objects; \(context)")
    }
}
