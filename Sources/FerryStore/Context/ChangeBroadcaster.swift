import Foundation
import Synchronization

/// Hands each published ``ObjectChangeEvent`` to every subscriber: `AsyncStream`s made by
/// ``subscribe()``, and inboxes of contexts that merge automatically. Publishing never blocks:
/// streams buffer without bound (a subscriber that stops reading should cancel its loop, which
/// ends its subscription).
final class ChangeBroadcaster: Sendable {
    private struct Subscribers {
        var next = 0
        var streams: [Int: AsyncStream<ObjectChangeEvent>.Continuation] = [:]
        var inboxes: [Int: ChangeInbox] = [:]
    }

    private let subscribers = Mutex(Subscribers())
    /// Called once when the first subscriber arrives (the container starts reading the store's history then).
    private let onFirstSubscriber: @Sendable () -> Void

    init(onFirstSubscriber: @escaping @Sendable () -> Void = {}) {
        self.onFirstSubscriber = onFirstSubscriber
    }

    deinit {
        let streams = subscribers.withLock { Array($0.streams.values) }
        for stream in streams { stream.finish() }
    }

    /// Every event from now on, until the caller stops iterating.
    func subscribe() -> AsyncStream<ObjectChangeEvent> {
        let (stream, continuation) = AsyncStream<ObjectChangeEvent>.makeStream(bufferingPolicy: .unbounded)
        let id = subscribers.withLock { state in
            defer { state.next += 1 }
            state.streams[state.next] = continuation
            return state.next
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.subscribers.withLock { $0.streams.removeValue(forKey: id) }
        }
        onFirstSubscriber()
        return stream
    }

    /// Adds an inbox; returns its key for ``remove(inbox:)``.
    func add(_ inbox: ChangeInbox) -> Int {
        let id = subscribers.withLock { state in
            defer { state.next += 1 }
            state.inboxes[state.next] = inbox
            return state.next
        }
        onFirstSubscriber()
        return id
    }

    func remove(inbox id: Int) {
        _ = subscribers.withLock { $0.inboxes.removeValue(forKey: id) }
    }

    var hasSubscribers: Bool { subscribers.withLock { !$0.streams.isEmpty || !$0.inboxes.isEmpty } }

    /// Posts `event` to every inbox, then yields it to every stream: whoever sees it on a stream
    /// finds it merged by every context that merges automatically at that context's next fetch.
    /// (Streams first, a listener on a thread of its own could fetch before the inboxes had it.)
    func publish(_ event: ObjectChangeEvent) {
        let (streams, inboxes) = subscribers.withLock { (Array($0.streams.values), Array($0.inboxes.values)) }
        for inbox in inboxes { inbox.post(event) }
        for stream in streams { stream.yield(event) }
    }
}

/// Events waiting for a context that merges automatically
/// (``ManagedObjectContext/automaticallyMergesChangesFromStore``): posted from any thread, taken by
/// the context in its own isolation domain at its next fetch, save or ``ManagedObjectContext/processPendingChanges()``.
final class ChangeInbox: Sendable {
    private let events = Mutex<[ObjectChangeEvent]>([])
    /// The context's own identity: its own saves are not merged back into it.
    let owner: ContextIdentity

    init(owner: ContextIdentity) {
        self.owner = owner
    }

    func post(_ event: ObjectChangeEvent) {
        guard event.kind != .objectsDidChange, event.source != .context(owner) else { return }
        events.withLock { $0.append(event) }
    }

    func take() -> [ObjectChangeEvent] {
        events.withLock { events in
            defer { events.removeAll() }
            return events
        }
    }

    var isEmpty: Bool { events.withLock { $0.isEmpty } }
}
