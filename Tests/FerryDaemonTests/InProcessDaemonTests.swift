import Foundation
import Logging
import Synchronization
import Testing
import FerryTestTraits
import FerryModel
import FerryStore
import FerrySQLite
import FerrySigning
import FerryDaemon
@testable import FerryTestSupport

/// Daemons assembled inside the test process (`Daemon.assemble`): no `ferry run`
/// process. Before the assembly existed, `Daemon.run` bootstrapped the process-wide
/// metrics system, so a second daemon in one process ended it.
@Suite("Daemons in process", .blocking)
struct InProcessDaemonTests {
    @Test("A daemon that cannot listen (its port taken) fails its start at once, saying why, instead of waiting for ever")
    func portTaken() async throws {
        let peer = try DaemonPeer(name: "taken", model: ReplicationTests.model, pullInterval: 3600)
        // Another listener on the daemon's port, as when another program took it after the peer chose it.
        let (holder, _) = try LoopbackSocket.bound(port: peer.port, listening: 4)
        defer { close(holder) }

        // Alone it fails in 0.1–0.25 s. In a full run its tasks may wait for Swift's pool, which the run's first
        // 20–75 s keep busy (docs/RELIABILITY.md): it failed after 37.5 and 37.8 s, with some 500 tests ending in
        // those seconds. The fault this guards, a start that waits for ever, runs into the deadline.
        let (result, waited) = await BoundedWaiting.outcome(within: .seconds(100)) { try await InProcessDaemon(peer) }
        print("port taken: the start failed after \(waited)")
        switch result {
        case .success(let daemon):
            Issue.record("the daemon started on a port another socket listens on")
            try await daemon.stop()
        case .failure(let error):
            #expect("\(error)".contains("ended before it listened") && "\(error)".contains("in use"), "\(error)")
        }
        #expect(waited < .seconds(90), "the start took \(waited) to fail")
    }

    @Test("Two daemons in one process: a save on A reaches B's store, woken by A's commit; both stop cleanly, closing their stores")
    func twoDaemonsReplicate() async throws {
        let a = try DaemonPeer(name: "a", model: ReplicationTests.model, pullInterval: 3600)
        let b = try DaemonPeer(name: "b", model: ReplicationTests.model, pullInterval: 3600)
        try a.connect(to: b)
        try b.connect(to: a)
        let runningB = try await InProcessDaemon(b)
        let runningA = try await InProcessDaemon(a)
        #expect(runningA.port == a.port && runningB.port == b.port)
        // Each daemon gave its store's write-ahead log its working size (1,200 frames of 4 KiB pages).
        for peer in [a, b] {
            let logSize = (try? FileManager.default.attributesOfItem(atPath: peer.store + "-wal"))?[.size] as? Int ?? 0
            #expect(logSize >= 1_200 * 4_096, "\(peer.store)-wal holds \(logSize) bytes")
        }

        do {
            // A save on A's file in this process (another connection than the daemon's own).
            let model = try XcodeModelReader.read(at: a.model)
            // (With the store's key, which its daemon made beside it: a store opened without its key refuses saves.)
            let key = try StoreSigningKey(contentsOf: StoreSigningKey.defaultPath(forStore: a.store))
            let writer = try PersistentContainer(store: SQLiteStore(path: a.store, model: model, options: .init(signingKey: key))).newContext()
            let reader = try SQLiteStore(path: b.store, model: model)
            let person = try writer.make("Person", ["name": "In-process Ann"])
            try writer.save()
            let uri = person.objectID.uriString
            var found = false
            // Polled, so a long deadline costs nothing when it arrives: in the full suite on a slow
            // machine the daemons' tasks share two cores with every other test.
            let deadline = ContinuousClock.now + .seconds(120)
            while !found, ContinuousClock.now < deadline {
                found = try reader.localObjectID(forOriginURI: uri) != nil
                if !found { try await Task.sleep(for: .milliseconds(10)) }
            }
            #expect(found, "B's store never showed A's save")
        }
        try await runningA.stop()
        try await runningB.stop()
        // Each stopped daemon closed its store (the test's own stores are gone too): one file each.
        for peer in [a, b] {
            #expect(!FileManager.default.fileExists(atPath: peer.store + "-wal"), "\(peer.name)'s daemon left its log beside the store")
        }
    }

    @Test("Daemon opens its store on NIO's thread pool, not Swift's shared pool or caller's executor: a long open (sync, migration) holds no thread of theirs")
    func opensOffThePool() async throws {
        let peer = try DaemonPeer(name: "off-pool", model: ReplicationTests.model, pullInterval: 3600)
        // The peer's store has no signing key yet: the open makes one and says so, on the thread that opens.
        let heard = ThreadsHeard()
        let logger = Logger(label: "off-pool") { _ in heard }
        let group = try await Daemon.assemble(try Configuration.load(path: peer.configuration), logger: logger)
        let threads = heard.threads(saying: "made the store's signing key")
        #expect(threads.count == 1 && threads.allSatisfy { $0.contains("TP-#") }, "the store was opened on \(threads)")
        let running = Task { try await group.run() }
        await group.triggerGracefulShutdown()
        try await running.value
        #expect(!FileManager.default.fileExists(atPath: peer.store + "-wal"), "the daemon left its log beside the store")
    }
}

/// A log handler that notes each message with the name of the thread that logged it.
final class ThreadsHeard: LogHandler, Sendable {
    private let heard = Mutex<[(message: String, thread: String)]>([])

    /// The threads that logged a message containing `text`.
    func threads(saying text: String) -> [String] {
        heard.withLock { $0.filter { $0.message.contains(text) }.map(\.thread) }
    }

    func log(event: LogEvent) {
        // (Linux names each thread in /proc; pthread_getname_np is not in Swift's Glibc module.)
        let thread = ((try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? "?").trimmingCharacters(in: .whitespacesAndNewlines)
        heard.withLock { $0.append(("\(event.message)", thread)) }
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { nil }
        set {}
    }

    var metadata: Logger.Metadata {
        get { [:] }
        set {}
    }

    var logLevel: Logger.Level {
        get { .trace }
        set {}
    }
}
