import Foundation

/// A failure the command line reports as one line on standard error, then exits 1.
struct CLIError: Error, CustomStringConvertible {
    let description: String

    init(_ description: String) { self.description = description }
    init(_ error: any Error) { self.description = "\(error)" }
}

/// Standard error, for messages that must not mix with the command's output.
enum StandardError {
    static func write(_ text: String) {
        FileHandle.standardError.write(Data((text + "\n").utf8))
    }
}

/// Reads a file argument, or standard input for `-`.
enum InputFile {
    static func read(_ path: String) throws -> String {
        let data: Data
        if path == "-" {
            data = FileHandle.standardInput.readDataToEndOfFile()
        } else {
            guard let contents = FileManager.default.contents(atPath: path) else {
                throw CLIError("cannot read \(path): no such file, or no permission")
            }
            data = contents
        }
        guard let text = String(data: data, encoding: .utf8) else {
            throw CLIError("\(path == "-" ? "standard input" : path) is not UTF-8 text")
        }
        return text
    }
}
