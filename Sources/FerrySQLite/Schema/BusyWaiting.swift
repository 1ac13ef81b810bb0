import Foundation
import GRDB

/// How a connection waits for another connection's write transaction.
///
/// SQLite's own busy timeout sleeps 1, 2, 5, 10, 15, 20, 25 … up to 100 ms
/// between tries, so a writer that has waited a while sleeps through the short
/// gaps between another writer's transactions — a replay commits change set
/// after change set a few milliseconds apart, and an application saving on the
/// same file kept missing them (save latency p99 of 80–230 ms in the W2
/// benchmark, `docs/PERFORMANCE.md`). Ferry's connections try again every
/// 0.2 ms instead. (Every millisecond was enough while a replay left gaps of a few
/// milliseconds between its change sets; since it prepares the next one on another
/// thread the gaps are about a millisecond, and the p99 rose to 52–87 ms again.)
/// The cost: five thousand short wake-ups a second, only while one waits.
enum BusyWaiting {
    /// Sleep between tries.
    static let interval: TimeInterval = 0.0002

    /// A busy handler that tries again every ``interval`` for at least `timeout` seconds.
    static func handler(timeout: TimeInterval) -> Database.BusyCallback {
        let tries = max(1, Int((timeout / interval).rounded(.up)))
        let microseconds = useconds_t(interval * 1_000_000)
        return { numberOfTries in
            guard numberOfTries < tries else { return false }
            usleep(microseconds)
            return true
        }
    }
}
