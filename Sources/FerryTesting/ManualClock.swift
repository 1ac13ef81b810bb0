import Foundation
import Synchronization
import FerrySync

/// A ``PeerClock`` that stands still until a test moves it: sleepers wake only when
/// ``advance(by:)`` takes the time past their deadline.
public final class ManualClock: PeerClock {
    private struct State {
        var now: Date
        var nextID = 0
        var sleepers: [Int: (deadline: Date, continuation: CheckedContinuation<Void, any Error>)] = [:]
        /// Sleepers cancelled before they were registered.
        var cancelled: Set<Int> = []
    }

    private let state: Mutex<State>

    /// A clock that reads `start` until it is moved.
    public init(start: Date = Date(timeIntervalSince1970: 1_800_000_000)) {
        state = Mutex(State(now: start))
    }

    public func now() -> Date { state.withLock { $0.now } }

    /// How many tasks sleep on the clock now.
    public var sleeperCount: Int { state.withLock { $0.sleepers.count } }

    /// The earliest deadline a task sleeps until; nil when none sleeps.
    public var nextDeadline: Date? { state.withLock { $0.sleepers.values.map(\.deadline).min() } }

    /// Moves the time forward by `seconds` and wakes every sleeper whose deadline it passed.
    /// Returns how many it woke: none means nothing that sleeps on the clock can act yet.
    @discardableResult
    public func advance(by seconds: TimeInterval) -> Int {
        let due = state.withLock { state -> [CheckedContinuation<Void, any Error>] in
            state.now = state.now.addingTimeInterval(seconds)
            let now = state.now
            let woken = state.sleepers.filter { $0.value.deadline <= now }
            for id in woken.keys { state.sleepers[id] = nil }
            return woken.values.map(\.continuation)
        }
        for continuation in due { continuation.resume() }
        return due.count
    }

    public func sleep(until deadline: Date) async throws {
        let id = state.withLock { state -> Int in
            defer { state.nextID += 1 }
            return state.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let outcome = state.withLock { state -> Result<Void, any Error>? in
                    if state.cancelled.remove(id) != nil { return .failure(CancellationError()) }
                    if deadline <= state.now { return .success(()) }
                    state.sleepers[id] = (deadline, continuation)
                    return nil
                }
                if let outcome { continuation.resume(with: outcome) }
            }
        } onCancel: {
            let sleeper = state.withLock { state -> CheckedContinuation<Void, any Error>? in
                guard let sleeper = state.sleepers.removeValue(forKey: id) else {
                    state.cancelled.insert(id)
                    return nil
                }
                return sleeper.continuation
            }
            sleeper?.resume(throwing: CancellationError())
        }
    }
}
