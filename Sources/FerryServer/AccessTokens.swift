import Foundation

/// The bearer tokens a server accepts, each with what it may do.
///
/// The tokens file has one token per line, `peer TOKEN` or `admin TOKEN` (a
/// line with only a token is a peer token); blank lines and lines starting with
/// `#` are skipped. Tokens are compared in constant time, against every entry,
/// and never printed: errors name the file and line, not the token.
public struct AccessTokens: Sendable {
    /// What a token may do.
    public enum Role: String, Sendable, Comparable {
        /// Pull, push and read state and status: what a replicating peer needs.
        case peer
        /// Everything a peer may, and ask the daemon for a sync round (`POST /v1/sync`).
        case admin

        public static func < (lhs: Role, rhs: Role) -> Bool { lhs == .peer && rhs == .admin }
    }

    private let entries: [(token: [UInt8], role: Role)]

    /// Tokens given directly (tests, embedding).
    public init(_ entries: [(token: String, role: Role)]) {
        self.entries = entries.map { (Array($0.token.utf8), $0.role) }
    }

    /// Reads a tokens file.
    public init(file: String) throws(AccessTokensError) {
        let text: String
        do {
            text = try String(contentsOfFile: file, encoding: .utf8)
        } catch {
            throw AccessTokensError(description: "\(file): cannot read the tokens file (\(error.localizedDescription))")
        }
        var entries: [(String, Role)] = []
        var firstLine: [String: (line: Int, role: Role)] = [:]
        for (number, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = raw.trimmingCharacters(in: .whitespaces)
            guard !line.isEmpty, !line.hasPrefix("#") else { continue }
            let parts = line.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
            switch parts.count {
            case 1: entries.append((parts[0], .peer))
            case 2:
                guard let role = Role(rawValue: parts[0]) else {
                    throw AccessTokensError(description: "\(file):\(number + 1): the role must be 'peer' or 'admin'")
                }
                entries.append((parts[1], role))
            default:
                throw AccessTokensError(description: "\(file):\(number + 1): expected 'peer TOKEN', 'admin TOKEN' or a token alone")
            }
            guard let (token, role) = entries.last else { continue }
            guard token.unicodeScalars.allSatisfy({ Self.tokenCharacters.contains($0) }) else {
                throw AccessTokensError(description: "\(file):\(number + 1): not a token line: a token is letters, digits and - . _ ~ + / = only (is this a tokens file? expected 'peer TOKEN' or 'admin TOKEN' per line)")
            }
            if token.utf8.count < 16 {
                throw AccessTokensError(description: "\(file):\(number + 1): the token is shorter than 16 characters; use a long random one (e.g. `openssl rand -hex 32`)")
            }
            if let earlier = firstLine[token] {
                guard earlier.role == role else {
                    throw AccessTokensError(description: "\(file):\(number + 1): the same token is listed as \(earlier.role.rawValue) on line \(earlier.line) and as \(role.rawValue) here; give each role its own token")
                }
            } else {
                firstLine[token] = (number + 1, role)
            }
        }
        guard !entries.isEmpty else { throw AccessTokensError(description: "\(file): no tokens; add a line 'peer TOKEN' for each peer") }
        self.init(entries)
    }

    /// The characters a token may have: those of hex, base64 and base64url.
    static let tokenCharacters = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~+/=")

    /// What is unsafe about how the tokens file at `file` is kept: readable or writable by
    /// other users than its owner, or reached through a symbolic link (which can be
    /// pointed elsewhere). Empty when nothing is.
    public static func warnings(forFile file: String) -> [String] {
        var warnings: [String] = []
        var link = stat()
        if lstat(file, &link) == 0, (link.st_mode & S_IFMT) == S_IFLNK {
            warnings.append("\(file) is a symbolic link; point server.tokens_file at the file itself")
        }
        var info = stat()
        if stat(file, &info) == 0, info.st_mode & 0o077 != 0 {
            warnings.append("\(file) can be read or written by users other than its owner (mode \(String(info.st_mode & 0o777, radix: 8))); run chmod 600 \(file)")
        }
        return warnings
    }

    /// The role of a presented token, or nil when it matches none. Every entry
    /// is compared in full, so the time taken does not depend on the token.
    public func role(of presented: String) -> Role? {
        let bytes = Array(presented.utf8)
        var found: Role?
        for entry in entries where Self.constantTimeEqual(entry.token, bytes) {
            found = max(found ?? entry.role, entry.role)
        }
        return found
    }

    /// The first admin token (`ferry sync-now` presents it to the local daemon).
    public var adminToken: String? {
        entries.first { $0.role == .admin }.map { String(decoding: $0.token, as: UTF8.self) }
    }

    static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        var difference = UInt8(truncatingIfNeeded: a.count ^ b.count)
        if a.count != b.count { difference |= 1 }
        for index in 0..<max(a.count, b.count) {
            let left = index < a.count ? a[index] : 0
            let right = index < b.count ? b[index] : 0
            difference |= left ^ right
        }
        return difference == 0
    }
}

/// A tokens file that cannot be used.
public struct AccessTokensError: Error, CustomStringConvertible, Sendable {
    /// What is wrong (never the token itself).
    public let description: String
}
