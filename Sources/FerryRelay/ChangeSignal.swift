import Foundation
import Synchronization

/// Wakes a relay's long polls: bumped when change sets may have arrived (a `NOTIFY` from any relay
/// on the database, a push this relay committed, the listening connection coming back).
///
/// A poll reads ``generation`` before it queries, and waits only for a generation past that one,
/// so a notification between its query and its wait is never lost.
final class ChangeSignal: Sendable {
    private struct State {
        var generation: UInt64 = 0
        /// Set when the relay stops: every wait returns at once.
        var closed = false
        var waiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
        var nextWaiter: UInt64 = 0
    }

    private let state = Mutex(State())

    /// How many times the signal was bumped.
    var generation: UInt64 { state.withLock { $0.generation } }

    /// Whether the relay is stopping (``close()``).
    var isClosed: Bool { state.withLock { $0.closed } }

    /// Polls waiting now.
    var waiting: Int { state.withLock { $0.waiters.count } }

    /// Wakes every waiting poll.
    func bump() {
        let woken = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.generation &+= 1
            defer { state.waiters.removeAll() }
            return Array(state.waiters.values)
        }
        for waiter in woken { waiter.resume() }
    }

    /// Wakes every waiting poll and makes later waits return at once (the relay is stopping: long
    /// polls answer with what they have, so a stop does not wait for them).
    func close() {
        state.withLock { $0.closed = true }
        bump()
    }

    /// Returns once the signal is bumped past `seen`, after `timeout`, or when the task is cancelled.
    func wait(beyond seen: UInt64, timeout: Duration) async {
        let id = state.withLock { state -> UInt64 in
            state.nextWaiter &+= 1
            return state.nextWaiter
        }
        let timer = Task {
            try? await Task.sleep(for: timeout)
            self.release(id)
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = state.withLock { state -> Bool in
                    if state.generation != seen || state.closed || Task.isCancelled { return true }
                    state.waiters[id] = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            self.release(id)
        }
        timer.cancel()
    }

    /// Resumes one waiter, if it still waits.
    private func release(_ id: UInt64) {
        state.withLock { $0.waiters.removeValue(forKey: id) }?.resume()
    }
}
