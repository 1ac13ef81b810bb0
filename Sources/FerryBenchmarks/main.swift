// Workload W1 of docs/PERFORMANCE.md: insert N Person objects
// (name, id, manager link), B per save, through a Ferry context into a SQLite
// store, and the same rows through raw sqlite3 prepared statements into an
// identical schema with the same journal settings (WAL, synchronous=FULL).
// Prints objects/s for both and the ratio; run it in release mode:
//
//     swift run -c release FerryBenchmarks [--count N] [--batch B] [--runs R]
//
// Each run measures both sides in fresh child processes (see measureInChild).
import Foundation
import GRDBSQLite
import FerryModel
import FerryStore
import FerrySQLite
import FerrySigning
import FerryTestSupport

struct Settings {
    var count = 100_000
    var batch = 1_000
    var runs = 5
    /// Run one side only ("raw", "raw32" or "ferry"), once: the child mode, also handy for profiling.
    var only: String?

    init(arguments: [String]) {
        var iterator = arguments.dropFirst().makeIterator()
        while let argument = iterator.next() {
            if argument == "--only" { only = iterator.next(); continue }
            if ["--relay", "--predicates", "--replay", "--replicate", "--latency", "--decode", "--history", "--unique", "--bootstrap", "--put",
                "--migrate", "--live", "--reads", "--slow-pullers", "--identity", "--large-push", "--feed-backlog"].contains(argument) { continue }
            let value = iterator.next().flatMap(Int.init)
            switch (argument, value) {
            // 0 runs the setup only (with --only), so instruction counts can subtract it.
            case ("--count", let v?) where v >= 0: count = v
            case ("--batch", let v?) where v > 0: batch = v
            case ("--runs", let v?) where v > 0: runs = v
            default:
                let usage = "usage: FerryBenchmarks [--count N] [--batch B] [--runs R] [--only raw|raw32|ferry] [--predicates] " +
                    "[--replay [--decode] [--unique]] [--replicate] [--latency] [--history] [--bootstrap [--count N] [--relay]] [--relay] " +
                    "[--put] [--migrate [--count N]] [--live [--count N]] [--reads] [--slow-pullers [--count N] [--runs P] [--identity]] " +
                    "[--large-push [--count N] [--runs P]] [--feed-backlog [--count N]]\n"
                FileHandle.standardError.write(Data(usage.utf8))
                exit(64)
            }
        }
    }
}

/// Prints both sides' rates and their ratio against the target (0.5x unless told).
func printRates(count: Int, rawSeconds: Double, ferrySeconds: Double, ferryLabel: String, target: Double = 0.5) {
    let rawRate = Double(count) / rawSeconds
    let ferryRate = Double(count) / ferrySeconds
    print(String(format: "raw sqlite3 prepared statements: %10.0f objects/s", rawRate))
    print(ferryLabel.padding(toLength: 33, withPad: " ", startingAt: 0) + String(format: "%10.0f objects/s", ferryRate))
    print(String(format: "ratio Ferry/raw: %.2fx (target >= %.2fx)", ferryRate / rawRate, target))
}

/// The manager of person i is person i/10: a tree with fan-out 10, always an earlier object.
func managerIndex(of index: Int) -> Int? { index == 0 ? nil : index / 10 }

/// The value at fraction `p` (0.5: the median) of `sorted`, which is sorted and not empty.
func percentile(_ sorted: [Double], _ p: Double) -> Double {
    sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]
}

func seconds(_ body: () throws -> Void) rethrows -> Double {
    let start = DispatchTime.now().uptimeNanoseconds
    try body()
    return Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
}

/// W1 on a store at `path`; `signingKey`: every change set signed with it (what a store with a key does).
func ferryInsert(_ settings: Settings, model: ManagedObjectModel, path: String, signingKey: StoreSigningKey? = nil) throws -> Double {
    let store = try SQLiteStore(path: path, model: model, options: .init(signingKey: signingKey))
    let container = try PersistentContainer(store: store, classes: ["Person": OrgChartPerson.self])
    let context = container.newContext()
    var people: [OrgChartPerson] = []
    people.reserveCapacity(settings.count)
    return try seconds {
        for index in 0..<settings.count {
            let person = try context.insert(OrgChartPerson.self)
            person.id = Int64(index)
            person.name = "Person \(index)"
            person.manager = managerIndex(of: index).map { people[$0] }
            people.append(person)
            if (index + 1) % settings.batch == 0 { try context.save() }
        }
        try context.save()
        // Both sides end after a last checkpoint: Ferry's checkpoints run on a queue of their own,
        // and a timer stopped with one still queued would leave work the raw side pays in its commits.
        try store.checkpoint()
    }
}

enum RawSQLiteError: Error { case failed(String) }

/// Raw inserts, one row per INSERT (the baseline of the targets), or `rowsPerStatement`
/// rows per INSERT (the form Ferry's saves use; printed for reference).
func rawInsert(_ settings: Settings, model: ManagedObjectModel, path: String, rowsPerStatement: Int = 1) throws -> Double {
    // Same schema as the store (tables and indexes), created by opening it once.
    _ = try SQLiteStore(path: path, model: model)
    let db = try RawDatabase(path: path)
    let sql = "INSERT INTO ZPERSON (Z_PK, Z_ENT, Z_OPT, ZID, ZMANAGER, ZNAME) VALUES (?, 2, 1, ?, ?, ?)"
    let insert = try db.prepare(sql)
    let bulk = try db.prepare(sql + String(repeating: ", (?, 2, 1, ?, ?, ?)", count: rowsPerStatement - 1))
    let bump = try db.prepare("UPDATE Z_PRIMARYKEY SET Z_MAX = ? WHERE Z_ENT = 2")
    defer { sqlite3_finalize(insert); sqlite3_finalize(bulk); sqlite3_finalize(bump) }
    let transient = RawDatabase.transient
    return try seconds {
        var index = 0
        while index < settings.count {
            try db.exec("BEGIN IMMEDIATE")
            let end = min(index + settings.batch, settings.count)
            sqlite3_bind_int64(bump, 1, Int64(end))
            guard sqlite3_step(bump) == SQLITE_DONE else { throw RawSQLiteError.failed("bump") }
            sqlite3_reset(bump)
            while index < end {
                // `rowsPerStatement` rows per step while that many are left in the batch, else one.
                let rows = rowsPerStatement > 1 && end - index >= rowsPerStatement ? rowsPerStatement : 1
                let statement = rows > 1 ? bulk : insert
                for row in 0..<rows {
                    let parameter = Int32(row * 4)
                    sqlite3_bind_int64(statement, parameter + 1, Int64(index + 1))
                    sqlite3_bind_int64(statement, parameter + 2, Int64(index))
                    if let manager = managerIndex(of: index) {
                        sqlite3_bind_int64(statement, parameter + 3, Int64(manager + 1))
                    } else {
                        sqlite3_bind_null(statement, parameter + 3)
                    }
                    sqlite3_bind_text(statement, parameter + 4, "Person \(index)", -1, transient)
                    index += 1
                }
                guard sqlite3_step(statement) == SQLITE_DONE else { throw RawSQLiteError.failed(db.message) }
                sqlite3_reset(statement)
            }
            try db.exec("COMMIT")
        }
        // The same last checkpoint as Ferry's side (SQLite's automatic ones ran inside the commits).
        try db.exec("PRAGMA wal_checkpoint(PASSIVE)")
    }
}

/// The store file's size (the main file, after the runs' last checkpoint), for W1's size targets.
enum StoreFileSize {
    static func bytes(_ path: String) throws -> Int {
        (try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0
    }
}

/// Runs one side in a fresh child process: a run leaves
/// 100,000 freed objects behind, and the next run in the same process pays for
/// the fragmented heap, which would bias the comparison.
/// Returns the time, and the store file's size after the run (and, for Ferry, after purging everything).
func measureInChild(_ side: String, _ settings: Settings) throws -> (seconds: Double, bytes: Int, purged: Int?) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: CommandLine.arguments[0])
    process.arguments = ["--only", side, "--runs", "1", "--count", "\(settings.count)", "--batch", "\(settings.batch)"]
    let output = Pipe()
    process.standardOutput = output
    try process.run()
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    let text = String(decoding: data, as: UTF8.self)
    guard process.terminationStatus == 0,
          let line = text.split(separator: "\n").first(where: { $0.hasPrefix("seconds ") }),
          let value = Double(line.dropFirst("seconds ".count)) else {
        throw RawSQLiteError.failed("the \(side) run failed: \(text)")
    }
    func number(_ key: String) -> Int? {
        text.split(separator: "\n").first { $0.hasPrefix(key + " ") }.flatMap { Int($0.dropFirst(key.count + 1)) }
    }
    return (value, number("bytes") ?? 0, number("bytes-purged"))
}

/// Child mode (`--only SIDE`): inserts with one side in a fresh folder, prints its time and file
/// sizes for ``measureInChild(_:_:)``, and removes the folder.
func measureOneSide(_ side: String, _ settings: Settings, model: ManagedObjectModel) throws {
    let directory = TemporaryDirectory(prefix: "ferry-bench")
    let path = directory.file("\(side).sqlite")
    let time = switch side {
    case "raw": try rawInsert(settings, model: model, path: path)
    case "raw32": try rawInsert(settings, model: model, path: path, rowsPerStatement: 32)
    case "ferry-signed": try ferryInsert(settings, model: model, path: path, signingKey: StoreSigningKey())
    default: try ferryInsert(settings, model: model, path: path)
    }
    print("seconds \(time)")
    print("bytes \(try StoreFileSize.bytes(path))")
    if side == "ferry" {
        // Everything purged (every peer has it, no retention), as a daemon would in the end.
        let store = try SQLiteStore(path: path, model: model)
        try store.purgeHistory(PurgePolicy(acknowledged: [try store.historyState().vector]))
        try store.checkpoint()
        print("bytes-purged \(try StoreFileSize.bytes(path))")
    }
}

/// W1's model with Person.id indexed and unique (`--replay --unique`): replay then checks every
/// inserted key against the store.
func uniqueIDVariant(of model: ManagedObjectModel) throws -> ManagedObjectModel {
    try personVariant(of: model) { person in
        person.ownAttributes = person.ownAttributes.map { attribute in
            var attribute = attribute
            if attribute.name == "id" { attribute.isIndexed = true }
            return attribute
        }
        person.uniquenessConstraints = [["id"]]
    }
}

/// OrgChart with `change` made to its Person entity (the rest as it is).
func personVariant(of model: ManagedObjectModel, _ change: (inout EntityDescription) -> Void) throws -> ManagedObjectModel {
    let entities = model.entities.map { entity -> EntityDescription in
        guard entity.name == "Person" else { return entity }
        var person = entity
        change(&person)
        return person
    }
    return try ManagedObjectModel(entities: entities, fetchRequestTemplates: Array(model.fetchRequestTemplates.values), userInfo: model.userInfo,
                                  versionIdentifier: model.versionIdentifier)
}

let settings = Settings(arguments: CommandLine.arguments)
do {
    let model = try SampleModels.load("OrgChart")
    if CommandLine.arguments.contains("--replay") {
        if CommandLine.arguments.contains("--unique") {
            try ReplayWorkload.run(settings, model: try uniqueIDVariant(of: model), label: "W2 replay, Person.id indexed and unique", target: 0.4)
        } else {
            try ReplayWorkload.run(settings, model: model)
        }
        exit(0)
    }
    if CommandLine.arguments.contains("--replicate") {
        try ReplicationWorkload.replicate(settings, model: model)
        exit(0)
    }
    if CommandLine.arguments.contains("--relay"), !CommandLine.arguments.contains("--bootstrap") {
        try await RelayWorkload.run(model: model, runs: CommandLine.arguments.contains("--runs") ? settings.runs : 3)
        exit(0)
    }
    if CommandLine.arguments.contains("--bootstrap") {
        try await BootstrapWorkload.run(count: CommandLine.arguments.contains("--count") ? settings.count : 1_000_000, model: model,
                                        throughRelay: CommandLine.arguments.contains("--relay"))
        exit(0)
    }
    if CommandLine.arguments.contains("--migrate") {
        try MigrationWorkload.run(count: CommandLine.arguments.contains("--count") ? settings.count : 1_000_000, model: model,
                                  runs: CommandLine.arguments.contains("--runs") ? settings.runs : 3)
        exit(0)
    }
    if CommandLine.arguments.contains("--put") {
        try OperatorToolsWorkload.run(settings)
        exit(0)
    }
    if CommandLine.arguments.contains("--history") {
        try HistoryScaleWorkload.run(model: model)
        exit(0)
    }
    if CommandLine.arguments.contains("--slow-pullers") {
        try SlowPullersWorkload.run(count: CommandLine.arguments.contains("--count") ? settings.count : 400_000,
                                    pullers: CommandLine.arguments.contains("--runs") ? settings.runs : 10,
                                    gzip: !CommandLine.arguments.contains("--identity"), model: model)
        exit(0)
    }
    if CommandLine.arguments.contains("--large-push") {
        try LargePushWorkload.run(count: CommandLine.arguments.contains("--count") ? settings.count : 400_000,
                                  peers: CommandLine.arguments.contains("--runs") ? settings.runs : 2, model: model)
        exit(0)
    }
    if CommandLine.arguments.contains("--feed-backlog") {
        try await FeedBacklogWorkload.run(changeSets: CommandLine.arguments.contains("--count") ? settings.count : 20, model: model)
        exit(0)
    }
    if CommandLine.arguments.contains("--reads") {
        try ColdReadWorkload.run(model: model)
        exit(0)
    }
    if CommandLine.arguments.contains("--latency") {
        try await ReplicationWorkload.latency(samples: 200, model: model)
        try await ReplicationWorkload.latency(samples: 200, model: model, daemonInProcess: true)
        do {
            try await PostgresLatencyWorkload.run(samples: 200)
        } catch {
            print("W4 reference: PostgreSQL logical replication not measured: \(error)")
        }
        exit(0)
    }
    if settings.only == "live-writer" {
        try LiveContextWorkload.writer(count: settings.count, model: model)
        exit(0)
    }
    if CommandLine.arguments.contains("--live") {
        try await LiveContextWorkload.run(count: CommandLine.arguments.contains("--count") ? settings.count : 1_000_000, model: model)
        exit(0)
    }
    if CommandLine.arguments.contains("--predicates") {
        try PredicateWorkload.run(count: settings.count, runs: 3, model: model)
        exit(0)
    }
    if let side = settings.only {
        // Child mode: one side, one run, machine-readable. (The run's folder goes when the function
        // returns: `exit` skips the deinitializers of what is still in scope.)
        try measureOneSide(side, settings, model: model)
        exit(0)
    }
    guard settings.count > 0 else {
        FileHandle.standardError.write(Data("--count 0 is only meaningful with --only\n".utf8))
        exit(64)
    }
    print("W1 save: \(settings.count) Person objects, \(settings.batch) per save, best of \(settings.runs) runs, " +
          "each in a fresh process (every save records its change set)")
    var bestFerry = Double.infinity
    var bestRaw = Double.infinity
    var bestRaw32 = Double.infinity
    var bestSigned = Double.infinity
    var sizes: (raw: Int, ferry: Int, purged: Int) = (0, 0, 0)
    for run in 1...settings.runs {
        // Alternate the order so neither side always runs on a warmer machine.
        let order = run % 2 == 1 ? ["raw", "ferry", "ferry-signed", "raw32"] : ["raw32", "ferry-signed", "ferry", "raw"]
        var times: [String: Double] = [:]
        for side in order {
            let measured = try measureInChild(side, settings)
            times[side] = measured.seconds
            if side == "raw" { sizes.raw = measured.bytes }
            if side == "ferry" { sizes.ferry = measured.bytes; sizes.purged = measured.purged ?? 0 }
        }
        let raw = times["raw"] ?? .infinity
        let ferry = times["ferry"] ?? .infinity
        let raw32 = times["raw32"] ?? .infinity
        bestRaw = min(bestRaw, raw)
        bestFerry = min(bestFerry, ferry)
        bestRaw32 = min(bestRaw32, raw32)
        let signed = times["ferry-signed"] ?? .infinity
        bestSigned = min(bestSigned, signed)
        print(String(format: "  run %d: raw sqlite3 %.3f s, Ferry %.3f s, Ferry signing every change set %.3f s (raw with 32 rows per INSERT: %.3f s)",
                     run, raw, ferry, signed, raw32))
    }
    printRates(count: settings.count, rawSeconds: bestRaw, ferrySeconds: bestFerry, ferryLabel: "Ferry context + SQLiteStore:")
    printRates(count: settings.count, rawSeconds: bestRaw, ferrySeconds: bestSigned, ferryLabel: "the same, every change set signed:")
    print(String(format: "signing costs %.1f%% of W1 (best signed %.3f s / best unsigned %.3f s; target <= 5%%)",
                 (bestSigned / bestFerry - 1) * 100, bestSigned, bestFerry))
    // Ferry's saves insert up to 32 rows per statement; the same trick on the raw side, for reference
    // (the target is against the one-row-per-INSERT baseline above).
    print(String(format: "for reference, raw sqlite3 with 32 rows per INSERT: %.0f objects/s; Ferry/that: %.2fx",
                 Double(settings.count) / bestRaw32, bestRaw32 / bestFerry))
    let mb = { (bytes: Int) in Double(bytes) / 1_048_576 }
    print(String(format: "store file: raw %.1f MB; Ferry %.1f MB (%.2fx, target <= 3x), after purging everything %.1f MB (%.2fx, target <= 1.5x)",
                 mb(sizes.raw), mb(sizes.ferry), Double(sizes.ferry) / Double(max(sizes.raw, 1)),
                 mb(sizes.purged), Double(sizes.purged) / Double(max(sizes.raw, 1))))
} catch {
    FileHandle.standardError.write(Data("benchmark failed: \(error)\n".utf8))
    exit(1)
}
