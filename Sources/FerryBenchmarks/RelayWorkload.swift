// The relay benchmarks, on a real PostgreSQL cluster (fsync and synchronous_commit on, as a
// production relay's database) started in a temporary folder:
//
// - fan-out: twenty daemons (in this process) following one relay (a `ferry relay` process); one
//   save on the first, timed until each of the other nineteen stores holds it;
// - ingest: twenty peers pushing signed change sets at once (100 objects each) to one relay, and
//   to two relays on the same database, alternated; change sets and objects stored per second.
//
//     swift build -c release --product ferry && swift build -c release --product FerryBenchmarks
//     .build/release/FerryBenchmarks --relay [--runs R]
//
// The join through a relay (a new store from the snapshot a daemon uploaded there, compared with W7
// from the daemon itself) is `--bootstrap --relay`, in BootstrapWorkload.swift.
import Foundation
import FerryModel
import FerryStore
import FerrySigning
import FerrySQLite
import FerrySync
import FerryTestSupport

enum RelayWorkload {
    /// Twenty, the fleet the relay's targets are set for; `FERRY_RELAY_PEERS` sets another count (to see
    /// how the figures scale).
    static let peerCount = ProcessInfo.processInfo.environment["FERRY_RELAY_PEERS"].flatMap(Int.init) ?? 20

    static func run(model: ManagedObjectModel, runs: Int) async throws {
        if ProcessInfo.processInfo.environment["FERRY_RELAY_ONLY"] != "ingest" { try await fanOut(model: model, samples: 200) }
        if ProcessInfo.processInfo.environment["FERRY_RELAY_ONLY"] != "fanout" { try await ingest(model: model, runs: runs) }
    }

    // MARK: - Fan-out

    static func fanOut(model: ManagedObjectModel, samples: Int) async throws {
        let cluster = try PostgresCluster(durable: true)
        try cluster.createDatabase("fanout")
        let peers = try (0..<peerCount).map { index in
            let peer = try DaemonPeer(name: "p\(index)", model: SampleModels.path("OrgChart"), pullInterval: 3600, maxBackoff: 2)
            guard try peer.ferry(["init"]).status == 0 else { throw RawSQLiteError.failed("ferry init failed for p\(index)") }
            return peer
        }
        let keys = try peers.map { try $0.identity() }.map { (origin: $0.store, key: $0.key) }
        let relay = try RelayProcess(name: "fanout", cluster: cluster, database: "fanout", pinned: keys)
        try relay.start()
        defer { relay.stop() }
        // The peers own their folders (stores, configurations) and the cluster its server: without this, a
        // release build releases them after their last use here, removing the stores the daemons and the
        // writer below still use (the run failed so: "the store's file was removed after this process opened it").
        defer { withExtendedLifetime((peers, cluster)) {} }
        for peer in peers { try peer.connect(name: "relay", urls: [relay.url], token: relay.peerToken) }
        var daemons: [InProcessDaemon] = []
        for peer in peers { daemons.append(try await InProcessDaemon(peer, logLevel: .error)) }

        let writer = try PersistentContainer(store: SQLiteStore(path: peers[0].store, model: model)).newContext()
        let readers = try peers.dropFirst().map { try SQLiteStore(path: $0.store, model: model) }
        // Any reader's commit wakes the check (as it would an application's); a check runs every 2 ms regardless.
        let committed = DispatchSemaphore(value: 0)
        let watchers = readers.map { reader in Task.detached { for await _ in reader.commits() { committed.signal() } } }
        defer { for watcher in watchers { watcher.cancel() } }

        /// Saves one object on the first peer; the milliseconds, from the save's return, until each other store holds it.
        func saveAndWait(_ name: String) throws -> [Double] {
            let person = try writer.insert(entityName: "Person")
            try person.setValue(name, forKey: "name")
            try writer.save()
            let saved = DispatchTime.now().uptimeNanoseconds
            let uri = person.objectID.uriString
            var arrivals = [Double?](repeating: nil, count: readers.count)
            while arrivals.contains(where: { $0 == nil }) {
                for (index, reader) in readers.enumerated() where arrivals[index] == nil {
                    if try reader.localObjectID(forOriginURI: uri) != nil {
                        arrivals[index] = Double(DispatchTime.now().uptimeNanoseconds - saved) / 1e6
                    }
                }
                guard DispatchTime.now().uptimeNanoseconds - saved < 20_000_000_000 else {
                    throw RawSQLiteError.failed("'\(name)' did not reach every peer within 20 s")
                }
                if arrivals.contains(where: { $0 == nil }) { _ = committed.wait(timeout: .now() + .milliseconds(2)) }
            }
            return arrivals.compactMap { $0 }
        }
        // Not counted: the first saves open the connections and start every daemon's long poll.
        for index in 0..<5 { _ = try saveAndWait("warm-up \(index)") }
        var toAll: [Double] = []
        var each: [Double] = []
        for index in 0..<samples {
            let arrivals = try saveAndWait("fan-out \(index)")
            toAll.append(arrivals.max() ?? 0)
            each.append(contentsOf: arrivals)
            usleep(UInt32.random(in: 20_000...60_000))
        }
        toAll.sort()
        each.sort()
        print(String(format: "fan-out: %d saves on one of %d daemons following one relay, from each save's return until all %d others hold it: " +
                         "p50 %.1f ms, p99 %.1f ms, max %.1f ms (goal p99 <= 100 ms)",
                     samples, peerCount, readers.count, percentile(toAll, 0.5), percentile(toAll, 0.99), toAll.last ?? 0))
        print(String(format: "  each of the %d deliveries: p50 %.1f ms, p99 %.1f ms", each.count, percentile(each, 0.5), percentile(each, 0.99)))
        for daemon in daemons { try await daemon.stop() }
    }

    // MARK: - Ingest

    /// One origin's change sets, signed, ready to push.
    struct Origin: Sendable {
        var identifier: UUID
        var publicKey: String
        var lines: [String]
    }

    static let changeSetsPerOrigin = 400
    static let objectsPerChangeSet = 100
    static let changeSetsPerPush = 10

    static func ingest(model: ManagedObjectModel, runs: Int) async throws {
        let directory = TemporaryDirectory(prefix: "ferry-ingest")
        var origins: [Origin] = []
        for index in 0..<peerCount {
            let key = StoreSigningKey()
            var options = SQLiteStore.Options()
            options.signingKey = key
            let store = try SQLiteStore(path: directory.file("origin-\(index).sqlite"), model: model, options: options)
            let context = try PersistentContainer(store: store).newContext()
            for save in 0..<changeSetsPerOrigin {
                for object in 0..<objectsPerChangeSet {
                    let person = try context.insert(entityName: "Person")
                    try person.setValue("o\(index)-s\(save)-n\(object)", forKey: "name")
                }
                try context.save()
            }
            let lines = try store.changeSetLines(after: [:], limit: changeSetsPerOrigin)
            origins.append(Origin(identifier: store.identifier, publicKey: key.publicKey, lines: lines))
        }
        let changeSets = origins.reduce(0) { $0 + $1.lines.count }
        let objects = changeSets * objectsPerChangeSet
        let bytes = origins.reduce(0) { $0 + $1.lines.reduce(0) { $0 + $1.utf8.count } }
        print(String(format: "ingest: %d peers push %d signed change sets of %d objects each at once (%d objects, %.1f MB), %d change sets per push",
                     peerCount, changeSets, objectsPerChangeSet, objects, Double(bytes) / 1_048_576, changeSetsPerPush))
        let cluster = try PostgresCluster(durable: true)
        defer { withExtendedLifetime(cluster) {} }  // (the relays' database stops with it)
        let pinned = origins.map { (origin: $0.identifier.uuidString, key: $0.publicKey) }
        var rates: [Int: [Double]] = [1: [], 2: []]
        var cpu: [Int: [(relays: Double, database: Double)]] = [:]
        for run in 0..<runs {
            for relayCount in [1, 2] {
                let database = "ingest_\(run)_\(relayCount)"
                try cluster.createDatabase(database)
                var relays: [RelayProcess] = []
                for index in 0..<relayCount {
                    // (As many push bodies at once as there are peers: the default, 8, would answer some 503.)
                    let relay = try RelayProcess(name: "ingest\(index)", cluster: cluster, database: database, pinned: pinned,
                                                 sharingTokensWith: relays.first, maxConcurrentBodies: peerCount)
                    try relay.start()
                    relays.append(relay)
                }
                let urls = relays.map { URL(string: $0.url)! }
                let token = relays[0].peerToken
                let relayIDs = relays.compactMap(\.processIdentifier)
                let cpuBefore = (relays: relayIDs.map(CPUTime.of).reduce(0, +), database: CPUTime.ofUser("postgres"), pushers: CPUTime.ofSelf())
                let started = DispatchTime.now().uptimeNanoseconds
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for (index, origin) in origins.enumerated() {
                        // Each peer its own client (its own connections), on the relay its index picks.
                        let client = PeerClient(baseURL: urls[index % urls.count], token: token)
                        group.addTask {
                            var start = 0
                            while start < origin.lines.count {
                                let end = min(start + changeSetsPerPush, origin.lines.count)
                                let report = try await client.push(Array(origin.lines[start..<end]))
                                guard report.applied == end - start else { throw RawSQLiteError.failed("a push stored \(report.applied) of \(end - start)") }
                                start = end
                            }
                        }
                    }
                    try await group.waitForAll()
                }
                let elapsed = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
                let relayCPU = relayIDs.map(CPUTime.of).reduce(0, +) - cpuBefore.relays
                let databaseCPU = CPUTime.ofUser("postgres") - cpuBefore.database
                let pushersCPU = CPUTime.ofSelf() - cpuBefore.pushers
                let stored = Int(try cluster.sql("SELECT count(*) FROM ferry_changesets", database: database)
                    .trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
                guard stored == changeSets else { throw RawSQLiteError.failed("the database holds \(stored) change sets, not \(changeSets)") }
                for relay in relays { relay.stop() }
                rates[relayCount, default: []].append(Double(objects) / elapsed)
                print(String(format: "  run %d, %d relay%@: %.2f s, %.0f change sets/s, %.0f objects/s; " +
                                 "CPU seconds: relays %.2f, PostgreSQL %.2f, the pushing peers %.2f (%.0f%% of both cores)",
                             run + 1, relayCount, relayCount == 1 ? "" : "s", elapsed, Double(changeSets) / elapsed, Double(objects) / elapsed,
                             relayCPU, databaseCPU, pushersCPU, 100 * (relayCPU + databaseCPU + pushersCPU) / (2 * elapsed)))
                cpu[relayCount, default: []].append((relayCPU, databaseCPU))
            }
        }
        let one = rates[1]?.sorted() ?? []
        let two = rates[2]?.sorted() ?? []
        let medianOne = one[one.count / 2]
        let medianTwo = two[two.count / 2]
        print(String(format: "ingest medians: one relay %.0f objects/s, two relays %.0f objects/s: %.2fx (goals: two >= 1.6x one, >= 20,000 objects/s)",
                     medianOne, medianTwo, medianTwo / medianOne))
        // What one relay core and one PostgreSQL core take in, from the CPU they used: the sizing figures of docs/FLEET.md.
        let all = cpu.values.flatMap { $0 }
        let relaySeconds = all.map(\.relays).reduce(0, +)
        let databaseSeconds = all.map(\.database).reduce(0, +)
        let totalObjects = Double(objects * all.count)
        print(String(format: "  per CPU core: a relay checks and stores %.0f objects/s (%.0f change sets/s); PostgreSQL stores %.0f objects/s",
                     totalObjects / relaySeconds, totalObjects / relaySeconds / Double(objectsPerChangeSet), totalObjects / databaseSeconds))
    }
}

/// CPU time (user and system, seconds) of processes, from /proc.
enum CPUTime {
    static let ticksPerSecond = Double(sysconf(Int32(_SC_CLK_TCK)))

    /// Of process `pid` (0 once it is gone).
    static func of(_ pid: Int32) -> Double {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = text.lastIndex(of: ")") else { return 0 }
        // Fields after the command: state is field 3; utime and stime are fields 14 and 15.
        let fields = text[text.index(after: close)...].split(separator: " ")
        guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
        return (user + system) / ticksPerSecond
    }

    /// Of every process of the user `name` (PostgreSQL's server processes).
    static func ofUser(_ name: String) -> Double {
        guard let user = getpwnam(name)?.pointee.pw_uid,
              let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc") else { return 0 }
        var total = 0.0
        for entry in entries {
            guard let pid = Int32(entry), let attributes = try? FileManager.default.attributesOfItem(atPath: "/proc/\(entry)"),
                  (attributes[.ownerAccountID] as? NSNumber)?.uint32Value == user else { continue }
            total += of(pid)
        }
        return total
    }

    /// Of this process (the pushing peers).
    static func ofSelf() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6 + Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6
    }
}
