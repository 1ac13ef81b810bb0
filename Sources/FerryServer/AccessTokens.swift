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
            if let token = entries.last?.0, token.utf8.count < 16 {
                throw AccessTokensError(description: "\(file):\(number + 1): the token is shorter than 16 characters; use a long random one (e.g. `openssl rand -hex 32`)")
            }
        }
        guard !entries.isEmpty else { throw AccessTokensError(description: "\(file): no tokens; add a line 'peer TOKEN' for each peer") }
        self.init(entries)
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
