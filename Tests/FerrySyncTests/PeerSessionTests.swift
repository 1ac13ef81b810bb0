import Foundation
import Testing
import FerrySync
import FerryTestSupport

/// The per-peer session state machine, stepped with a clock the test sets.
@Suite("Peer session state machine")
struct PeerSessionTests {
    let t0 = Date(timeIntervalSince1970: 1_800_000_000)
    func at(_ seconds: TimeInterval) -> Date { t0.addingTimeInterval(seconds) }

    @Test("idle → syncing → idle on success, with the attempt and success times")
    func success() throws {
        var session = PeerSession()
        var random = SeededGenerator(seed: 1)
        #expect(session.phase(at: t0) == .idle && session.canStart(at: t0))
        try session.start(at: t0)
        #expect(session.phase(at: at(5)) == .syncing(since: t0))
        #expect(!session.canStart(at: at(5)) && !session.canStart(at: at(5), force: true))
        #expect(try session.finish(error: nil, at: at(2), using: &random) == nil)
        #expect(session.phase(at: at(2)) == .idle)
        #expect(session.lastAttempt == t0 && session.lastSuccess == at(2) && session.lastError == nil)
    }

    @Test("A failure backs off exponentially with jitter; the backoff runs out on its own; a success resets it")
    func failures() throws {
        var session = PeerSession(retries: RetrySchedule(base: 1, maximum: 8, jitter: 0.5...1.5))
        var random = SeededGenerator(seed: 7)
        var clock: TimeInterval = 0
        for failure in 1...6 {
            try session.start(at: at(clock))
            let failedAt = at(clock + 1)
            let delay = try #require(try session.finish(error: .unreachable("down"), at: failedAt, using: &random))
            let until = failedAt.addingTimeInterval(delay)
            let nominal = min(8, pow(2, Double(failure - 1)))
            #expect(delay >= nominal * 0.5 && delay <= nominal * 1.5, "failure \(failure): \(delay) s")
            #expect(session.phase(at: failedAt) == .backingOff(until: until))
            #expect(session.consecutiveFailures == failure && session.lastError == .unreachable("down"))
            // Not before the backoff runs out, unless forced …
            let early = failedAt.addingTimeInterval(delay * 0.9)
            #expect(!session.canStart(at: early))
            #expect(session.canStart(at: early, force: true))
            #expect(throws: PeerSession.Refusal.backingOff(until: until)) { try session.start(at: early) }
            // … and idle again once it has.
            #expect(session.phase(at: until) == .idle)
            clock = until.timeIntervalSince(t0)
        }
        try session.start(at: at(clock))
        try session.finish(error: nil, at: at(clock + 1), using: &random)
        #expect(session.consecutiveFailures == 0 && session.retryAt == nil && session.lastError == nil)
    }

    @Test("A forced start (sync-now) runs during a backoff; no second round starts while one runs")
    func forcedAndRefused() throws {
        var session = PeerSession()
        var random = SeededGenerator(seed: 3)
        try session.start(at: t0)
        #expect(throws: PeerSession.Refusal.alreadySyncing) { try session.start(at: at(1), force: true) }
        try session.finish(error: .failed(status: 503, message: "busy"), at: at(1), using: &random)
        try session.start(at: at(1.1), force: true)
        #expect(session.phase(at: at(1.1)) == .syncing(since: at(1.1)))
        try session.finish(error: nil, at: at(2), using: &random)
        #expect(throws: PeerSession.Refusal.notSyncing) { try session.finish(error: nil, at: at(3), using: &random) }
    }

    // MARK: - Events in, rounds out

    /// Runs the round `session` asked for: starts it at `start` (as the coordinator does, forced).
    func run(_ round: PeerRound?, _ session: inout PeerSession, at start: TimeInterval) throws {
        guard round != nil else { return }
        try session.start(at: at(start), force: true)
    }

    @Test("The pull interval asks for a full round, even during a backoff; a commit for a push, except during a backoff")
    func eventsAskForRounds() throws {
        var session = PeerSession(retries: RetrySchedule(base: 10, maximum: 10, jitter: 1...1))
        var random = SeededGenerator(seed: 3)
        #expect(session.handle(.pullDue, at: t0, using: &random) == .full)
        #expect(session.handle(.localCommit, at: t0, using: &random) == .push)
        #expect(session.handle(.tick, at: t0, using: &random) == nil, "a peer that never failed is not retried")
        #expect(session.retryAt == nil)
        // A failed round: backing off until t0 + 11.
        try session.start(at: at(0), force: true)
        #expect(session.handle(.roundEnded(error: .unreachable("down")), at: at(1), using: &random) == nil)
        #expect(session.retryAt == at(11))
        #expect(session.handle(.localCommit, at: at(5), using: &random) == nil, "a commit waits for the retry")
        #expect(session.handle(.tick, at: at(10.9), using: &random) == nil, "not before the backoff runs out")
        #expect(session.handle(.pullDue, at: at(5), using: &random) == .full, "the pull interval runs even during a backoff")
        #expect(session.handle(.tick, at: at(11), using: &random) == .full, "the retry, when the backoff runs out")
        try run(.full, &session, at: 11)
        #expect(session.handle(.tick, at: at(12), using: &random) == nil, "a retry that runs asks for nothing more")
        #expect(session.handle(.roundEnded(error: nil), at: at(12), using: &random) == nil)
        #expect(session.retryAt == nil && session.consecutiveFailures == 0 && session.lastSuccess == at(12))
    }

    @Test("What is asked for while a round runs waits for the next tick after it, once: commits coalesce into one push, a full round covers a push")
    func pendingRounds() throws {
        var session = PeerSession()
        var random = SeededGenerator(seed: 5)
        try run(session.handle(.pullDue, at: t0, using: &random), &session, at: 0)
        // Three commits while the full round runs: one push, after it.
        for second in 1...3 { #expect(session.handle(.localCommit, at: at(Double(second)), using: &random) == nil) }
        #expect(session.pending == .push && !session.hasPendingRound(at: at(3)), "nothing to run while the round runs")
        #expect(session.handle(.tick, at: at(3.5), using: &random) == nil, "a tick during the round runs nothing")
        #expect(session.handle(.roundEnded(error: nil), at: at(4), using: &random) == nil)
        #expect(session.hasPendingRound(at: at(4)))
        #expect(session.handle(.tick, at: at(4.5), using: &random) == .push)
        #expect(session.pending == nil && session.handle(.tick, at: at(4.6), using: &random) == nil, "once")
        try run(.push, &session, at: 4.6)
        // A commit, then the pull interval, while the push runs: one full round after it.
        #expect(session.handle(.localCommit, at: at(5), using: &random) == nil)
        #expect(session.handle(.pullDue, at: at(5), using: &random) == nil)
        #expect(session.pending == .full)
        #expect(session.handle(.roundEnded(error: nil), at: at(6), using: &random) == nil)
        // A commit before the tick: its push runs now, and the full round asked for still waits.
        #expect(session.handle(.localCommit, at: at(6.1), using: &random) == .push)
        #expect(session.handle(.tick, at: at(6.2), using: &random) == .full)
        try run(.full, &session, at: 6.2)
        #expect(session.handle(.roundEnded(error: nil), at: at(7), using: &random) == nil)
        #expect(session.handle(.tick, at: at(7.5), using: &random) == nil, "nothing was asked for")
        #expect(session.handle(.roundEnded(error: nil), at: at(8), using: &random) == nil, "no round runs")
    }

    @Test("After a failed round, a push asked for meanwhile waits for the retry; a full round asked for still runs at the next tick")
    func pendingAfterFailure() throws {
        var session = PeerSession()
        var random = SeededGenerator(seed: 9)
        try run(session.handle(.localCommit, at: t0, using: &random), &session, at: 0)
        #expect(session.handle(.localCommit, at: at(1), using: &random) == nil)
        #expect(session.handle(.roundEnded(error: .unreachable("down")), at: at(2), using: &random) == nil)
        #expect(session.pending == nil && session.consecutiveFailures == 1 && !session.hasPendingRound(at: at(2)))
        try run(session.handle(.pullDue, at: at(3), using: &random), &session, at: 3)
        #expect(session.handle(.pullDue, at: at(4), using: &random) == nil)
        #expect(session.handle(.roundEnded(error: .unreachable("down")), at: at(5), using: &random) == nil)
        #expect(session.consecutiveFailures == 2 && session.hasPendingRound(at: at(5)), "backing off, a full round asked for still runs")
        #expect(session.handle(.tick, at: at(5.1), using: &random) == .full)
    }
}
