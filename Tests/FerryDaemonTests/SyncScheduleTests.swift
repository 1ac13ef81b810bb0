import Foundation
import Logging
import Testing
import FerryModel
import FerryStore
import FerrySQLite
import FerrySync
import FerryServer
import FerryTestSupport
import FerryTesting
import FerrySigning
@testable import FerryDaemon

/// The sync loop's pull schedule on a ``ManualClock``: rounds happen when the clock says,
/// never because real time passed.
@Suite("Sync schedule on a manual clock")
struct SyncScheduleTests {
    @Test("A full round at start; a failed peer is retried when its backoff runs out on the clock, not before; the pull interval brings the next")
    func retriesAndPullsByTheClock() async throws {
        let directory = TemporaryDirectory()
        let store = try SQLiteStore(path: directory.file("s.sqlite"), model: try SampleModels.load("OrgChart"))
        let endpoint = try ReplicationEndpoint(store: store)
        let clock = ManualClock()
        let start = clock.now()
        // A peer nothing listens for: every round with it fails at once (connection refused). The port stays
        // bound (not listening) for the whole test, so no server of a parallel test can take it meanwhile.
        let down = try RefusingPort()
        defer { withExtendedLifetime(down) {} }
        let nowhere = down.url
        let coordinator = SyncCoordinator(endpoint: endpoint, peers: [("down", nowhere, "token", .systemStore)], batchSize: 10,
                                          requestTimeout: 5, retries: RetrySchedule(base: 10, maximum: 10, jitter: 1...1),
                                          logger: Logger(label: "schedule-test"), clock: clock)
        // No purges: their schedule would sleep on the same clock, and `sleeperCount` must count the pull schedule alone.
        let loop = SyncLoop(coordinator: coordinator, endpoint: endpoint, pullInterval: 1_000,
                            history: Configuration.History(purgeInterval: 0), notifier: SystemdNotifier(environment: [:]),
                            logger: Logger(label: "schedule-test"))
        let running = Task { [loop] in try await loop.run() }
        defer { running.cancel() }

        /// The peer's status once it has failed `failures` times and the loop sleeps on the clock again
        /// (waiting in real time, bounded generously: before the `.blocking` trait, synchronous tests kept
        /// Swift's two shared threads from the loop for minutes, and twice a 120 s bound ran out; a slow
        /// machine under the full suite still slows the loop). Alone it takes well under a second.
        func peer(afterFailures failures: Int) async throws -> StatusDocument.Peer {
            let deadline = Date().addingTimeInterval(600)
            while Date() < deadline {
                if let peer = await coordinator.status().peers.first, peer.consecutiveFailures == failures, clock.sleeperCount > 0 { return peer }
                try await Task.sleep(for: .milliseconds(5))
            }
            throw DaemonPeerError(description: "the peer did not reach \(failures) failures: \(await coordinator.status().peers)")
        }

        /// Waits (in real time, bounded as above) until the loop sleeps on the clock again, past its present time.
        func loopSleepsAgain() async throws {
            let deadline = Date().addingTimeInterval(600)
            while Date() < deadline {
                if clock.sleeperCount == 1, let next = clock.nextDeadline, next > clock.now() { return }
                try await Task.sleep(for: .milliseconds(5))
            }
            throw DaemonPeerError(description: "the loop did not sleep on the clock again")
        }

        // At start: one full round, failed; the retry is due 10 s later on the clock.
        let first = try await peer(afterFailures: 1)
        #expect(first.lastAttempt == start && first.retryAt == start.addingTimeInterval(10))
        // Time does not move: the loop sleeps on the clock (a nap of at most `longestNap`), and nothing
        // else wakes it, so nothing more can happen until the clock moves.
        #expect(clock.sleeperCount == 1 && clock.nextDeadline == start.addingTimeInterval(SyncLoop.longestNap))
        // 9 s on the clock: still inside the backoff. The loop wakes, looks, and goes back to sleep
        // (until the retry is due) without a round: once it sleeps again, it has decided.
        #expect(clock.advance(by: 9) == 1)
        try await loopSleepsAgain()
        #expect(clock.nextDeadline == start.addingTimeInterval(10))
        #expect(await coordinator.status().peers.first?.consecutiveFailures == 1, "a round ran inside the backoff")
        // Past the backoff: retried once, at that moment of the clock.
        clock.advance(by: 1.5)
        let second = try await peer(afterFailures: 2)
        #expect(second.lastAttempt == start.addingTimeInterval(10.5))
        // Past the pull interval (1,000 s ± 10 %): the next full round, whatever the backoff.
        clock.advance(by: 1_200)
        let third = try await peer(afterFailures: 3)
        #expect(third.lastAttempt == start.addingTimeInterval(1_210.5))
    }

    @Test("Through the in-memory transport: a cut peer fails and waits out its backoff on the clock; healed, the retry brings both stores level")
    func inMemoryPeer() async throws {
        let model = try SampleModels.load("OrgChart")
        let directory = TemporaryDirectory()
        let local = try SQLiteStore(path: directory.file("local.sqlite"), model: model)
        let remote = InMemoryStore(model: model)
        let token = "peer-token-0123456789abcdef"
        let transport = InMemoryTransport()
        transport.serve(FerryAPI(endpoint: try ReplicationEndpoint(store: remote), tokens: AccessTokens([(token, .peer)]), maxBodyBytes: 1 << 20).router(),
                        at: "remote")
        transport.setCut(true, host: "remote")
        for (store, name) in [(local as any PersistentStore, "Ann"), (remote, "Bob")] {
            let context = try PersistentContainer(store: store).newContext()
            try context.make("Person", ["name": name])
            try context.save()
        }
        let clock = ManualClock()
        let endpoint = try ReplicationEndpoint(store: local)
        let coordinator = SyncCoordinator(endpoint: endpoint, peers: [("remote", InMemoryTransport.url(of: "remote"), token, .systemStore)], batchSize: 10,
                                          requestTimeout: 5, retries: RetrySchedule(base: 10, maximum: 10, jitter: 1...1),
                                          logger: Logger(label: "in-memory-test"), clock: clock, transport: transport)
        let failed = await coordinator.round()
        #expect(failed.first?.error?.isRetryable == true, "\(failed)")
        #expect(transport.requestCount == 0)
        // Backing off until the clock moves: neither the clock's look nor a commit starts a round.
        #expect(await coordinator.handle(.tick).isEmpty)
        #expect(await coordinator.handle(.localCommit).isEmpty)
        #expect(transport.requestCount == 0)
        transport.setCut(false, host: "remote")
        clock.advance(by: 10)
        let healed = await coordinator.handle(.tick)
        #expect(healed.first?.error == nil && healed.first?.pulled.applied == 1 && healed.first?.pushed.applied == 1, "\(healed)")
        func dump(_ store: any PersistentStore) throws -> [String] {
            var lines: [String] = []
            try StoreDump(store: store).write { lines.append($0) }
            return lines
        }
        #expect(try dump(local) == dump(remote) && dump(local).count == 2)
    }

    @Test("The peer's own change sets taken in since its vector was read are not counted as to push to it")
    func peersOwnChangeSetsAreNotLag() async throws {
        let (local, remote, transport) = try Self.storesServed()
        let endpoint = try ReplicationEndpoint(store: local)
        let coordinator = Self.coordinator(of: endpoint, reaching: transport, label: "lag")
        // A full round reads the peer's vector (empty), then the peer saves three times and pushes them
        // here: this store takes them in, and its commit starts a push-only round from that old vector.
        #expect(await coordinator.round().first?.error == nil)
        let context = try PersistentContainer(store: remote).newContext()
        for name in ["Ann", "Bob", "Cy"] {
            try context.make("Person", ["name": name])
            try context.save()
        }
        #expect(try await endpoint.apply(lines: remote.changeSetLines(after: [:], limit: nil)).applied == 3)
        let pushOnly = try #require(await coordinator.round(peer: "remote", pull: false).first)
        #expect(pushOnly.error == nil && pushOnly.pushed.applied == 0, "\(pushOnly)")
        let peer = try #require(await coordinator.status().peers.first)
        #expect(peer.toPush == 0 && peer.toPull == 0, "\(peer)")
        // This store's own change set goes in the next push-only round, and then nothing is left to push.
        let own = try PersistentContainer(store: local).newContext()
        try own.make("Person", ["name": "Dee"])
        try own.save()
        #expect(await coordinator.round(peer: "remote", pull: false).first?.pushed.applied == 1)
        #expect(await coordinator.status().peers.first?.toPush == 0)
    }

    @Test("A commit while a round runs starts no round beside it: its push runs at the next tick after the round")
    func roundsTakeTurns() async throws {
        let (local, _, transport) = try Self.storesServed()
        let endpoint = try ReplicationEndpoint(store: local)
        let coordinator = Self.coordinator(of: endpoint, reaching: transport, label: "turns")
        let context = try PersistentContainer(store: local).newContext()
        try context.make("Person", ["name": "Ann"])
        try context.save()
        transport.holdRequests()
        let full = Task { await coordinator.round() }
        /// (Bounded generously, as `peer(afterFailures:)` above: under the full suite the shared pool may
        /// be slow to run the round's task.)
        func wait(until condition: () -> Bool) async throws {
            let deadline = Date().addingTimeInterval(600)
            while !condition() {
                guard Date() < deadline else { throw DaemonPeerError(description: "timed out; \(transport.heldCount) request(s) held") }
                try await Task.sleep(for: .milliseconds(5))
            }
        }
        try await wait { transport.heldCount == 1 }
        // A commit while the full round runs: no second round starts beside it (the session keeps the
        // push for when the round ends), and nothing more is sent meanwhile.
        #expect(await coordinator.handle(.localCommit).isEmpty)
        #expect(transport.heldCount == 1, "a request was sent beside the full round")
        transport.releaseRequests()
        // The round asked for reports itself alone; the push waits for the loop's next look at its clock.
        let results = await full.value
        #expect(results.count == 1, "\(results)")
        let fullResult = try #require(results.first)
        #expect(fullResult.error == nil && fullResult.pushed.applied == 1, "\(fullResult)")
        let pushResult = try #require(await coordinator.handle(.tick).first)
        // The push ran after the full round, which had pushed the save already: nothing was left to send.
        #expect(pushResult.error == nil && pushResult.pushed == ApplyReport() && pushResult.pulled == ApplyReport(), "\(pushResult)")
        #expect(pushResult.finished >= fullResult.finished)
        #expect(await coordinator.handle(.tick).isEmpty, "the push ran once")
    }

    @Test("Lag counts what either side lacks, except the peer's own change sets on the side to push")
    func lagFromVectors() {
        let (peer, this, other) = (UUID(), UUID(), UUID())
        // The peer's vector is old for its own origin (3 taken in here since): not to push; ahead for another: to pull.
        let lag = SyncCoordinator.lag(peerVector: [peer: 1, other: 5], local: [peer: 4, this: 2, other: 3], peerStore: peer)
        #expect(lag?.toPull == 2 && lag?.toPush == 2)
        // Without the peer's UUID (a round that never read the peer's state), every difference counts.
        #expect(SyncCoordinator.lag(peerVector: [peer: 1], local: [peer: 4], peerStore: nil)?.toPush == 3)
        #expect(SyncCoordinator.lag(peerVector: nil, local: [peer: 4], peerStore: peer) == nil)
    }

    @Test("A round whose pull the peer refuses still pushes this store's change sets to it")
    func pushAfterRefusedPull() async throws {
        let (local, remote, transport) = try Self.storesServed()
        transport.refuse("POST", "/v1/changesets/pull", with: 400)
        let context = try PersistentContainer(store: local).newContext()
        try context.make("Person", ["name": "Ann"])
        try context.save()
        let coordinator = Self.coordinator(of: try ReplicationEndpoint(store: local), reaching: transport, label: "refused-pull")
        let result = try #require(await coordinator.round().first)
        #expect(result.error == .failed(status: 400, message: "refused by the test"), "\(result)")
        #expect(result.pushed.applied == 1, "\(result)")
        #expect(try remote.historyState().vector == [local.identifier: 1])
    }

    private static let peerToken = "peer-token-0123456789abcdef"

    /// Two in-memory stores of the sample model, the remote one served as "remote" on an in-memory transport.
    private static func storesServed() throws -> (local: InMemoryStore, remote: InMemoryStore, transport: InMemoryTransport) {
        let model = try SampleModels.load("OrgChart")
        let (local, remote) = (InMemoryStore(model: model), InMemoryStore(model: model))
        let transport = InMemoryTransport()
        transport.serve(FerryAPI(endpoint: try ReplicationEndpoint(store: remote), tokens: AccessTokens([(peerToken, .peer)]), maxBodyBytes: 1 << 20).router(),
                        at: "remote")
        return (local, remote, transport)
    }

    /// A coordinator of `endpoint` with the one peer "remote", reached through `transport`, on a manual clock.
    private static func coordinator(of endpoint: ReplicationEndpoint, reaching transport: InMemoryTransport, label: String) -> SyncCoordinator {
        SyncCoordinator(endpoint: endpoint, peers: [("remote", InMemoryTransport.url(of: "remote"), peerToken, .systemStore)],
                        batchSize: 10, requestTimeout: 5, logger: Logger(label: label), clock: ManualClock(), transport: transport)
    }
}

/// A pushed change set of an origin not known yet: the endpoint asks the peers it was given for
/// their keys itself (through their clients), takes the key, and applies the push; no call goes
/// back up to the daemon.
@Suite("Keys learned on a push")
struct KeysLearnedOnPushTests {
    @Test("A push from a store whose key is not known yet is applied once the endpoint has asked its peers; without peers to ask, it is refused")
    func learnsFromPeers() async throws {
        let model = try SampleModels.load("OrgChart")
        let directory = TemporaryDirectory()
        let a = try SQLiteStore(path: directory.file("a.sqlite"), model: model, options: .init(signingKey: StoreSigningKey()))
        let b = try SQLiteStore(path: directory.file("b.sqlite"), model: model, options: .init(signingKey: StoreSigningKey()))
        let context = try PersistentContainer(store: a).newContext()
        try context.make("Person", ["name": "Ann"])
        try context.save()
        let lines = try a.changeSetLines(after: [:], limit: nil)
        let token = "peer-token-0123456789abcdef"
        let transport = InMemoryTransport()
        transport.serve(FerryAPI(endpoint: try ReplicationEndpoint(store: a), tokens: AccessTokens([(token, .peer)]), maxBodyBytes: 1 << 20).router(),
                        at: "a")
        // B signs, refuses unknown origins and trusts its configured peers on first use: the daemon's defaults.
        let endpoint = try ReplicationEndpoint(store: b, trust: OriginTrust(store: b, policy: .init()))
        await #expect(throws: ReplayError.self) { try await endpoint.receive(lines: lines) }
        endpoint.askForKeys(from: [("a", PeerClient(baseURLs: [InMemoryTransport.url(of: "a")], token: token, transport: transport))])
        let report = try await endpoint.receive(lines: lines)
        #expect(report.applied == 1, "\(report)")
        #expect(transport.requestCount >= 1, "a was not asked for its keys")
    }

    @Test("Asking peers for keys ends at its timeout, whatever a peer that does not answer does")
    func askingEndsAtTheTimeout() async throws {
        let model = try SampleModels.load("OrgChart")
        let directory = TemporaryDirectory()
        let store = try SQLiteStore(path: directory.file("b.sqlite"), model: model)
        let transport = InMemoryTransport()
        transport.serve(FerryAPI(endpoint: try ReplicationEndpoint(store: InMemoryStore(model: model)), tokens: AccessTokens([("t-0123456789abcdef", .peer)]),
                                 maxBodyBytes: 1 << 20).router(), at: "silent")
        transport.holdRequests()  // the peer never answers while held
        defer { transport.releaseRequests() }
        let endpoint = try ReplicationEndpoint(store: store)
        endpoint.askForKeys(from: [("silent", PeerClient(baseURLs: [InMemoryTransport.url(of: "silent")], token: "t-0123456789abcdef", transport: transport))])
        // It returns while the peer's request is still held: it did not wait for the peer. (Bounded
        // generously in real time: in a full run the shared pool runs the timeout's task late, and
        // one run took 15.8 s for 0.3 s; the version before this waited for the peer, forever here.)
        let wait = Task { await endpoint.learnKeysFromPeers(timeout: .milliseconds(300)) }
        #expect(await BoundedWaiting.result(of: wait, within: .seconds(120)) != nil, "the wait ran past its timeout")
        #expect(transport.heldCount == 1, "the peer was asked, and had not answered when the wait ended")
    }
}
