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

    /// Runs `ferry arguments…`, feeding `input` on standard input, in `directory`.
    public static func run(_ arguments: [String], input: String? = nil, in directory: String? = nil) throws -> Result {
        try run(executable: executable().path, arguments, input: input, in: directory)
    }

    /// `curl` a request to a daemon (with a bearer `token`, an NDJSON `body`); returns the HTTP status and the body.
    public static func curl(_ method: String, _ url: String, token: String?, body: String? = nil) throws -> (status: Int, body: String) {
        var arguments = ["-sS", "-m", "10", "-X", method, "-w", "\n%{http_code}", url]
        if let token { arguments += ["-H", "Authorization: Bearer \(token)"] }
        if body != nil { arguments += ["-H", "Content-Type: application/x-ndjson", "--data-binary", "@-"] }
        let result = try FerryProcess.run(executable: "/usr/bin/curl", arguments, input: body)
        let lines = result.standardOutput.split(separator: "\n", omittingEmptySubsequences: false)
        return (Int(lines.last ?? "") ?? -1, lines.dropLast().joined(separator: "\n"))
    }

    /// Runs any program (`openssl`, `curl`, `systemd-analyze` …) the same way.
    public static func run(executable: String, _ arguments: [String], input: String? = nil, in directory: String? = nil) throws -> Result {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        if let directory { process.currentDirectoryURL = URL(fileURLWithPath: directory) }
        let output = Pipe()
        let error = Pipe()
        let stdin = Pipe()
        process.standardOutput = output
        process.standardError = error
        process.standardInput = stdin
        try process.run()
        if let input { stdin.fileHandleForWriting.write(Data(input.utf8)) }
        try stdin.fileHandleForWriting.close()
        // Read both pipes to the end at the same time (standard error on its own thread), so a child
        // that fills one pipe while we wait on the other cannot block.
        let errorReader = PipeReader(error.fileHandleForReading)
        let outputData = output.fileHandleForReading.readDataToEndOfFile()
        let errorData = errorReader.wait()
        process.waitUntilExit()
        return Result(status: process.terminationStatus,
                      standardOutput: String(decoding: outputData, as: UTF8.self),
                      standardError: String(decoding: errorData, as: UTF8.self))
    }
}

/// Reads a pipe to its end on a thread of its own.
private final class PipeReader: Sendable {
    private let data = Mutex(Data())
    private let done = DispatchSemaphore(value: 0)

    init(_ handle: FileHandle) {
        Thread { [self] in
            let all = handle.readDataToEndOfFile()
            data.withLock { $0 = all }
            done.signal()
        }.start()
    }

    /// Everything the pipe carried, once it is closed.
    func wait() -> Data {
        done.wait()
        return data.withLock { $0 }
    }
}
