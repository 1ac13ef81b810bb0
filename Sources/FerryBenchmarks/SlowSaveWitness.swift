import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// What else happened on the machine while one W4 save travelled: read before the save and
/// after B showed it, so that a slow save can be told apart from a slow machine.
///
/// W4's p99 is its second-slowest save in 200: one or two slow saves decide it. A slow save
/// alone says nothing of its cause; these readings say whether, during it, threads waited for
/// a CPU (the kernel's pressure stall totals, and each daemon's run-queue wait), I/O stalled,
/// or either store's write-ahead log was checkpointed (its shared-memory header). All are read
/// from /proc and the `-shm` files, outside the timed span, and cost microseconds.
struct SlowSaveWitness {
    /// One reading.
    struct Reading {
        /// Microseconds some task waited for a CPU, and for I/O (`/proc/pressure`), since boot.
        var cpuStall: UInt64
        var ioStall: UInt64
        /// Nanoseconds each watched process's threads waited on a run queue (`/proc/PID/task/*/schedstat`).
        var runQueueWait: [UInt64]
        /// Each watched store's log: its frames, how many a checkpoint has copied, and its first
        /// salt (which changes when the log restarts from its beginning).
        var logs: [(frames: UInt32, copied: UInt32, salt: UInt32)]
    }

    /// A save's readings, before and after.
    struct Span {
        /// From the call to `save()` until B showed the object, and until `save()` returned (A's commit).
        let milliseconds: Double
        let commitMilliseconds: Double
        let before: Reading
        let after: Reading

        /// From `save()`'s return (A's commit) until B showed the object.
        var fromCommit: Double { milliseconds - commitMilliseconds }
    }

    private let processes: [(name: String, id: Int32)]
    private let stores: [(name: String, log: Int32)]

    /// Watches the threads of `processes` and the logs of `stores` (each store's file at `path`).
    init(processes: [(name: String, id: Int32)], stores: [(name: String, path: String)]) {
        self.processes = processes
        self.stores = stores.map { ($0.name, open($0.path + "-shm", O_RDONLY)) }
    }

    func close() {
        for store in stores where store.log >= 0 { _ = Glibc.close(store.log) }
    }

    func read() -> Reading {
        Reading(cpuStall: Self.stallTotal("cpu"), ioStall: Self.stallTotal("io"),
                runQueueWait: processes.map { Self.runQueueWait($0.id) },
                logs: stores.map { Self.logState($0.log) })
    }

    /// One line saying what changed during `span` (both readings this witness's), and whether a
    /// checkpoint ended between its end and `next` (the next save's first reading): a checkpoint's
    /// writes and sync may still be under way while a save waits for its own sync.
    func describe(_ span: Span, next: Reading?) -> String {
        let (before, after) = (span.before, span.after)
        var parts = [String(format: "%.1f ms (A's commit %.1f ms): CPU stall %.1f ms, I/O stall %.1f ms", span.milliseconds, span.commitMilliseconds,
                            Double(after.cpuStall &- before.cpuStall) / 1000, Double(after.ioStall &- before.ioStall) / 1000)]
        for (index, process) in processes.enumerated() {
            parts.append(String(format: "%@ waited %.1f ms for a CPU", process.name, Double(after.runQueueWait[index] &- before.runQueueWait[index]) / 1e6))
        }
        for (index, store) in stores.enumerated() {
            let (old, new) = (before.logs[index], after.logs[index])
            if old.salt != new.salt {
                parts.append("\(store.name)'s log restarted (\(old.frames) → \(new.frames) frames)")
            } else if new.copied != old.copied {
                parts.append("\(store.name)'s log checkpointed (\(old.copied) → \(new.copied) of \(new.frames) frames)")
            } else {
                parts.append("\(store.name)'s log +\(new.frames &- old.frames) frames")
            }
            if let later = next?.logs[index], later.salt == new.salt, later.copied != new.copied {
                parts.append("\(store.name)'s log checkpointed just after")
            }
        }
        return parts.joined(separator: "; ")
    }

    /// `some … total=N` of /proc/pressure/`resource` (0 when the kernel has no pressure stall information).
    private static func stallTotal(_ resource: String) -> UInt64 {
        guard let text = try? String(contentsOfFile: "/proc/pressure/\(resource)", encoding: .utf8),
              let line = text.split(separator: "\n").first(where: { $0.hasPrefix("some") }),
              let total = line.split(separator: " ").first(where: { $0.hasPrefix("total=") }) else { return 0 }
        return UInt64(total.dropFirst("total=".count)) ?? 0
    }

    /// The sum of the second field of each thread's schedstat: time spent runnable but not running.
    private static func runQueueWait(_ process: Int32) -> UInt64 {
        let tasks = "/proc/\(process)/task"
        guard let threads = try? FileManager.default.contentsOfDirectory(atPath: tasks) else { return 0 }
        var total: UInt64 = 0
        for thread in threads {
            guard let text = try? String(contentsOfFile: "\(tasks)/\(thread)/schedstat", encoding: .utf8) else { continue }
            let fields = text.split(separator: " ")
            if fields.count > 1 { total &+= UInt64(fields[1]) ?? 0 }
        }
        return total
    }

    /// The WAL index header's `mxFrame` (offset 16), its first salt (32) and the checkpoint
    /// information's `nBackfill` (96), in the machine's byte order (sqlite.org/walformat.html).
    private static func logState(_ descriptor: Int32) -> (frames: UInt32, copied: UInt32, salt: UInt32) {
        var header = [UInt8](repeating: 0, count: 100)
        guard descriptor >= 0, pread(descriptor, &header, header.count, 0) == header.count else { return (0, 0, 0) }
        func word(at offset: Int) -> UInt32 {
            header.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: offset, as: UInt32.self) }
        }
        return (word(at: 16), word(at: 96), word(at: 32))
    }
}
