import Foundation
import GRDBSQLite
import FerryModel
import FerryStore
import FerrySQLite
import FerryTestSupport

/// Workload W5 of docs/PERFORMANCE.md: the newest 100 change sets read from a history of
/// 10,000 and of 1,000,000 change sets, same run. The histories are written
/// straight into the log table (one transaction each; saving a million change
/// sets one by one would take hours of fsyncs), as a store would hold them.
enum HistoryScaleWorkload {
    static func run(model: ManagedObjectModel) throws {
        print("W5 history scale: the newest 100 change sets (the page a peer 100 behind asks for), median of 50 reads")
        var medians: [Int: Double] = [:]
        for size in [10_000, 1_000_000] {
            let directory = TemporaryDirectory(prefix: "ferry-bench-history")
            let path = directory.file("history.sqlite")
            let origin = try SQLiteStore(path: path, model: model).identifier
            try fill(path: path, origin: origin, count: size)
            let store = try SQLiteStore(path: path, model: model)
            var times: [Double] = []
            for _ in 0..<50 {
                var lines: [String] = []
                times.append(try seconds { lines = try store.changeSetLines(after: [origin: Int64(size - 100)], limit: 500) })
                guard lines.count == 100 else { throw RawSQLiteError.failed("read \(lines.count) change sets, not 100") }
            }
            let median = times.sorted()[times.count / 2]
            medians[size] = median
            print(String(format: "  %9d change sets in the history: %.3f ms", size, median * 1000))
        }
        if let small = medians[10_000], let large = medians[1_000_000] {
            print(String(format: "ratio 1,000,000 / 10,000: %.2fx (flat is 1.00x)", large / small))
        }
    }

    /// `count` change sets of `origin`, each a small canonical body, and the vector that says so.
    static func fill(path: String, origin: UUID, count: Int) throws {
        let db = try RawDatabase(path: path)
        let insert = try db.prepare("INSERT INTO Z_FERRY_CHANGESET (Z_ORIGIN, Z_SEQ, Z_HLC, Z_STATUS, Z_BODY) VALUES (?, ?, ?, 0, ?)")
        defer { sqlite3_finalize(insert) }
        let transient = RawDatabase.transient
        let originText = origin.uuidString
        try db.exec("BEGIN IMMEDIATE")
        for sequence in 1...count {
            let body = #"{"changes":[{"entity":"Person","op":"insert","uri":"x-coredata://\#(originText)/Person/p\#(sequence)","# +
                #""values":{"id":\#(sequence)}}],"format":1,"hlc":\#(sequence),"origin":"\#(originText)","seq":\#(sequence)}"#
            sqlite3_bind_text(insert, 1, originText, -1, transient)
            sqlite3_bind_int64(insert, 2, Int64(sequence))
            sqlite3_bind_int64(insert, 3, Int64(sequence))
            sqlite3_bind_text(insert, 4, body, -1, transient)
            guard sqlite3_step(insert) == SQLITE_DONE else { throw RawSQLiteError.failed(db.message) }
            sqlite3_reset(insert)
        }
        try db.exec("INSERT OR REPLACE INTO Z_FERRY_VECTOR (Z_ORIGIN, Z_SEQ) VALUES ('\(originText)', \(count))")
        try db.exec("COMMIT")
    }
}
