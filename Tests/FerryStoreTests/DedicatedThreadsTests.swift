import Foundation
import Synchronization
import Testing
@testable import FerryStore

/// The one owner of Ferry's own threads: each runs its body on a thread of the given name and
/// gives its result back.
@Suite("Dedicated threads")
struct DedicatedThreadsTests {
    @Test("spawn runs its body on a thread of its own, named as asked (cut to what Linux keeps), and join gives its result")
    func spawnAndJoin() {
        let caller = ObjectIdentifier(Thread.current)
        let joinable = DedicatedThreads.spawn(named: "ferry-test-spawn") { () -> String in
            ObjectIdentifier(Thread.current) != caller ? DedicatedThreads.currentName : "the caller's thread"
        }
        #expect(joinable.join() == "ferry-test-spaw")
    }

    @Test("run awaits a body run on a thread of its own")
    func runAwaits() async {
        let name = await DedicatedThreads.run(named: "ferry-test-run") { DedicatedThreads.currentName }
        #expect(name == "ferry-test-run")
    }
}
