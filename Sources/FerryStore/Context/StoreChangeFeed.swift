import Foundation
import Synchronization

/// Turns the store's commits by other writers into ``ObjectChangeEvent``s of kind
/// ``ObjectChangeEvent/Kind/storeChangedRemotely``: after each commit signal
/// (``ReplicaStore/commits()``: this process's and other processes' commits alike), it reads
/// the change sets recorded since the last one it read (``ReplicaStore/appliedChangeSets(afterRank:limit:maximumBytes:)``),
/// leaves out those its own container's contexts saved (they were published as
/// ``ObjectChangeEvent/Kind/didSave`` already), and names each object by its local ID.
///
/// Started by the container when its first subscriber arrives. It follows the store on a thread of
/// its own (``ThreadTaskExecutor``), where it also reads the history, not on Swift's shared pool or
/// a dispatch queue: there, while other work of the process computed, a commit was told only once
/// that work let it run (2.9 s late behind 3 s of spinning jobs; past its tests' 10 s bounds in full
/// test runs), and one container's slow read held up the others'.
final class StoreChangeFeed: Sendable {
    private struct State {
        var task: Task<Void, Never>?
        /// Saves of this container between their start and their result.
        var savesInFlight = 0
        /// Sequences of this store's own change sets that this container's contexts recorded and the feed has not read yet.
        var ownSequences = Set<Int64>()
    }

    private enum Ownership { case own, other, undecided }

    private let state = Mutex(State())
    /// How much change-set text one read takes at most (always one change set): the feed holds a
    /// read's change sets, decoded, while it makes their events. Bounded by count alone (256), a
    /// backlog of large change sets taken in at once was read whole.
    static let readBytes = 4 << 20
    /// How long a change set of this store waits to be told apart while one of this container's saves is under way.
    private static let decisionLimit: Duration = .seconds(2)

    deinit { stop() }

    /// Starts reading (once); events go to `broadcaster`.
    func start(store: any ChangeFeedSource, broadcaster: ChangeBroadcaster) {
        state.withLock { state in
            guard state.task == nil else { return }
            // Subscribed, and the starting rank read, before the task runs: no commit after this call is missed.
            let commits = store.commits()
            let startRank = (try? store.lastChangeSetRank()) ?? 0
            state.task = Self.onThreadOfItsOwn { [weak self] in
                await self?.run(store: store, broadcaster: broadcaster, commits: commits, startRank: startRank)
            }
        }
    }

    func stop() {
        state.withLock { $0.task?.cancel() }
    }

    /// Called by a context before its store save.
    func saveWillBegin() {
        state.withLock { $0.savesInFlight += 1 }
    }

    /// Called by a context after its store save (failed saves pass nil).
    func saveDidEnd(recordedSequence: Int64?) {
        state.withLock { state in
            state.savesInFlight -= 1
            if let recordedSequence, state.task != nil { state.ownSequences.insert(recordedSequence) }
        }
    }

    private func ownership(of sequence: Int64) -> Ownership {
        state.withLock { state in
            if state.ownSequences.remove(sequence) != nil { return .own }
            return state.savesInFlight > 0 ? .undecided : .other
        }
    }

    /// Starts `body` as a task on a thread of its own, which ends with the task: where a feed runs,
    /// so that it reads and tells commits as they come, whatever else the process runs (and blocks
    /// no other feed while it reads or waits to tell its container's saves apart).
    static func onThreadOfItsOwn(_ body: sending @escaping () async -> Void) -> Task<Void, Never> {
        ThreadTaskExecutor.task(named: "ferry-feed", body)
    }

    /// Follows the store (on the feed's thread: its reads block that thread only).
    private func run(store: any ChangeFeedSource, broadcaster: ChangeBroadcaster, commits: AsyncStream<Void>, startRank: Int64) async {
        await Self.follow(from: startRank, signals: commits,
                          read: { [self] rank in try readRound(store: store, after: rank) },
                          publish: broadcaster.publish)
    }

    /// Reads what is new at once, then after each signal, until the task is cancelled or the
    /// signals end: `read` gives the events after a rank and the last rank it read. A read that
    /// fails (the file busy, say) is tried again after a pause (10 ms, doubling up to 0.64 s) rather
    /// than left for the next commit, which may never come: it was, and a commit's event could
    /// wait for ever.
    static func follow(from start: Int64, signals: AsyncStream<Void>,
                       read: (Int64) async throws -> (events: [ObjectChangeEvent], last: Int64),
                       publish: (ObjectChangeEvent) -> Void) async {
        var rank = start
        var iterator = signals.makeAsyncIterator()
        var failures = 0
        while !Task.isCancelled {
            while !Task.isCancelled {
                let round: (events: [ObjectChangeEvent], last: Int64)
                do {
                    round = try await read(rank)
                    failures = 0
                } catch {
                    failures += 1
                    try? await Task.sleep(for: .milliseconds(10 << min(failures - 1, 6)))
                    continue
                }
                guard round.last != rank else { break }
                for event in round.events { publish(event) }
                rank = round.last
            }
            guard await iterator.next() != nil else { return }
        }
    }

    /// The events of the next change sets after `rank`, and the rank of the last one read (on the feed's thread).
    private func readRound(store: any ChangeFeedSource, after rank: Int64) throws -> ([ObjectChangeEvent], Int64) {
        let (changeSets, last) = try store.appliedChangeSets(afterRank: rank, limit: 256, maximumBytes: Self.readBytes)
        var events: [ObjectChangeEvent] = []
        for changeSet in changeSets {
            if changeSet.origin == store.identifier, isOwn(changeSet.sequence) { continue }
            let event = try Self.event(for: changeSet, in: store)
            if !event.isEmpty { events.append(event) }
        }
        return (events, last)
    }

    /// Whether this container saved the change set of its own store numbered `sequence`; waits
    /// (on the feed's thread) while a save is under way.
    private func isOwn(_ sequence: Int64) -> Bool {
        let clock = ContinuousClock()
        let deadline = clock.now + Self.decisionLimit
        while true {
            switch ownership(of: sequence) {
            case .own: return true
            case .other: return false
            case .undecided:
                guard clock.now < deadline else { return false }
                usleep(200)
            }
        }
    }

    /// The event for one change set: its objects by local ID, who made it.
    static func event(for changeSet: ChangeSet, in store: any ChangeFeedSource) throws -> ObjectChangeEvent {
        let source: ChangeSource = changeSet.origin == store.identifier
            ? .otherProcess(author: changeSet.author, contextName: changeSet.contextName)
            : .replay(origin: changeSet.origin)
        var uris = changeSet.changes.map(\.uri)
        for change in changeSet.changes {
            for case .object(let uri) in change.values.values { uris.append(uri) }
            if let survivor = change.mergedInto { uris.append(survivor) }
        }
        let lookup = try store.lookUp(originURIs: Array(Set(uris)))
        func localID(_ uri: String) -> ObjectID? {
            lookup.mapped[uri] ?? lookup.own[uri] ?? store.ownObjectID(forURI: uri)
        }
        var event = ObjectChangeEvent(kind: .storeChangedRemotely, source: source,
                                      changeSet: ChangeSetMark(origin: changeSet.origin, sequence: changeSet.sequence))
        let model = store.model
        for change in changeSet.changes {
            let id = localID(change.uri)
            switch change.kind {
            case .insert, .restore:
                if let id { event.inserted.insert(id) }
            case .update:
                guard let id else { continue }
                let keys = Set(change.values.keys).union(change.added.keys).union(change.removed.keys).union(change.positions.keys)
                event.updated[id, default: []].formUnion(keys)
            case .delete, .merge:
                if let id {
                    event.deleted.insert(id)
                } else {
                    event.deletedWithoutID.insert(change.entity)
                }
                if let survivor = change.mergedInto.flatMap(localID) { event.updated[survivor, default: []].formUnion(change.values.keys) }
            }
            // A to-one written changes the inverse to-many of its new destination.
            guard change.kind != .delete, change.kind != .merge, let entity = model.entity(named: change.entity) else { continue }
            for (key, value) in change.values {
                guard case .object(let target) = value, let relationship = entity.relationship(named: key),
                      let inverse = relationship.inverseName, let targetID = localID(target) else { continue }
                event.updated[targetID, default: []].insert(inverse)
            }
        }
        // An inserted object also named as updated (by an inverse) stays inserted.
        for id in event.inserted { event.updated[id] = nil }
        for id in event.deleted { event.updated[id] = nil }
        return event
    }
}

/// What the change feed reads of a store: its log of applied change sets, the signal after each
/// commit, and the local IDs of the objects they name.
typealias ChangeFeedSource = PersistentStore & ChangeSetLog & ReplicaObjects
