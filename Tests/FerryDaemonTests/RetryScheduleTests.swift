import Foundation
import Testing
import FerrySync
import FerryTestSupport

@Suite("Retry schedule")
struct RetryScheduleTests {
    @Test("Delays double from the base up to the maximum, each within the jitter, and a success resets them")
    func backoff() {
        var random = SeededGenerator(seed: 7)
        var schedule = RetrySchedule(base: 1, maximum: 60, jitter: 0.5...1.5)
        let start = Date(timeIntervalSince1970: 1_000_000)
        #expect(schedule.isDue(at: start))
        var delays: [TimeInterval] = []
        for attempt in 0..<10 {
            let now = start.addingTimeInterval(Double(attempt) * 100)
            let delay = schedule.recordFailure(at: now, using: &random)
            delays.append(delay)
            #expect(schedule.retryAt == now.addingTimeInterval(delay))
            #expect(!schedule.isDue(at: now.addingTimeInterval(delay - 0.001)))
            #expect(schedule.isDue(at: now.addingTimeInterval(delay)))
        }
        let nominal: [Double] = [1, 2, 4, 8, 16, 32, 60, 60, 60, 60]
        for (delay, expected) in zip(delays, nominal) {
            #expect(delay >= expected * 0.5 && delay <= expected * 1.5, "\(delay) for \(expected)")
        }
        #expect(Set(delays.map { $0 / nominal[delays.firstIndex(of: $0) ?? 0] }).count > 1, "jitter varies")
        #expect(schedule.consecutiveFailures == 10)
        schedule.recordSuccess()
        #expect(schedule.consecutiveFailures == 0 && schedule.retryAt == nil && schedule.isDue(at: start))
        let first = schedule.recordFailure(at: start, using: &random)
        #expect(first >= 0.5 && first <= 1.5)
    }

    @Test("Without jitter the schedule is exact")
    func exact() {
        var random = SeededGenerator(seed: 1)
        var schedule = RetrySchedule(base: 0.25, maximum: 3, jitter: 1...1)
        let delays = (0..<6).map { _ in schedule.recordFailure(at: Date(timeIntervalSince1970: 0), using: &random) }
        #expect(delays == [0.25, 0.5, 1, 2, 3, 3])
    }
}
