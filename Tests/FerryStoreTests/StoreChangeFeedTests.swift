import Foundation
import Synchronization
import Testing
@testable import FerryStore

/// How the container's change feed follows the store: what it reads, and when.
@Suite("Store change feed")
struct StoreChangeFeedTests {
    struct Busy: Error {}

    @Test("A read that fails is tried again, without waiting for another commit; what it then reads is told once")
    func failedReadIsRetried() async throws {
        let (signals, commits) = AsyncStream<Void>.makeStream()
        let reads = Atomic<Int>(0)
        let told = Mutex<[ObjectChangeEvent]>([])
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
            }, publish: { event in told.withLock { $0.append(event) } })
        }
        let deadline = ContinuousClock.now + .seconds(10)
        while told.withLock({ $0.isEmpty }), ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(5))
        }
        try await Task.sleep(for: .milliseconds(100))
        #expect(told.withLock { $0.count } == 1, "the commit's event was told \(told.withLock { $0.count }) times after failed reads")
        #expect(reads.load(ordering: .relaxed) >= 5)
        follower.cancel()
        commits.finish()
        await follower.value
    }
}
