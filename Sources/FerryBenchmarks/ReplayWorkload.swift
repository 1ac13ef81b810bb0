import Foundation
import Synchronization
import FerryModel
import FerryStore
import FerrySQLite
import FerrySync
import FerryTestSupport

/// Workload W2 of docs/PERFORMANCE.md: replay W1's change sets into an empty store,
/// against raw sqlite3 inserts of the same rows in the same run; the bytes per
/// change of the log; and the save latency an application sees while a replay runs.
enum ReplayWorkload {
    static func run(_ settings: Settings, model: ManagedObjectModel, label: String = "W2 replay", target: Double = 0.5) throws {
        let directory = TemporaryDirectory(prefix: "ferry-bench-replay")
        _ = try ferryInsert(settings, model: model, path: directory.file("origin.sqlite"))
        let origin = try SQLiteStore(path: directory.file("origin.sqlite"), model: model)
        let lines = try origin.changeSetLines()
        let bytes = lines.reduce(0) { $0 + $1.utf8.count + 1 }
        print("\(label): \(settings.count) Person inserts in \(lines.count) change sets; best of \(settings.runs)")
        print(String(format: "  change-set JSON: %d bytes, %.1f bytes per object change (log and wire carry the same text)",
                     bytes, Double(bytes) / Double(max(settings.count, 1))))

        if CommandLine.arguments.contains("--decode") {
            // CPU only, no disk: how long checking and decoding W1's change sets takes (part of every replay).
            // (The model's hash once, as a replay has it: the two figures below differ only in threads.)
            let versionHash = model.versionHash
            let best = try (1...3).map { _ in
                try seconds { for line in lines { _ = try ChangeSetCodec.decode(line, model: model, versionHash: versionHash) } }
            }.min() ?? 0
            print(String(format: "  decoding them: %.3f s (best of 3), %.1f µs per object change", best, best * 1e6 / Double(max(settings.count, 1))))
            // As a replay decodes a batch: split in two halves on two threads when large.
            let batch = try (1...3).map { _ in try seconds { _ = try LineDecoding.decode(lines, model: model, versionHash: versionHash) } }.min() ?? 0
            print(String(format: "  decoding them as one batch, as a replay does: %.3f s (best of 3; %.2fx the line-by-line time)",
                         batch, batch / max(best, 1e-9)))
            return
        }
        var bestReplay = Double.infinity
        var bestRaw = Double.infinity
        for run in 1...settings.runs {
            let replayStore = try SQLiteStore(path: directory.file("replay\(run).sqlite"), model: model)
            let engine = try ReplayEngine(store: replayStore)
            var report = ApplyReport()
            // Ends after a last checkpoint, as the raw side does (see ferryInsert).
            let replay = try seconds {
                report = try engine.apply(lines: lines)
                try replayStore.checkpoint()
            }
            guard report.applied == lines.count else { throw RawSQLiteError.failed("replay applied \(report.applied) of \(lines.count)") }
            let raw = try rawInsert(settings, model: model, path: directory.file("raw\(run).sqlite"))
            bestReplay = min(bestReplay, replay)
            bestRaw = min(bestRaw, raw)
            print(String(format: "  run %d: raw sqlite3 %.3f s, Ferry replay %.3f s", run, raw, replay))
        }
        printRates(count: settings.count, rawSeconds: bestRaw, ferrySeconds: bestReplay, ferryLabel: "Ferry replay (ReplayEngine):", target: target)

        try latencyDuringReplay(lines: lines, model: model, directory: directory)
    }

    /// An application saving one object every 10 ms on the store a replay is writing.
    /// A replay of W1's change sets lasts about a second, so one gives only ~60–100 saves,
    /// and their "p99" would be their maximum; the saves of `replays` replays (each into a
    /// fresh store) are pooled, and each replay's maximum is printed as well.
    static func latencyDuringReplay(lines: [String], model: ManagedObjectModel, directory: TemporaryDirectory, replays: Int = 5) throws {
        var latencies: [Double] = []
        var maxima: [Double] = []
        for round in 1...replays {
            let path = directory.file("shared\(round).sqlite")
            let replayStore = try SQLiteStore(path: path, model: model)
            let appStore = try SQLiteStore(path: path, model: model)
            let done = Flag()
            let replay = Thread {
                _ = try? ReplayEngine(store: replayStore).apply(lines: lines)
                done.set()
            }
            replay.start()
            let context = try PersistentContainer(store: appStore).newContext()
            var index = 0
            var worst = 0.0
            while !done.isSet {
                try context.make("Person", ["id": Int64(-1 - index), "name": "app \(index)"])
                let latency = try seconds { try context.save() }
                latencies.append(latency)
                worst = max(worst, latency)
                index += 1
                Thread.sleep(forTimeInterval: 0.01)
            }
            maxima.append(worst * 1000)
        }
        latencies.sort()
        func milliseconds(_ p: Double) -> Double { latencies.isEmpty ? 0 : percentile(latencies, p) * 1000 }
        print(String(format: "  app saves during %d replays: %d, latency p50 %.1f ms, p99 %.1f ms, max %.1f ms (target p99 <= 50 ms)",
                     replays, latencies.count, milliseconds(0.5), milliseconds(0.99), (latencies.last ?? 0) * 1000))
        print("  each replay's slowest app save: " + maxima.map { String(format: "%.1f ms", $0) }.joined(separator: ", "))
    }
}

/// A flag one thread sets and another polls.
final class Flag: Sendable {
    private let value = Atomic<Bool>(false)
    var isSet: Bool { value.load(ordering: .acquiring) }
    func set() { value.store(true, ordering: .releasing) }
}
