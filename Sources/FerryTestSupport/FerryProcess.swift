import Foundation
import Synchronization

/// Runs the built `ferry` executable, as an operator or a script would.
public enum FerryProcess {
    /// What a run printed and how it ended.
    public struct Result: Sendable {
        /// The exit status.
        public let status: Int32
        /// Everything written to standard output.
        public let standardOutput: String
        /// Everything written to standard error.
        public let standardError: String
    }

    /// Why the binary could not be run.
    public struct NotFound: Error, CustomStringConvertible {
        /// The paths that were tried.
        public let searched: [String]
        public var description: String {
            "the ferry executable was not found (looked in \(searched.joined(separator: ", "))); run `swift build` first"
        }
    }

    /// The `ferry` binary next to the running test bundle, or in `.build/debug`.
    public static func executable() throws -> URL {
        let nextToTests = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("ferry").path
        let candidates = [nextToTests, "\(SampleModels.repositoryRoot)/.build/debug/ferry"]
        guard let found = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            throw NotFound(searched: candidates)
        }
        return URL(fileURLWithPath: found)
    }

    /// Runs `ferry arguments…`, feeding `input` on standard input, in `directory`; killed after
    /// `timeout` seconds (``TimedOut``).
    public static func run(_ arguments: [String], input: String? = nil, in directory: String? = nil,
                           timeout: TimeInterval = BoundedWaiting.processTimeout) throws -> Result {
        try run(executable: executable().path, arguments, input: input, in: directory, timeout: timeout)
    }

    /// Runs `ferry arguments…` as ``run(_:input:in:timeout:)`` does, and also returns the highest
    /// resident memory it reached (the kernel's `VmHWM`, in bytes), read every 2 ms while it ran: a
    /// peak held for less than that, or reached in its last 2 ms, can be missed.
    public static func runMeasuringPeakMemory(_ arguments: [String]) throws -> (result: Result, peakResidentMemory: Int) {
        var sampler: PeakMemorySampler?
        let result = try run(executable: executable().path, arguments) { sampler = PeakMemorySampler(of: $0.processIdentifier) }
        return (result, sampler?.stop() ?? 0)
    }

    /// `curl` a request to a daemon (with a bearer `token`, an NDJSON `body`); returns the HTTP status and the body,
    /// status 0 when no answer came within `seconds`.
    public static func curl(_ method: String, _ url: String, token: String?, body: String? = nil,
                            seconds: Int = 10) throws -> (status: Int, body: String) {
        var arguments = ["-sS", "-m", String(seconds), "-X", method, "-w", "\n%{http_code}", url]
        if let token { arguments += ["-H", "Authorization: Bearer \(token)"] }
        if body != nil { arguments += ["-H", "Content-Type: application/x-ndjson", "--data-binary", "@-"] }
        let result = try FerryProcess.run(executable: "/usr/bin/curl", arguments, input: body)
        let lines = result.standardOutput.split(separator: "\n", omittingEmptySubsequences: false)
        return (Int(lines.last ?? "") ?? -1, lines.dropLast().joined(separator: "\n"))
    }

    /// Runs any program (`openssl`, `curl`, `systemd-analyze` …) the same way.
    /// `environment` is added to this process's.
    public static func run(executable: String, _ arguments: [String], input: String? = nil, in directory: String? = nil,
                           environment: [String: String] = [:],
                           timeout: TimeInterval = BoundedWaiting.processTimeout,
                           started: (Process) -> Void = { _ in }) throws -> Result {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        if !environment.isEmpty { process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 } }
        if let directory { process.currentDirectoryURL = URL(fileURLWithPath: directory) }
        let output = Pipe()
        let error = Pipe()
        let stdin = Pipe()
        process.standardOutput = output
        process.standardError = error
        process.standardInput = stdin
        try process.run()
        started(process)
        // Feed the input and read both pipes on threads of their own, so a child that fills one
        // pipe, or reads no input, cannot block the test while it waits on the other.
        PipeWriter.write(input.map { Data($0.utf8) }, to: stdin.fileHandleForWriting)
        let outputReader = PipeReader(output.fileHandleForReading)
        let errorReader = PipeReader(error.fileHandleForReading)
        let command = ([executable] + arguments).joined(separator: " ")
        guard BoundedWaiting.waitForExit(process, timeout: timeout) else {
            BoundedWaiting.kill(process)
            throw TimedOut(command: command, seconds: timeout,
                           standardError: String(decoding: errorReader.wait(timeout: 5) ?? Data(), as: UTF8.self))
        }
        // The pipes close when the child ends, unless a process it started still holds them.
        guard let outputData = outputReader.wait(timeout: 30), let errorData = errorReader.wait(timeout: 30) else {
            throw TimedOut(command: command, seconds: timeout,
                           standardError: "(it ended, but its output stayed open: a process it started still holds it)")
        }
        // Read to their end: closed here, not whenever Foundation lets go of the process (a suite
        // running hundreds of commands held 1,500 pipe descriptors, and Process.run crashed past 1,024).
        try? output.fileHandleForReading.close()
        try? error.fileHandleForReading.close()
        return Result(status: process.terminationStatus,
                      standardOutput: String(decoding: outputData, as: UTF8.self),
                      standardError: String(decoding: errorData, as: UTF8.self))
    }

    /// A program that did not end in time (it was killed).
    public struct TimedOut: Error, CustomStringConvertible {
        /// The command line.
        public let command: String
        /// The time it had.
        public let seconds: TimeInterval
        /// What it wrote to standard error before it was killed.
        public let standardError: String
        public var description: String {
            "`\(command)` did not end within \(Int(seconds)) s and was killed; its standard error: \(standardError.suffix(4000))"
        }
    }
}
