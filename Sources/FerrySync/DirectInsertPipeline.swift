import Foundation
import Synchronization
import FerryStore

/// Prepares the direct inserts of a batch (``DirectInsertReplay/prepare(_:body:retry:container:)``)
/// on a thread of its own, a few change sets ahead of the replay that writes them.
///
/// A replay's writes are one thread's work (SQLite has one writer); building a
/// change set's request is CPU work that needs nothing from the store. So on
/// this two-core machine class it runs beside the writes rather than before
/// each of them. At most ``lead`` change sets are prepared beyond the last one
/// the writer asked for, so memory stays bounded whatever the batch's size.
///
/// Protocol: the writer asks for each item at most once, in any order, with
/// ``take(_:)``, and calls ``finish()`` once when it is done (or gives up): that
/// stops the thread and waits for it. Like `LineDecoding`'s second half, the
/// thread is not one of Dispatch's or Swift concurrency's shared pool, which the
/// caller (a replay, synchronous on an actor) already occupies.
final class DirectInsertPipeline: Sendable {
    /// How many change sets may be prepared ahead of the writer.
    static let lead = 4

    private struct State: ~Copyable {
        /// Prepared drafts not taken yet (nil: taken, or not eligible).
        var drafts: [DirectInsertDraft?]
        /// Items `0..<prepared` are done.
        var prepared = 0
        /// The writer has asked for items below this.
        var wanted = 0
        /// Drafts the writer is done with, for the thread to free.
        var discarded: [DirectInsertDraft] = []
        var stopped = false
        var joined = false
    }

    private let state: Mutex<State>
    /// Signalled by the thread after each prepared item.
    private let progress = DispatchSemaphore(value: 0)
    /// Signalled by the writer when it asks for an item or stops the thread.
    private let demand = DispatchSemaphore(value: 0)
    /// Signalled once by the thread as it ends.
    private let ended = DispatchSemaphore(value: 0)

    /// Starts preparing `items` (in this order) for replay into `container`'s store.
    init(_ items: [(changeSet: ChangeSet, body: String)], container: PersistentContainer) {
        state = Mutex(State(drafts: Array(repeating: nil, count: items.count)))
        DedicatedThreads.start(named: "ferry-prepare") { [self] in
            Self.yieldToOtherThreads()
            prepare(items, container: container)
            ended.signal()
        }
    }

    /// The draft of item `index`, waiting for the thread to get there; nil when
    /// the item cannot take the fast path.
    func take(_ index: Int) -> DirectInsertDraft? {
        state.withLock { $0.wanted = max($0.wanted, index + 1) }
        demand.signal()
        while true {
            let outcome: DirectInsertDraft?? = state.withLock { state in
                guard index < state.prepared else { return .none }
                defer { state.drafts[index] = nil }  // taken: the writer's copy is the only one
                return .some(state.drafts[index])
            }
            if let outcome { return outcome }
            progress.wait()  // (a signal left from an item taken without waiting only makes this look again)
        }
    }

    /// Hands back a draft the writer is done with, so that the thread frees it
    /// (freeing a request of a thousand inserts is work the writer need not do).
    func discard(_ draft: DirectInsertDraft) {
        state.withLock { $0.discarded.append(draft) }
        demand.signal()
    }

    /// Stops the thread and waits for it to end; drafts not taken are dropped. Call once.
    func finish() {
        let first = state.withLock { state in
            defer { state.stopped = true; state.joined = true }
            return !state.joined
        }
        guard first else { return }
        demand.signal()
        ended.wait()
    }

    /// Lowers the calling thread's priority (nice 10; on Linux the nice value is
    /// per thread). Its work is ahead of need, so it can wait; an application
    /// thread waiting for the write lock between two of the replay's transactions
    /// cannot: on two cores, the writer and this thread kept it from running in the
    /// millisecond between them (app save p99 67 ms in one W2 run).
    private static func yieldToOtherThreads() {
        _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, 10)
    }

    private func prepare(_ items: [(changeSet: ChangeSet, body: String)], container: PersistentContainer) {
        for index in items.indices {
            // Wait until the writer is near enough, or stops us; meanwhile free what it is done with.
            while true {
                var done: [DirectInsertDraft] = []
                let (stopped, room) = state.withLock { state in
                    swap(&done, &state.discarded)
                    return (state.stopped, index < state.wanted + Self.lead)
                }
                done.removeAll()
                if stopped { return }
                if room { break }
                demand.wait()
            }
            let draft = DirectInsertReplay.prepare(items[index].changeSet, body: items[index].body, retry: false, container: container)
            state.withLock { state in
                state.drafts[index] = draft
                state.prepared = index + 1
            }
            progress.signal()
        }
    }
}
