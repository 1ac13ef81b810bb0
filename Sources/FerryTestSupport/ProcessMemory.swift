import Foundation

/// Memory figures of a running process, from `/proc/PID/status`.
enum ProcessMemory {
    /// The figure named `name` (`VmRSS:`, `VmHWM:`) in bytes; nil when the process or the line is not there.
    static func figure(_ name: String, of processIdentifier: Int32) -> Int? {
        guard let status = try? String(contentsOfFile: "/proc/\(processIdentifier)/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix(name) }),
              let kilobytes = Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") else { return nil }
        return kilobytes * 1024
    }
}
