import Foundation
import FerryServer
import FerryStore
import FerrySync

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
    /// - Throws: ``ConfigurationError`` naming the file, the key and what is wrong.
    public static func load(path: String) throws(ConfigurationError) -> RelayConfiguration {
        try read(ConfigurationFile(path: path, keys: keys, whenEmpty: needed))
    }

    /// The keys each place of the file takes (``ConfigurationFile/Keys``).
    static let keys: ConfigurationFile.Keys = [
        "": ["database", "server", "trust", "retention"],
        "database": ["host", "port", "user", "password_file", "name", "tls", "connections"],
        "server": ["host", "port", "tokens_file", "max_body_bytes", "max_change_set_bytes", "max_concurrent_bodies", "tls"],
        "server.tls": ["certificate", "key"],
        "trust": ["unknown_origins", "keys", "revoked"],
        "trust.keys[]": ["origin", "key", "from"],
        "trust.revoked[]": ["origin", "key", "after"],
        "retention": ["keep", "peer_expiry", "interval"],
    ]

    /// What an empty file lacks.
    private static let needed = "it needs database and server sections"

    /// Reads a configuration from YAML `text`, the content of the file at `path` (relative paths are taken from its folder).
    public static func parse(_ text: String, path: String = "relay.yaml") throws(ConfigurationError) -> RelayConfiguration {
        try read(ConfigurationFile(text: text, path: path, keys: keys, whenEmpty: needed))
    }

    private static func read(_ file: ConfigurationFile) throws(ConfigurationError) -> RelayConfiguration {
        let fail = file.fail
        guard file.has("database") else { throw fail("missing section 'database' (the PostgreSQL server the change sets live in)") }
        var database = Database()
        database.host = try file.string("database.host", default: database.host)
        database.port = try file.integer("database.port", default: database.port, range: 1...65535)
        database.user = try file.string("database.user", default: database.user)
        database.name = try file.string("database.name", default: database.name)
        database.passwordFile = file.scalar("database.password_file").map(file.resolve)
        database.tls = try file.choice("database.tls", Database.TLSMode.self) ?? database.tls
        database.connections = try file.integer("database.connections", default: database.connections, range: 1...1000)

        guard file.has("server") else { throw fail("missing section 'server' (where peers reach the relay)") }
        var server = Server(tokensFile: file.resolve(try file.string("server.tokens_file")))
        server.host = try file.string("server.host", default: server.host)
        server.port = try file.integer("server.port", default: server.port, range: 0...65535)
        server.maxBodyBytes = try file.integer("server.max_body_bytes", default: server.maxBodyBytes, range: 1024...(1 << 30))
        if let largest = try file.integer("server.max_change_set_bytes", range: 1024...(1 << 31)) {
            guard largest >= server.maxBodyBytes else {
                throw fail("server.max_change_set_bytes (\(largest)) must be at least server.max_body_bytes (\(server.maxBodyBytes)): " +
                           "it is what one change set alone may be, past the usual request body")
            }
            server.maxChangeSetBytes = largest
        } else {
            server.maxChangeSetBytes = max(server.maxChangeSetBytes, server.maxBodyBytes)
        }
        server.maxConcurrentBodies = try file.integer("server.max_concurrent_bodies", default: server.maxConcurrentBodies, range: 1...1024)
        server.tls = try file.serverTLS().map { TLS(certificate: $0.certificate, key: $0.key) }

        var retention = Retention()
        let longest = 3650.0 * 86400
        retention.keep = try file.seconds("retention.keep", default: retention.keep, range: 0...longest)
        retention.peerExpiry = try file.seconds("retention.peer_expiry", default: retention.peerExpiry, range: 0...longest)
        retention.interval = try file.seconds("retention.interval", default: retention.interval, range: 0...longest)

        let trust = try file.trustPolicy(defaults: OriginTrust.Policy(unknownOrigins: .refuse, trustsPeersOnFirstUse: false))
        return RelayConfiguration(database: database, server: server, retention: retention, trust: trust)
    }
}

