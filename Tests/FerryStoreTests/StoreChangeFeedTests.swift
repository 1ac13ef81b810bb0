import Foundation
import Synchronization
import Testing
@testable import FerryStore
import FerryTestSupport

/// How the container's change feed follows the store: what it reads, and when.
@Suite("Store change feed")
struct StoreChangeFeedTests {
    struct Busy: Error {}

    @Test("One container's slow read holds up no other container's feed")
    func feedsReadApart() async throws {
        // Each feed runs (and reads) where `onThreadOfItsOwn` puts it. Another feed's work must run
        // while the slow one still reads. (The test waits by blocking on purpose, never by suspending: a
        // suspended test resumes on Swift's pool, which in a full run can be busy for longer than the read.)
        final class Flag: Sendable { let value = Atomic<Bool>(false) }
        let (slowStarted, slowEnded, endedBeforeOther) = (Flag(), Flag(), Flag())
        let slow = StoreChangeFeed.onThreadOfItsOwn {
            slowStarted.value.store(true, ordering: .releasing)
            usleep(6_000_000)  // (a read that blocks its thread)
            slowEnded.value.store(true, ordering: .releasing)
        }
        while !slowStarted.value.load(ordering: .acquiring) { usleep(1_000) }
        let other = StoreChangeFeed.onThreadOfItsOwn {
            endedBeforeOther.value.store(slowEnded.value.load(ordering: .acquiring), ordering: .releasing)
        }
        await other.value
        let waitedForTheSlowRead = endedBeforeOther.value.load(ordering: .acquiring)
        #expect(!waitedForTheSlowRead, "another feed's work ran only once the slow read had ended")
        await slow.value
    }

    @Test("A feed tells another writer's commit at once while every thread of libdispatch's default pool computes")
    func tellsWhileThePoolComputes() async throws {
        let store = InMemoryStore(model: try SampleModels.load("OrgChart"))
        let app = try PersistentContainer(store: store)
        let other = try PersistentContainer(store: store)
        // The events are taken on a thread of their own, so that what is measured is the feed alone.
        let events = app.changes()
        let told = ThreadTaskExecutor.task(named: "ferry-listener") { () -> ContinuousClock.Instant? in
            for await event in events where event.kind == .storeChangedRemotely { return ContinuousClock.now }
            return nil
        }
        try await Task.sleep(for: .milliseconds(200))  // (the feed has started and read what there was)
        // As in the first tens of seconds of a full test run, or an application computing on every
        // thread of its pool: more computing jobs than cores on the default queue, which (on Linux)
        // Swift's pool and every default dispatch queue run on.
        let spinners = ProcessInfo.processInfo.activeProcessorCount + 2
        let until = Date().addingTimeInterval(3)
        for _ in 0..<spinners {
            DispatchQueue.global().async { while Date() < until {} }
        }
        usleep(100_000)  // (blocking on purpose: a suspension would wait behind the spinners to resume)
        let writer = other.newContext()
        _ = try writer.make("Person", ["name": "Ann"])
        try writer.save()
        let saved = ContinuousClock.now
        let arrived = try #require(await told.value, "the feed ended without telling the save")
        #expect(arrived - saved < .seconds(1), "another writer's save was told \(arrived - saved) after it, behind the computing jobs")
    }

    @Test("A read that fails is tried again, without waiting for another commit; what it then reads is told once")
    func failedReadIsRetried() async throws {
        let (signals, commits) = AsyncStream<Void>.makeStream()
        let (told, tell) = AsyncStream<ObjectChangeEvent>.makeStream()
        let reads = Atomic<Int>(0)
        let event = ObjectChangeEvent(kind: .storeChangedRemotely, source: .otherProcess(author: nil, contextName: nil))
        // The feed has read up to rank 1; one commit (rank 2) comes, and its first three reads fail.
        commits.yield()
        let follower = Task {
            await StoreChangeFeed.follow(from: 1, signals: signals, read: { rank in
                let count = reads.add(1, ordering: .relaxed).newValue
                // (The feed's first read, on start, finds nothing new: the commit comes after.)
                if count == 1 { return ([], rank) }
                if count <= 4 { throw Busy() }
                return rank < 2 ? ([event], 2) : ([], rank)
            }, publish: { tell.yield($0) })
            tell.finish()
        }
        // No more commits come: the event arrives only if the feed tries again by itself. (Bounded
        // generously: in a full run the shared pool can be busy for seconds; a pass returns at once.)
        let (first, _) = await BoundedWaiting.outcome(within: .seconds(60)) {
            var events = told.makeAsyncIterator()
            return await events.next()
        }
        let arrived = (try? first.get()) ?? nil
        #expect(arrived != nil, "the commit's event never came after its reads failed")
        #expect(reads.load(ordering: .relaxed) >= 5)
        follower.cancel()
        commits.finish()
        await follower.value
        // Told once: nothing more came before the feed ended.
        var rest = 0
        for await _ in told { rest += 1 }
        #expect(rest == 0, "the event was told \(rest + 1) times")
    }
}
