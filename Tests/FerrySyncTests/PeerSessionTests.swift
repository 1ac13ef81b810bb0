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
}
