// A live application's memory while another process takes in a backlog of large change sets
// (docs/RELIABILITY.md, findings): this process holds a container on a store and follows its
// changes (`PersistentContainer.changes()`); it is stopped while `ferry apply` writes N change sets
// of 5.8 MB of text each (100 Person objects a save, each named with 58,000 characters) into the
// same file, as an application paused or busy while a daemon takes a backlog in. Prints how much
// this process's peak resident memory grew until every change set was told, against the backlog's
// size, and how long the last event came after `ferry apply` ended.
//
//     swift build -c release --product ferry && swift build -c release --product FerryBenchmarks
//     .build/release/FerryBenchmarks --feed-backlog [--count N]     (N change sets, default 20)
import Foundation
import FerryModel
import FerryStore
import FerrySQLite
import FerryTestSupport

enum FeedBacklogWorkload {
    static func run(changeSets: Int, model: ManagedObjectModel) async throws {
        let directory = TemporaryDirectory()
        let modelPath = SampleModels.path("OrgChart")
        let (source, target, backlog) = (directory.file("source.sqlite"), directory.file("live.sqlite"), directory.file("backlog.jsonl"))
        // The backlog, made and written out by other processes, so that this one's peak is its own.
        try succeeded(FerryProcess.run(["init", "--store", source, "--model", modelPath]), "init")
        for part in 0..<changeSets {
            let operations = DaemonPeer.longNamedPeople(part * 1000 ..< part * 1000 + 100, mark: part % 10)
            try succeeded(FerryProcess.run(["put", "--store", source, "--model", modelPath, "-"], input: operations), "put")
        }
        let ferry = try FerryProcess.executable().path
        try succeeded(FerryProcess.run(executable: "/bin/sh", ["-c", #""$0" history --store "$1" --model "$2" > "$3""#, ferry, source, modelPath, backlog]),
                      "history")
        let backlogBytes = (try FileManager.default.attributesOfItem(atPath: backlog)[.size] as? Int) ?? 0
        try succeeded(FerryProcess.run(["init", "--store", target, "--model", modelPath]), "init")
        print(String(format: "Feed of a backlog: %d change sets, %.1f MB of text, taken in by `ferry apply` " +
                         "while this process, following the store's changes, is stopped",
                     changeSets, Double(backlogBytes) / 1_048_576))

        let container = try PersistentContainer(store: SQLiteStore(path: target, model: model))
        let events = container.changes()
        let told = ThreadTaskExecutor.task(named: "ferry-listener") { () -> ContinuousClock.Instant? in
            var count = 0
            for await event in events where event.kind == .storeChangedRemotely {
                count += 1
                if count == changeSets { return ContinuousClock.now }
            }
            return nil
        }
        try await Task.sleep(for: .milliseconds(300))
        let before = peakResidentMemory()
        // `ferry apply` runs while this process is stopped (the shell that runs it sends this process
        // SIGSTOP first and SIGCONT after): as an application paused, or too busy to follow, while a
        // daemon took a backlog in. On waking, its feed finds the whole backlog new.
        try succeeded(FerryProcess.run(executable: "/bin/sh",
                                       ["-c", #"kill -STOP $PPID; "$0" apply --store "$1" --model "$2" "$3"; s=$?; kill -CONT $PPID; exit $s"#,
                                        ferry, target, modelPath, backlog]), "apply")
        let applied = ContinuousClock.now
        guard let last = await told.value else { throw DaemonPeerError(description: "the feed ended before it told every change set") }
        let growth = peakResidentMemory() - before
        print(String(format: "  this process's peak resident memory grew by %.1f MB (%.2f of the backlog's text); " +
                         "the last event came %.0f ms after `ferry apply` ended",
                     Double(growth) / 1_048_576, Double(growth) / Double(max(backlogBytes, 1)),
                     (last - applied) / .milliseconds(1)))
        withExtendedLifetime(container) {}
    }

    /// This process's peak resident memory (`VmHWM`), in bytes.
    private static func peakResidentMemory() -> Int {
        ProcessMemory.figure("VmHWM:", of: getpid()) ?? 0
    }

    private static func succeeded(_ result: FerryProcess.Result, _ command: String) throws {
        guard result.status == 0 else {
            throw DaemonPeerError(description: "ferry \(command) exited with \(result.status): \(result.standardError.prefix(600))")
        }
    }
}
