import Foundation
import Synchronization
import FerryModel
import FerryStore
import FerrySQLite
import FerryTestSupport
import FerrySigning

/// Workloads W3, W4 and W6 of docs/PERFORMANCE.md, with real `ferry` processes on 127.0.0.1
/// (the release `ferry` binary next to this one: `swift build -c release --product ferry`).
enum ReplicationWorkload {
    /// W3 (and W6 with `--count 1000000`): W1 on peer A (its daemon serving), then
    /// `ferry sync-now` on B (no daemon: it syncs in its own process) over loopback
    /// HTTP; against raw sqlite3 inserts of the same rows in the same run; and
    /// the peak resident memory of B's process. Each side is measured `runs`
    /// times (at most 3; a fresh B each time) and the best of each is compared,
    /// as W1 and W2 do: this machine's fsync times vary a lot from run to run.
    static func replicate(_ settings: Settings, model: ManagedObjectModel) throws {
        let runs = min(max(settings.runs, 1), 5)
        print("W3 replicate: \(settings.count) Person objects saved on A (\(settings.batch) per save), " +
              "then `ferry sync-now` on B over loopback HTTP; best of \(runs)")
        try announceFerryExecutable()
        // A store made before keys (its change sets unsigned: B takes them without a check) and one that
        // signs every change set (B checks every signature), measured alternately in the same run.
        let unsignedA = try DaemonPeer(name: "a", model: SampleModels.path("OrgChart"), pullInterval: 3600)
        let signedA = try DaemonPeer(name: "a-signed", model: SampleModels.path("OrgChart"), pullInterval: 3600)
        let key = StoreSigningKey()
        try key.write(to: StoreSigningKey.defaultPath(forStore: signedA.store))
        let saving = try ferryInsert(settings, model: model, path: unsignedA.store)
        let savingSigned = try ferryInsert(settings, model: model, path: signedA.store, signingKey: key)
        print(String(format: "  A saved them in %.2f s (signed: %.2f s)", saving, savingSigned))
        try unsignedA.start()
        try signedA.start()
        defer {
            unsignedA.stop()
            signedA.stop()
        }
        var bestSync = Double.infinity
        var bestSigned = Double.infinity
        var peakMegabytes = 0.0
        for run in 1...runs {
            for signed in run % 2 == 1 ? [false, true] : [true, false] {
                let (elapsed, peak) = try syncNow(from: signed ? signedA : unsignedA, into: "b\(run)\(signed ? "s" : "")", settings: settings)
                if signed { bestSigned = min(bestSigned, elapsed) } else { bestSync = min(bestSync, elapsed) }
                peakMegabytes = max(peakMegabytes, peak)
                print(String(format: "  run %d: sync-now on a fresh B %.3f s (process start, HTTP pulls, replay%@), peak %.1f MB",
                             run, elapsed, signed ? ", every signature checked" : "", peak))
            }
        }
        // The baseline, best of three at least.
        let raw = try (1...max(runs, 3)).map { try rawInsert(settings, model: model, path: unsignedA.directory.file("raw\($0).sqlite")) }.min() ?? .infinity
        print(String(format: "  raw sqlite3 %.3f s (best of %d), sync-now on B %.3f s, signed %.3f s (best of %d)",
                     raw, max(runs, 3), bestSync, bestSigned, runs))
        printRates(count: settings.count, rawSeconds: raw, ferrySeconds: bestSync, ferryLabel: "Ferry A → B (sync-now):", target: 0.33)
        printRates(count: settings.count, rawSeconds: raw, ferrySeconds: bestSigned, ferryLabel: "the same, signed and checked:", target: 0.33)
        print(String(format: "checking signatures costs %.1f%% of W3's sync-now (target <= 5%%)", (bestSigned / bestSync - 1) * 100))
        print(String(format: "W6 memory: peak resident memory of B's sync-now: %.1f MB for %d objects (target <= 200 MB at 1,000,000)",
                     peakMegabytes, settings.count))
    }

    /// Prints which `ferry` the processes run, and warns when it may not be a release build:
    /// when this benchmark is a debug build, or when no `ferry` lies next to it and the
    /// repository's debug build is used instead (~3x slower). A `ferry` next to a release
    /// benchmark is taken as built with it, wherever the pair was copied (`scripts/alternate-w4`).
    private static func announceFerryExecutable() throws {
        let ferry = try FerryProcess.executable().path
        print("  ferry: \(ferry)")
        let besideThisBinary = URL(fileURLWithPath: ferry).deletingLastPathComponent().standardizedFileURL
            == URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().standardizedFileURL
        if !besideThisBinary || !isReleaseBuild {
            let warning = "warning: \(ferry) may not be a release build; " +
                "run a release FerryBenchmarks with a release ferry beside it (swift build -c release --product ferry)\n"
            FileHandle.standardError.write(Data(warning.utf8))
        }
    }

    /// Whether this benchmark was compiled without `DEBUG` (SwiftPM's release configuration).
    private static var isReleaseBuild: Bool {
        #if DEBUG
        return false
        #else
        return true
        #endif
    }

    /// One `ferry sync-now` of a new peer named `name` from `a`: seconds, and the process's peak resident memory in MB.
    static func syncNow(from a: DaemonPeer, into name: String, settings: Settings) throws -> (seconds: Double, peakMegabytes: Double) {
        let b = try DaemonPeer(name: name, model: SampleModels.path("OrgChart"), pullInterval: 3600)
        try b.connect(to: a)
        guard try FerryProcess.run(["init", "--config", b.configuration]).status == 0 else { throw RawSQLiteError.failed("init B") }

        let taken = try measuredFerry(["sync-now", "--config", b.configuration], describing: "sync-now on B", log: a.log())
        let count = try FerryProcess.run(["query", "--config", b.configuration, "Person", "--count"]).standardOutput
        guard Int(count.trimmingCharacters(in: .whitespacesAndNewlines)) == settings.count else {
            throw RawSQLiteError.failed("B has \(count) objects, not \(settings.count)")
        }
        return taken
    }

    /// Runs `ferry ARGUMENTS` (reading `input`, a file, when given): its seconds, and its peak resident
    /// memory in MB. The peak comes from /usr/bin/time (Debian's `time`): the kernel's figure for a
    /// child of this process would include this process's own size, copied at fork before the exec.
    /// - Throws: when it fails, with what it printed (and `log`).
    static func measuredFerry(_ arguments: [String], input: URL? = nil, describing what: String,
                              log: String = "") throws -> (seconds: Double, peakMegabytes: Double) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/time")
        process.arguments = ["-f", "peak-kb %M", try FerryProcess.executable().path] + arguments
        process.standardOutput = FileHandle.nullDevice
        if let input { process.standardInput = try FileHandle(forReadingFrom: input) }
        let errors = Pipe()
        process.standardError = errors
        var report = Data()
        let elapsed = try seconds {
            try process.run()
            report = errors.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
        }
        let text = String(decoding: report, as: UTF8.self)
        guard process.terminationStatus == 0,
              let peak = text.split(separator: "\n").last(where: { $0.hasPrefix("peak-kb ") }).flatMap({ Double($0.dropFirst("peak-kb ".count)) }) else {
            throw RawSQLiteError.failed("\(what) failed: \(text)\n\(log)")
        }
        return (elapsed, peak / 1024)
    }

    /// W4: one save on A with both daemons running, until B shows it; p50 and p99 over `samples` saves.
    /// The saves are made by this process; A's daemon is a `ferry run` process (another process on
    /// A's file), or with `daemonInProcess` runs in this process (`Daemon.assemble`), so that the
    /// saves are made by the daemon's own process.
    static func latency(samples: Int, model: ManagedObjectModel, daemonInProcess: Bool = false) async throws {
        try announceFerryExecutable()
        let a = try DaemonPeer(name: "a", model: SampleModels.path("OrgChart"), pullInterval: 3600)
        let b = try DaemonPeer(name: "b", model: SampleModels.path("OrgChart"), pullInterval: 3600)
        try a.connect(to: b)
        try b.connect(to: a)
        try b.start()
        var inProcess: InProcessDaemon?
        if daemonInProcess {
            inProcess = try await InProcessDaemon(a, logLevel: .error)
        } else {
            try a.start()
        }
        defer { a.stop(); b.stop() }
        let writer = try PersistentContainer(store: SQLiteStore(path: a.store, model: model)).newContext()
        let reader = try SQLiteStore(path: b.store, model: model)
        // B's commits wake the check, as they would an application waiting for the object: the
        // loop reads after each signal of the store's commit stream (no poll, no hand-off to
        // another thread). A watchdog ends the run when one wait outlasts 10 s.
        var commits = reader.commits().makeAsyncIterator()
        let progress = Progress()
        let watchdog = Task.detached {
            while !Task.isCancelled {
                try? await Task.sleep(for: .milliseconds(500))
                if progress.stalled(for: 10_000_000_000) {
                    FileHandle.standardError.write(Data("W4: B did not show a save within 10 s\n".utf8))
                    _ = a.stop()
                    _ = b.stop()
                    exit(1)
                }
            }
        }
        defer { watchdog.cancel() }
        // What else happened during each save (read outside the timed span): see SlowSaveWitness.
        let watched = [(b.name, b.processIdentifier), (a.name, a.processIdentifier), ("this process", getpid())]
            .compactMap { name, process in process.map { (name: name, id: $0) } }
        let witness = SlowSaveWitness(processes: watched, stores: [(a.name, a.store), (b.name, b.store)])
        defer { witness.close() }
        /// Saves one object on A and returns how long until B has it, from the call to `save()` and
        /// from its return (the commit on A: how replication latency is usually quoted).
        func saveAndWait(_ name: String) async throws -> SlowSaveWitness.Span {
            let person = try writer.insert(entityName: "Person")
            try person.setValue(name, forKey: "name")
            let before = witness.read()
            let start = DispatchTime.now().uptimeNanoseconds
            try writer.save()
            let returned = DispatchTime.now().uptimeNanoseconds
            let uri = person.objectID.uriString
            while try reader.localObjectID(forOriginURI: uri) == nil {
                guard await commits.next() != nil else { throw RawSQLiteError.failed("B's commit stream ended") }
            }
            let seen = DispatchTime.now().uptimeNanoseconds
            progress.note()
            return SlowSaveWitness.Span(milliseconds: Double(seen - start) / 1e6, commitMilliseconds: Double(returned - start) / 1e6,
                                        before: before, after: witness.read())
        }
        // Not counted: the first save opens the connection between the daemons and prepares what
        // later saves reuse. (B starts before A, so A's first pull finds B listening and no backoff
        // is left over from the start; it once was, which made the first save last a second.)
        let warmUp = try await saveAndWait("W4 warm-up")
        print(String(format: "  warm-up save (not counted): %.1f ms", warmUp.milliseconds))
        var spans: [SlowSaveWitness.Span] = []
        for index in 0..<samples {
            spans.append(try await saveAndWait("W4 \(index)"))
            usleep(UInt32.random(in: 20_000...60_000))  // saves spread out, not in one burst
        }
        let latencies = spans.map(\.milliseconds).sorted()
        let fromCommit = spans.map(\.fromCommit).sorted()
        let saver = daemonInProcess ? "by the daemon's own process" : "by another process"
        print(String(format: "W4 latency: %d saves on A (%@) until B shows each: p50 %.2f ms, p99 %.2f ms, max %.1f ms (targets p50 <= 3 ms, p99 <= 15 ms)",
                     samples, saver, percentile(latencies, 0.5), percentile(latencies, 0.99), latencies.last ?? 0))
        print(String(format: "  the same from each save's return (A's commit) until B shows it: p50 %.2f ms, p99 %.2f ms, max %.1f ms",
                     percentile(fromCommit, 0.5), percentile(fromCommit, 0.99), fromCommit.last ?? 0))
        // The slowest saves decide p99 and max: what else happened while each travelled, and the
        // same for the median save, to compare with.
        let bySpeed = spans.indices.sorted { spans[$0].milliseconds > spans[$1].milliseconds }
        print("  the slowest saves, and the median one (CPU and I/O stalls are machine-wide):")
        for index in bySpeed.prefix(3) + bySpeed.dropFirst(bySpeed.count / 2).prefix(1) {
            print("    " + witness.describe(spans[index], next: index + 1 < spans.count ? spans[index + 1].before : nil))
        }
        // Whether any push fell back to a request of its own (the stream busy or lost), from B's request counts.
        if let metrics = try? FerryProcess.curl("GET", b.url + "/metrics", token: b.adminToken).body {
            func requests(_ route: String) -> Int {
                metrics.split(separator: "\n").filter { $0.hasPrefix("hb_requests{") && $0.contains("http_route=\"\(route)\"") }
                    .compactMap { $0.split(separator: " ").last.flatMap { Double($0) } }.reduce(0) { $0 + Int($1) }
            }
            print("  B took \(requests("/v1/changesets")) push(es) as requests of their own, the rest on a push stream; " +
                  "\(requests("/v1/changesets/stream")) stream(s) ended during the run")
        }
        try await inProcess?.stop()
        // A failed round waits for its backoff before the next try: the likeliest cause of a slow outlier.
        for peer in [a, b] {
            let failures = peer.log().split(separator: "\n").filter { $0.contains(" failed") }
            print("  \(peer.name)'s daemon logged \(failures.count) failed sync round(s)" + (failures.isEmpty ? "" : ":"))
            for line in failures.prefix(5) { print("    \(line)") }
        }
    }
}

/// When the latency run last made progress, for its watchdog.
private final class Progress: Sendable {
    private let last = Atomic<UInt64>(DispatchTime.now().uptimeNanoseconds)

    func note() { last.store(DispatchTime.now().uptimeNanoseconds, ordering: .relaxed) }

    func stalled(for nanoseconds: UInt64) -> Bool {
        DispatchTime.now().uptimeNanoseconds - last.load(ordering: .relaxed) > nanoseconds
    }
}
