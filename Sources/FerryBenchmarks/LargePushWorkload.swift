// A pushing peer's memory while it pushes one large change set (docs/RELIABILITY.md §10): one save
// of N Person objects on A by `ferry put` (default 400,000: a change set of 57.3 MB of text), then P peers (default
// 2), started together, to which A's `ferry run` pushes it (they do not pull). Prints how much A's
// peak resident memory grew (`VmHWM`, from before the peers start until every one holds the change
// set) per peer, against the change set's size, and how long the last peer took to hold it (most of
// which is the peers' taking it in).
//
//     swift build -c release --product ferry && swift build -c release --product FerryBenchmarks
//     .build/release/FerryBenchmarks --large-push [--count N] [--runs P]
import Foundation
import FerryModel
import FerryTestSupport

enum LargePushWorkload {
    static func run(count: Int, peers peerCount: Int, model: ManagedObjectModel) throws {
        print("Large push: `ferry run` on A pushes one change set of \(count) Person objects to \(peerCount) peer(s)")
        let a = try DaemonPeer(name: "a", model: SampleModels.path("OrgChart"), pullInterval: 3600, maxBackoff: 1)
        let peers = try (0..<max(peerCount, 1)).map { try DaemonPeer(name: "peer\($0)", model: SampleModels.path("OrgChart"), pullInterval: 3600) }
        // A's store made by `ferry init` (its signing key), its change set by `ferry put`; each peer pins A's key.
        guard try a.ferry(["init"]).status == 0 else { throw DaemonPeerError(description: "ferry init on A failed") }
        for peer in peers {
            try a.connect(to: peer)
            try peer.pin(a)
            peer.serverSettings = ["max_body_bytes": "1073741824"]
        }
        let made = try seconds { _ = try a.put(DaemonPeer.people("big-", 0..<count)) }
        let megabytes = Double(try SlowPullersWorkload.firstChangeSetBytes(at: a.store, model: model)) / 1_048_576
        print(String(format: "  the change set: %.1f MB of text, saved by `ferry put` in %.1f s", megabytes, made))
        try a.start()
        defer {
            _ = a.stop()
            peers.forEach { _ = $0.stop() }
        }
        // The peers are not running yet: A's rounds fail before they read the change set. Its peak so far is the baseline.
        Thread.sleep(forTimeInterval: 1.5)
        guard let baseline = a.peakResidentMemory else { throw DaemonPeerError(description: "A is not running:\n\(a.logExcerpt())") }
        let origin = try a.storeIdentifier()
        let started = DispatchTime.now().uptimeNanoseconds
        for peer in peers { try peer.start() }
        let held = try DaemonPeer.waitUntil(timeout: 600) { try peers.allSatisfy { try $0.changeSetCount(of: origin) == 1 } }
        guard held else { throw RawSQLiteError.failed("the peers did not get A's change set within 600 s:\n\(a.logExcerpt())") }
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
        guard let peak = a.peakResidentMemory else { throw DaemonPeerError(description: "A is not running:\n\(a.logExcerpt())") }
        let growth = Double(peak - baseline) / 1_048_576
        print(String(format: "  A's peak resident memory grew by %.1f MB: %.1f MB per peer, %.3f× the change set; " +
                         "the last peer held it %.1f s after the peers started",
                     growth, growth / Double(peers.count), growth / Double(peers.count) / megabytes, seconds))
    }
}
