import Foundation
import FerryModel

/// The bearer tokens a server accepts, each with what it may do.
///
/// The tokens file has one token per line: `ROLE TOKEN`, optionally followed by
/// `origins=UUID,UUID,…` (a line with only a token is a peer token); blank lines and
/// lines starting with `#` are skipped. Roles:
///
/// | role | may |
/// |---|---|
/// | `pull` | read state and status, pull change sets and snapshots (read-only replicas, backups) |
/// | `push` | read state and status, push change sets |
/// | `peer` | both: what a replicating peer needs |
/// | `admin` | everything, and ask the daemon for a sync round (`POST /v1/sync`); its status shows peer URLs and errors |
///
/// `origins=` limits a `push` or `peer` token to pushing change sets of those origins
/// (a store's own, and those it forwards); a push holding one of another origin is
/// refused whole (403), nothing applied. Tokens are compared in constant time, against
/// every entry, and never printed: errors name the file and line, not the token.
public struct AccessTokens: Sendable {
    /// What a token may do.
    public enum Role: String, Sendable, CaseIterable {
        /// Read state and status, pull change sets and snapshots.
        case pull
        /// Read state and status, push change sets.
        case push
        /// Pull and push: what a replicating peer needs.
        case peer
        /// Everything, and ask the daemon for a sync round (`POST /v1/sync`).
        case admin

        /// Whether the role allows `permission`.
        public func allows(_ permission: Permission) -> Bool {
            switch (self, permission) {
            case (.admin, _), (.peer, .pull), (.peer, .push), (.pull, .pull), (.push, .push): true
            default: false
            }
        }
    }

    /// What a route needs of a token (reading state and status needs only a known token).
    public enum Permission: String, Sendable {
        case pull
        case push
        case admin
    }

    /// What a presented token was granted.
    public struct Grant: Sendable, Equatable {
        public let role: Role
        /// The origins it may push change sets of; nil for any.
        public let pushOrigins: Set<UUID>?

        public init(role: Role, pushOrigins: Set<UUID>? = nil) {
            self.role = role
            self.pushOrigins = pushOrigins
        }
    }

    private let entries: [(token: [UInt8], grant: Grant)]

    /// Tokens given directly (tests, embedding).
    public init(_ entries: [(token: String, role: Role)]) {
        self.entries = entries.map { (Array($0.token.utf8), Grant(role: $0.role)) }
    }

    /// Tokens given directly, with what each may do.
    public init(grants: [(token: String, grant: Grant)]) {
        self.entries = grants.map { (Array($0.token.utf8), $0.grant) }
    }

    /// Reads a tokens file.
    public init(file: String) throws(AccessTokensError) {
        let text: String
        do {
            text = try String(contentsOfFile: file, encoding: .utf8)
        } catch {
            throw AccessTokensError(.unreadable, description: "\(file): cannot read the tokens file (\(error.localizedDescription))", cause: error)
        }
        var entries: [(String, Grant)] = []
        var firstLine: [String: (line: Int, grant: Grant)] = [:]
        let roles = Role.allCases.map { "'\($0.rawValue)'" }.joined(separator: ", ")
        for (number, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = raw.trimmingCharacters(in: .whitespaces)
            guard !line.isEmpty, !line.hasPrefix("#") else { continue }
            let place = "\(file):\(number + 1)"
            var parts = line.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
            var origins: Set<UUID>?
            if let last = parts.last, last.hasPrefix("origins="), parts.count == 3 {
                parts.removeLast()
                var parsed = Set<UUID>()
                for text in last.dropFirst("origins=".count).split(separator: ",", omittingEmptySubsequences: false) {
                    guard let origin = UUID(uuidString: String(text)) else {
                        throw AccessTokensError(.malformedLine, description: "\(place): origins= takes store identifiers (UUIDs) separated by commas; " +
                                                "'\(text.prefix(40))' is not one")
                    }
                    parsed.insert(origin)
                }
                origins = parsed
            }
            switch parts.count {
            case 1: entries.append((parts[0], Grant(role: .peer, pushOrigins: origins)))
            case 2:
                guard let role = Role(rawValue: parts[0]) else {
                    throw AccessTokensError(.unknownRole, description: "\(place): the role must be one of \(roles)")
                }
                if origins != nil, !role.allows(.push) || role == .admin {
                    throw AccessTokensError(.misplacedOrigins, description: "\(place): origins= limits what a token may push; " +
                                            "give it to a 'push' or 'peer' token, not to '\(role.rawValue)'")
                }
                entries.append((parts[1], Grant(role: role, pushOrigins: origins)))
            default:
                throw AccessTokensError(.malformedLine, description: "\(place): expected 'ROLE TOKEN' (ROLE one of \(roles)), " +
                                        "optionally followed by 'origins=UUID,UUID', or a token alone")
            }
            guard let (token, grant) = entries.last else { continue }
            guard token.unicodeScalars.allSatisfy({ Self.tokenCharacters.contains($0) }) else {
                throw AccessTokensError(.malformedLine, description: "\(place): not a token line: a token is letters, digits and - . _ ~ + / = only " +
                                        "(is this a tokens file? expected 'ROLE TOKEN' per line)")
            }
            if token.utf8.count < 16 {
                throw AccessTokensError(.shortToken, description: "\(place): the token is shorter than 16 characters; " +
                                        "use a long random one (e.g. `openssl rand -hex 32`)")
            }
            if let earlier = firstLine[token] {
                guard earlier.grant == grant else {
                    throw AccessTokensError(.conflictingRights, description: "\(place): the same token is listed on line \(earlier.line) with other rights; " +
                                            "give each set of rights its own token")
                }
            } else {
                firstLine[token] = (number + 1, grant)
            }
        }
        guard !entries.isEmpty else { throw AccessTokensError(.noTokens, description: "\(file): no tokens; add a line 'peer TOKEN' for each peer") }
        self.init(grants: entries)
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
            warnings.append("\(file) can be read or written by users other than its owner (mode \(String(info.st_mode & 0o777, radix: 8))); " +
                            "run chmod 600 \(file)")
        }
        return warnings
    }

    /// What a presented token was granted, or nil when it matches none. Every entry is
    /// compared in full, so the time taken does not depend on the token.
    public func grant(of presented: String) -> Grant? {
        let bytes = Array(presented.utf8)
        var found: Grant?
        for entry in entries where Self.constantTimeEqual(entry.token, bytes) {
            if found == nil { found = entry.grant }
        }
        return found
    }

    /// The role of a presented token, or nil when it matches none.
    public func role(of presented: String) -> Role? {
        grant(of: presented)?.role
    }

    /// The first admin token (`ferry sync-now` presents it to the local daemon).
    public var adminToken: String? {
        entries.first { $0.grant.role == .admin }.map { String(decoding: $0.token, as: UTF8.self) }
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
public struct AccessTokensError: FerryError, Sendable {
    /// The kinds of fault a tokens file has.
    public enum Code: String, Hashable, Sendable {
        /// The file cannot be read (missing, no permission).
        case unreadable
        /// A line is not `ROLE TOKEN [origins=UUID,…]` or a token alone (a token with other characters, origins that are not UUIDs).
        case malformedLine
        /// A line names a role there is not.
        case unknownRole
        /// `origins=` is given to a token whose role does not push (or to an admin token).
        case misplacedOrigins
        /// A token is shorter than 16 characters.
        case shortToken
        /// The same token is listed twice with different rights.
        case conflictingRights
        /// The file lists no token.
        case noTokens
    }

    /// The kind of fault.
    public let code: Code
    /// What is wrong (never the token itself).
    public let description: String
    /// The error met reading the file, when there was one.
    public let cause: (any Error)?

    /// A fault of kind `code` saying `description`; `cause` is the error met, when there was one.
    init(_ code: Code, description: String, cause: (any Error)? = nil) {
        self.code = code
        self.description = description
        self.cause = cause
    }
}
