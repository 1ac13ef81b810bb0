import Foundation
import FerryModel

/// A failure the command line reports as one line on standard error, then exits 1.
struct CLIError: FerryError {
    /// The kinds of failure a command reports.
    enum Code: String, Hashable, Sendable {
        /// An argument's value is not one the command can take: a malformed UUID, key, time or URL;
        /// a peer or key the configuration or the store does not have. (It exits 1, as every
        /// `CLIError`; 64 is for what the argument parser itself refuses.)
        case argument
        /// A file the command reads cannot be read or does not hold what it should (standard input,
        /// `--acknowledged`, `--token-file`, `--ca-file`).
        case input
        /// The configuration file, or a file it names (tokens, CA certificate), cannot be used.
        case configuration
        /// The model file cannot be read.
        case model
        /// The store cannot be opened, read or written.
        case store
        /// A file the command would create is there already.
        case exists
        /// Doing what was asked now could lose something; the message says what to do first.
        case unsafe
        /// The store's signing key cannot be read, written or put in place.
        case signingKey
        /// A snapshot cannot be written, copied, downloaded or start a store.
        case snapshot
        /// The daemon (or its parts opened in this process) failed, or did not answer as it should.
        case daemon
        /// The relay failed.
        case relay
    }

    /// The kind of failure.
    let code: Code
    /// The line printed.
    let description: String
    /// The error met, when there was one.
    let cause: (any Error)?

    /// A failure of kind `code` saying `description`; `cause` is the error met, when there was one.
    init(_ code: Code, _ description: String, cause: (any Error)? = nil) {
        self.code = code
        self.description = description
        self.cause = cause
    }

    /// `error` as a failure of kind `code`, saying what it says; a ``CLIError`` stays as it is.
    init(_ code: Code, _ error: any Error) {
        if let failure = error as? CLIError {
            self.init(failure.code, failure.description, cause: failure.cause)
        } else {
            self.init(code, "\(error)", cause: error)
        }
    }
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
                throw CLIError(.input, "cannot read \(path): no such file, or no permission")
            }
            data = contents
        }
        guard let text = String(data: data, encoding: .utf8) else {
            throw CLIError(.input, "\(path == "-" ? "standard input" : path) is not UTF-8 text")
        }
        return text
    }
}
