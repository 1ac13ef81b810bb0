// The operator tools on W1's rows: `ferry put` of the rows as JSON lines against the raw
// insert of the same rows (W1's raw side), in the same run, and `ferry dump` of the result.
// Each side runs in a fresh process; put and dump are timed as the user runs them, whole
// processes (start, model load, parse, saves, output):
//
//     swift build -c release --product ferry --product FerryBenchmarks
//     .build/release/FerryBenchmarks --put [--count N] [--batch B] [--runs R]
import Foundation
import FerryModel
import FerryTestSupport

enum OperatorToolsWorkload {
    /// W1's rows as `ferry put` reads them: one line (one save) per batch, a ref per person, the
    /// manager by ref (person i/10, always inserted earlier).
    static func putInput(_ settings: Settings) -> String {
        var text = ""
        text.reserveCapacity(settings.count * 110)
        for index in 0..<settings.count {
            text += index % settings.batch == 0 ? "[" : ","
            text += #"{"op":"insert","entity":"Person","ref":"p\#(index)","values":{"id":\#(index),"name":"Person \#(index)""#
            if let manager = managerIndex(of: index) { text += #","manager":"p\#(manager)""# }
            text += "}}"
            if (index + 1) % settings.batch == 0 || index + 1 == settings.count { text += "]\n" }
        }
        return text
    }

    /// Runs `ferry` with `arguments`, output to /dev/null; the wall time of the whole process.
    /// (posix_spawn and waitpid: Foundation's `Process.waitUntilExit` polls, and its times came in
    /// steps of 50 ms.)
    static func timeFerry(_ ferry: String, _ arguments: [String]) throws -> Double {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        let argv: [UnsafeMutablePointer<CChar>?] = ([ferry] + arguments).map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var pid: pid_t = 0
        var status: Int32 = 0
        let time = try seconds {
            let spawned = posix_spawn(&pid, ferry, &actions, nil, argv, environ)
            guard spawned == 0 else { throw RawSQLiteError.failed("cannot start \(ferry): error \(spawned)") }
            while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
        }
        // (Exited normally with 0: the low 7 bits hold no signal, the next 8 the status.)
        guard status & 0x7F == 0, (status >> 8) & 0xFF == 0 else {
            throw RawSQLiteError.failed("ferry \(arguments.first ?? "") failed (wait status \(status)); its errors are above")
        }
        return time
    }

    static func run(_ settings: Settings) throws {
        let ferry = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("ferry").path
        guard FileManager.default.isExecutableFile(atPath: ferry) else {
            throw RawSQLiteError.failed("no ferry next to this benchmark (\(ferry)): build it first with `swift build -c release --product ferry`")
        }
        let model = SampleModels.path("OrgChart")
        let directory = TemporaryDirectory(prefix: "ferry-bench-put")
        let input = directory.file("w1.jsonl")
        try putInput(settings).write(toFile: input, atomically: false, encoding: .utf8)
        let megabytes = Double((try FileManager.default.attributesOfItem(atPath: input)[.size] as? Int) ?? 0) / 1_048_576
        print(String(format: "operator tools on W1's rows: %d Person objects as %d JSON lines (%.1f MB), best of %d runs, each in a fresh process",
                     settings.count, (settings.count + settings.batch - 1) / settings.batch, megabytes, settings.runs))
        var best = (raw: Double.infinity, put: Double.infinity, dump: Double.infinity)
        for run in 1...settings.runs {
            let store = directory.file("put-\(run).sqlite")
            _ = try timeFerry(ferry, ["init", "--store", store, "--model", model])
            var raw = 0.0, put = 0.0
            // Alternate the order so neither side always runs on a warmer machine.
            if run % 2 == 1 {
                raw = try measureInChild("raw", settings).seconds
                put = try timeFerry(ferry, ["put", "--store", store, "--model", model, input])
            } else {
                put = try timeFerry(ferry, ["put", "--store", store, "--model", model, input])
                raw = try measureInChild("raw", settings).seconds
            }
            let dump = try timeFerry(ferry, ["dump", "--store", store, "--model", model])
            best = (min(best.raw, raw), min(best.put, put), min(best.dump, dump))
            print(String(format: "  run %d: raw sqlite3 %.3f s, ferry put %.3f s (%.2fx), ferry dump %.3f s", run, raw, put, raw / put, dump))
        }
        printRates(count: settings.count, rawSeconds: best.raw, ferrySeconds: best.put, ferryLabel: "ferry put (whole process):", target: 0.4)
        print(String(format: "ferry dump (whole process): %10.0f objects/s (target >= 200000)", Double(settings.count) / best.dump))
    }
}
