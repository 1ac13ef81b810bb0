import Foundation
import Yams
import FerryStore
import FerrySync
import FerrySigning

/// What `ferry relay --config PATH` reads (YAML; `config/relay.yaml` is the commented example):
/// the PostgreSQL database the change sets live in, the HTTP server peers talk to, and which
/// origins' signatures the relay checks against. Relative paths are taken from the file's folder.
public struct RelayConfiguration: Sendable, Equatable {
    /// Where the change sets are kept. Every relay of a fleet names the same database.
    public struct Database: Sendable, Equatable {
        /// The PostgreSQL server's host name or address (default 127.0.0.1).
        public var host = "127.0.0.1"
        /// Its port (default 5432).
        public var port = 5432
        /// The role the relay logs in as (default `ferry`).
        public var user = "ferry"
        /// A file holding the role's password (one line); nil for none (trust or peer authentication).
        public var passwordFile: String?
        /// The database's name (default `ferry`).
        public var name = "ferry"
        /// How the connection is encrypted: `disable`, `prefer` (the default) or `require`.
        public var tls = TLSMode.prefer
        /// The most connections this relay holds open to the server (default 16; one more listens for new change sets).
        public var connections = 16

        /// How a relay's connection to PostgreSQL is encrypted.
        public enum TLSMode: String, Sendable, Equatable, CaseIterable {
            case disable, prefer, require
        }
    }

    /// The HTTP server peers reach.
    public struct Server: Sendable, Equatable {
        /// The address to listen on (default 0.0.0.0).
        public var host = "0.0.0.0"
        /// The port to listen on (default 7500; 0 takes a free one, printed at start).
        public var port = 7500
        /// The tokens file: the same form as a daemon's (`peer TOKEN`, `push TOKEN origins=…`, …).
        public var tokensFile: String
        /// The largest push body taken, unpacked (default 16 MiB).
        public var maxBodyBytes = 16 << 20
        /// The largest change set taken alone in a push, unpacked (default 256 MiB, at least
        /// `maxBodyBytes`): a push body past `maxBodyBytes` is taken when it holds one change set,
        /// one such body at a time (another meanwhile gets 503 with `Retry-After: 1`).
        public var maxChangeSetBytes = 256 << 20
        /// Push bodies held at once; past it, 503 with `Retry-After: 1` (default 8).
        public var maxConcurrentBodies = 8
        /// HTTPS: the certificate chain and private key (PEM); nil for plain HTTP.
        public var tls: TLS?
    }

    /// The relay's certificate and key: with them it speaks HTTPS (TLS 1.2 or later) and nothing else.
    public struct TLS: Sendable, Equatable {
        /// The certificate chain, PEM, the relay's own certificate first.
        public var certificate: String
        /// The private key, PEM.
        public var key: String

        public init(certificate: String, key: String) {
            self.certificate = certificate
            self.key = key
        }
    }

    /// How long change sets are kept (docs/FLEET.md, "Retention").
    public struct Retention: Sendable, Equatable {
        /// Seconds a change set is kept after every peer that pulled from the relay in the last
        /// ``peerExpiry`` seconds has it (default 7 days; `history.retention` on a daemon).
        public var keep: TimeInterval = 7 * 24 * 3600
        /// A peer that has not pulled for this long is no longer waited for (default 30 days).
        public var peerExpiry: TimeInterval = 30 * 24 * 3600
        /// Seconds between purges (default an hour; 0: never).
        public var interval: TimeInterval = 3600
    }

    public var database: Database
    public var server: Server
    public var retention = Retention()
    /// Which origins' change sets are taken: keys pinned here (and published to peers, which take
    /// them on first use), revoked keys, and whether origins with no key are taken.
    public var trust: OriginTrust.Policy

    /// Reads and checks the file at `path`.
    /// - Throws: ``RelayConfigurationError`` naming the file, the key and what is wrong.
    public static func load(path: String) throws(RelayConfigurationError) -> RelayConfiguration {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
            throw RelayConfigurationError(path: path, message: "cannot read the file")
        }
        return try parse(text, folder: URL(fileURLWithPath: path).deletingLastPathComponent().path, path: path)
    }

    static let sections: [String: Set<String>] = [
        "": ["database", "server", "trust", "retention"],
        "database": ["host", "port", "user", "password_file", "name", "tls", "connections"],
        "server": ["host", "port", "tokens_file", "max_body_bytes", "max_change_set_bytes", "max_concurrent_bodies", "tls"],
        "trust": ["unknown_origins", "keys", "revoked"],
        "retention": ["keep", "peer_expiry", "interval"],
    ]

    /// Reads a configuration from YAML `text`, resolving relative paths against `folder`.
    public static func parse(_ text: String, folder: String, path: String = "relay.yaml") throws(RelayConfigurationError) -> RelayConfiguration {
        func fail(_ message: String) -> RelayConfigurationError { RelayConfigurationError(path: path, message: message) }
        func resolve(_ file: String) -> String {
            file.hasPrefix("/") ? file : URL(fileURLWithPath: folder).appendingPathComponent(file).standardizedFileURL.path
        }
        let root: Node
        do {
            guard let node = try Yams.compose(yaml: text) else { throw fail("the file is empty; it needs database and server sections") }
            root = node
        } catch let error as RelayConfigurationError {
            throw error
        } catch {
            throw fail("not valid YAML: \(error)")
        }
        guard let top = root.mapping else { throw fail("the top level must be a mapping of keys (database, server, trust, retention)") }
        var sectionsSeen: [String: Node.Mapping] = [:]
        for (key, value) in top {
            guard let name = key.string, sections[""]?.contains(name) == true else {
                throw fail("unknown key '\(key.string ?? "?")'; the top level takes \(sections[""]!.sorted().joined(separator: ", "))")
            }
            guard let mapping = value.mapping else { throw fail("'\(name)' must be a mapping of keys") }
            for (inner, _) in mapping where !(sections[name]?.contains(inner.string ?? "") ?? false) {
                throw fail("unknown key '\(name).\(inner.string ?? "?")'; \(name) takes \(sections[name]!.sorted().joined(separator: ", "))")
            }
            sectionsSeen[name] = mapping
        }
        func scalar(_ section: String, _ key: String) -> String? { sectionsSeen[section]?[key]?.scalar?.string }
        func integer(_ section: String, _ key: String, _ range: ClosedRange<Int>) throws(RelayConfigurationError) -> Int? {
            guard let text = scalar(section, key) else { return nil }
            guard let value = Int(text), range.contains(value) else {
                throw fail("\(section).\(key) must be a whole number from \(range.lowerBound) to \(range.upperBound); found '\(text)'")
            }
            return value
        }
        func seconds(_ section: String, _ key: String) throws(RelayConfigurationError) -> TimeInterval? {
            guard let text = scalar(section, key) else { return nil }
            guard let value = Double(text), value >= 0, value.isFinite else {
                throw fail("\(section).\(key) must be a number of seconds ≥ 0; found '\(text)'")
            }
            return value
        }

        guard sectionsSeen["database"] != nil else { throw fail("missing section 'database' (the PostgreSQL server the change sets live in)") }
        var database = Database()
        if let host = scalar("database", "host") { database.host = host }
        database.port = try integer("database", "port", 1...65535) ?? database.port
        if let user = scalar("database", "user") { database.user = user }
        if let name = scalar("database", "name") { database.name = name }
        if let file = scalar("database", "password_file") { database.passwordFile = resolve(file) }
        if let mode = scalar("database", "tls") {
            guard let value = Database.TLSMode(rawValue: mode) else { throw fail("database.tls must be disable, prefer or require; found '\(mode)'") }
            database.tls = value
        }
        database.connections = try integer("database", "connections", 1...1000) ?? database.connections

        guard sectionsSeen["server"] != nil else { throw fail("missing section 'server' (where peers reach the relay)") }
        guard let tokensFile = scalar("server", "tokens_file"), !tokensFile.isEmpty else { throw fail("missing key server.tokens_file") }
        var server = Server(tokensFile: resolve(tokensFile))
        if let host = scalar("server", "host") { server.host = host }
        server.port = try integer("server", "port", 0...65535) ?? server.port
        server.maxBodyBytes = try integer("server", "max_body_bytes", 1024...(1 << 30)) ?? server.maxBodyBytes
        if let largest = try integer("server", "max_change_set_bytes", 1024...(1 << 31)) {
            guard largest >= server.maxBodyBytes else {
                throw fail("server.max_change_set_bytes (\(largest)) must be at least server.max_body_bytes (\(server.maxBodyBytes)): " +
                           "it is what one change set alone may be, past the usual request body")
            }
            server.maxChangeSetBytes = largest
        } else {
            server.maxChangeSetBytes = max(server.maxChangeSetBytes, server.maxBodyBytes)
        }
        server.maxConcurrentBodies = try integer("server", "max_concurrent_bodies", 1...1024) ?? server.maxConcurrentBodies
        if let node = sectionsSeen["server"]?["tls"] {
            guard let tls = node.mapping else { throw fail("server.tls must be a mapping with certificate and key") }
            for (key, _) in tls where !["certificate", "key"].contains(key.string ?? "") {
                throw fail("unknown key 'server.tls.\(key.string ?? "?")'; server.tls takes certificate, key")
            }
            guard let certificate = tls["certificate"]?.string, !certificate.isEmpty else { throw fail("missing key server.tls.certificate") }
            guard let key = tls["key"]?.string, !key.isEmpty else { throw fail("missing key server.tls.key") }
            server.tls = TLS(certificate: resolve(certificate), key: resolve(key))
        }

        var retention = Retention()
        retention.keep = try seconds("retention", "keep") ?? retention.keep
        retention.peerExpiry = try seconds("retention", "peer_expiry") ?? retention.peerExpiry
        retention.interval = try seconds("retention", "interval") ?? retention.interval

        var trust = OriginTrust.Policy(unknownOrigins: .refuse, trustsPeersOnFirstUse: false)
        if let text = scalar("trust", "unknown_origins") {
            guard let value = OriginTrust.Policy.UnknownOrigins(rawValue: text) else {
                throw fail("trust.unknown_origins must be refuse or accept; found '\(text)'")
            }
            trust.unknownOrigins = value
        }
        for list in ["keys", "revoked"] {
            if let node = sectionsSeen["trust"]?[list], node.sequence == nil {
                throw fail("trust.\(list) must be a list of mappings (origin, key, …)")
            }
        }
        for (index, entry) in (sectionsSeen["trust"]?["keys"]?.sequence ?? []).enumerated() {
            let place = "trust.keys[\(index)]"
            guard let mapping = entry.mapping else { throw fail("\(place) must be a mapping with origin, key and (optionally) from") }
            guard let originText = mapping["origin"]?.string, let origin = UUID(uuidString: originText) else {
                throw fail("\(place).origin must be a store UUID")
            }
            guard let key = mapping["key"]?.string, VerifyingKey(base64: key) != nil else {
                throw fail("\(place).key must be an Ed25519 public key in base64 (as `ferry state` prints it)")
            }
            var from: Int64 = 1
            if let text = mapping["from"]?.string {
                guard let value = Int64(text), value >= 1 else { throw fail("\(place).from must be a sequence number ≥ 1; found '\(text)'") }
                from = value
            }
            trust.pinned.append(OriginKey(origin: origin, publicKey: key, firstSequence: from, source: .pinned))
        }
        for (index, entry) in (sectionsSeen["trust"]?["revoked"]?.sequence ?? []).enumerated() {
            let place = "trust.revoked[\(index)]"
            guard let mapping = entry.mapping, let originText = mapping["origin"]?.string, let origin = UUID(uuidString: originText),
                  let key = mapping["key"]?.string, let afterText = mapping["after"]?.string else {
                throw fail("\(place) must be a mapping with origin, key and after (an ISO 8601 time)")
            }
            guard let after = ISO8601DateFormatter().date(from: afterText) else {
                throw fail("\(place).after must be an ISO 8601 time, e.g. 2026-11-25T10:00:00Z")
            }
            trust.revocations.append(OriginTrust.Revocation(origin: origin, publicKey: key, after: HybridTimestamp.wall(after)))
        }
        return RelayConfiguration(database: database, server: server, retention: retention, trust: trust)
    }
}

/// A relay configuration that cannot be used: the file, and what is wrong.
public struct RelayConfigurationError: Error, CustomStringConvertible, Sendable, Equatable {
    public let path: String
    public let message: String

    public var description: String { "\(path): \(message)" }
}
