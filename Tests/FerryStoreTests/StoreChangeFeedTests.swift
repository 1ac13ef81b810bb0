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
        let slow = StoreChangeFeed()
        let other = StoreChangeFeed()
        // The other feed's read must end while the slow one still runs: a fixed bound on its wait (2 s
        // of a 3 s read) was once passed under a loaded run, where starting any thread took long.
        final class Ended: Sendable { let value = Atomic<Bool>(false) }
        let slowEnded = Ended()
        let blocking = Task {
            try await slow.offPool {
                Thread.sleep(forTimeInterval: 6)
                slowEnded.value.store(true, ordering: .releasing)
                return 0
            }
        }
        try await Task.sleep(for: .milliseconds(100))  // (the slow read has the first feed's queue)
        let started = ContinuousClock.now
        let answer = try await other.offPool { 1 }
        let waited = ContinuousClock.now - started
        #expect(answer == 1)
        let endedFirst = slowEnded.value.load(ordering: .acquiring)
        #expect(!endedFirst, "another feed's read waited \(waited), until the slow one had ended")
        _ = try await blocking.value
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
