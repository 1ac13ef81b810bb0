import Foundation
import Synchronization

/// Memory figures of a running process, from `/proc/PID/status`.
package enum ProcessMemory {
    /// The figure named `name` (`VmRSS:`, `VmHWM:`) in bytes; nil when the process or the line is not there.
    package static func figure(_ name: String, of processIdentifier: Int32) -> Int? {
        guard let status = try? String(contentsOfFile: "/proc/\(processIdentifier)/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix(name) }),
              let kilobytes = Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") else { return nil }
        return kilobytes * 1024
    }
}

/// The highest resident memory (`VmHWM`) a process reached, read every 2 ms on a thread of its own
/// from its start until it ends or ``stop()`` is called.
final class PeakMemorySampler: Sendable {
    private let peak = Mutex(0)
    private let stopped = Atomic(false)
    private let done = DispatchSemaphore(value: 0)

    init(of processIdentifier: Int32) {
        Thread { [self] in
            // (An ended process, a zombie until it is waited for, has no `VmHWM` line.)
            while !stopped.load(ordering: .relaxed), let figure = ProcessMemory.figure("VmHWM:", of: processIdentifier) {
                peak.withLock { $0 = max($0, figure) }
                Thread.sleep(forTimeInterval: 0.002)
            }
            done.signal()
        }.start()
    }

    /// Stops the sampling and returns the highest figure read, in bytes (0 when none was).
    func stop() -> Int {
        stopped.store(true, ordering: .relaxed)
        done.wait()
        return peak.withLock { $0 }
    }
}
