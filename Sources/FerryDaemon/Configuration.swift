import Foundation
import Yams
import FerryStore
import FerrySigning
import FerrySync

/// The daemon's configuration, read from a YAML file (see `config/ferry.yaml`).
///
/// Relative paths are resolved against the file's folder. Every scalar key can
/// be overridden from the environment: `FERRY_` and the key path in capitals
/// with `_` between the parts, e.g. `FERRY_SERVER_PORT=7401` for `server.port`
/// or `FERRY_SYNC_PULL_INTERVAL=10` for `sync.pull_interval`.
public struct Configuration: Sendable, Equatable {
    /// The local store.
    public struct Store: Sendable, Equatable {
        /// The SQLite file (created when missing).
        public var path: String
        /// The model: a `.xcdatamodeld` folder, a `.xcdatamodel` folder or its `contents` file.
        public var model: String
        /// The store's Ed25519 signing key file (`store.signing_key`; default: the store's path
        /// and `.key`), made at start when missing, refused when others may read it.
        public var signingKey: String

        public init(path: String, model: String, signingKey: String? = nil) {
            self.path = path
            self.model = model
            self.signingKey = signingKey ?? path + ".key"
        }
    }

    /// The HTTP server peers and `ferry sync-now` talk to.
    public struct Server: Sendable, Equatable {
        /// The address to listen on (default `127.0.0.1`).
        public var host: String
        /// The port (default 7400).
        public var port: Int
        /// The file of accepted bearer tokens: one per line, `peer TOKEN` or
        /// `admin TOKEN` (a line with only a token is a peer token); `#` starts a comment.
        public var tokensFile: String
        /// The largest request body accepted, in bytes (default 64 MiB); larger ones get 413.
        public var maxBodyBytes: Int
        /// Most push bodies held at once (default 4); a push past them gets 503 with `Retry-After`.
        public var maxConcurrentBodies: Int = 4
        /// Most connections open at once (default 256); past them new connections wait in the
        /// kernel's queue (and are refused when it is full) instead of using up file descriptors.
        public var maxConnections: Int = 256
        /// HTTPS: the server's certificate chain and private key (PEM files); plain HTTP when nil.
        public var tls: TLS?
    }

    /// The server's certificate and key.
    public struct TLS: Sendable, Equatable {
        /// The certificate chain, PEM, the server's own certificate first.
        public var certificate: String
        /// The private key, PEM.
        public var key: String
        /// The CA that signed ``certificate``, PEM, for `ferry sync-now` and `ferry status` on this
        /// machine to verify the daemon with (in place of the system trust store); nil for the system store.
        public var caFile: String? = nil
    }

    /// A store this one replicates with.
    public struct Peer: Sendable, Equatable {
        /// A short name for logs, `ferry status` and `sync-now --peer`.
        public var name: String
        /// The peer's base URL, e.g. `http://10.0.0.2:7400`: the first of ``urls``.
        public var url: URL { urls[0] }
        /// Every URL the peer is reached at (`url`, or the `urls` list: relays sharing one database,
        /// docs/FLEET.md), tried in order: a URL that cannot be reached hands over to the next.
        public var urls: [URL]
        /// The file holding the token this store presents to the peer.
        public var tokenFile: String
        /// A PEM file of the CA(s) the peer's HTTPS certificate must chain up to, in place of
        /// the system trust store (for peers with certificates from a private CA); nil for the system store.
        public var caFile: String? = nil
        /// For a relay: seconds between uploads of this store's snapshot to it (what new stores joining
        /// through the relay start from; docs/FLEET.md); nil: never.
        public var snapshotUploadInterval: TimeInterval? = nil
    }

    /// How often and how much to sync.
    public struct Sync: Sendable, Equatable {
        /// Seconds between pulls from each peer (default 30), with ±10 % jitter.
        public var pullInterval: Double
        /// Change sets per request (default 500).
        public var batchSize: Int
        /// Seconds a request may take before it is abandoned and retried (default 30).
        public var requestTimeout: Double
        /// The longest wait between retries of a failing peer, and between attempts to open
        /// a store that cannot be opened yet, in seconds (default 60): retries back off
        /// 1 s, 2 s, 4 s … up to this, each ×0.5–1.5.
        public var maxBackoff: Double = 60
        /// Most origins the store takes change sets from (default 10,000); a change set of a new
        /// origin past them is held until bogus origins are removed (`ferry origins remove`).
        public var maxOrigins: Int = 10_000
        /// Whether the daemon starts its store again from a peer's snapshot when the peer answers
        /// 410 (the history this store needs was purged there, or it is past the peer's tombstone
        /// horizon): default true. Change sets no peer has yet are carried over (docs/SYNC.md, "Snapshots").
        public var bootstrap: Bool = true
    }

    /// How long history is kept (docs/SYNC.md, "Bounded history").
    public struct History: Sendable, Equatable {
        /// Seconds between purges (default 3600); 0 turns automatic purging off.
        public var purgeInterval: Double = 3600
        /// Seconds a change set every peer has acknowledged is kept before it is purged (default 7 days).
        public var retention: Double = 7 * 86400
        /// Seconds deletes are remembered (their tombstones) before they are forgotten (default 90 days);
        /// a store that comes back later than this starts again from a snapshot.
        public var tombstoneHorizon: Double = 90 * 86400
    }

    public var store: Store
    public var server: Server
    public var peers: [Peer]
    public var sync: Sync
    public var history = History()
    /// Which origins' change sets are taken (`trust`; docs/SYNC.md, "Signed change sets"): by
    /// default, every origin must sign, and configured peers' keys are trusted on first use.
    public var trust = OriginTrust.Policy()
    /// The file the configuration was read from.
    public var file: String
}

/// Why a configuration cannot be used; the message names the file and key.
public struct ConfigurationError: Error, CustomStringConvertible, Equatable {
    /// What is wrong, for a person to fix.
    public let description: String
}

extension Configuration {
    /// Every scalar key, by path; the environment can override these.
    static let scalarKeys = [
        "store.path", "store.model", "store.signing_key",
        "server.host", "server.port", "server.tokens_file", "server.max_body_bytes", "server.max_concurrent_bodies", "server.max_connections",
        "server.tls.certificate", "server.tls.key",
        "server.tls.ca_file", "sync.pull_interval", "sync.batch_size", "sync.request_timeout", "sync.max_backoff", "sync.max_origins",
        "sync.bootstrap", "history.purge_interval", "history.retention", "history.tombstone_horizon",
        "trust.unknown_origins", "trust.first_use",
    ]
    static let sectionKeys: [String: Set<String>] = [
        "": ["store", "server", "peers", "sync", "history", "trust"],
        "store": ["path", "model", "signing_key"],
        "server": ["host", "port", "tokens_file", "max_body_bytes", "max_concurrent_bodies", "max_connections", "tls"],
        "server.tls": ["certificate", "key", "ca_file"],
        "sync": ["pull_interval", "batch_size", "request_timeout", "max_backoff", "max_origins", "bootstrap"],
        "peer": ["name", "url", "urls", "token_file", "ca_file", "snapshot_upload_interval"],
        "history": ["purge_interval", "retention", "tombstone_horizon"],
        "trust": ["unknown_origins", "first_use", "keys", "revoked"],
        "trust.keys": ["origin", "key", "from"],
        "trust.revoked": ["origin", "key", "after"],
    ]

    /// Reads and checks the configuration at `path`, applying `environment` overrides.
    public static func load(path: String, environment: [String: String] = ProcessInfo.processInfo.environment) throws(ConfigurationError) -> Configuration {
        let text: String
        do {
            text = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw ConfigurationError(description: "\(path): cannot read the configuration file (\(error.localizedDescription))")
        }
        let folder = URL(fileURLWithPath: path).deletingLastPathComponent().path
        return try parse(text, file: path, folder: folder, environment: environment)
    }

    /// The file as written: every scalar as its text, so the environment can
    /// override it and the checks below can say exactly what is wrong.
    struct Document: Decodable {
        struct Section: Decodable {
            var values: [String: String] = [:]
            init(from decoder: Decoder) throws {
                let container = try decoder.singleValueContainer()
                values = try container.decode([String: String].self)
            }
            init() {}
        }
        /// The server section: scalars, and the `tls` mapping.
        struct ServerSection: Decodable {
            var values: [String: String] = [:]
            var tls: [String: String]?
            struct Key: CodingKey {
                var stringValue: String
                var intValue: Int? { nil }
                init(stringValue: String) { self.stringValue = stringValue }
                init?(intValue: Int) { nil }
            }
            init(from decoder: Decoder) throws {
                let container = try decoder.container(keyedBy: Key.self)
                for key in container.allKeys {
                    if key.stringValue == "tls" {
                        tls = try container.decode([String: String].self, forKey: key)
                    } else {
                        values[key.stringValue] = try container.decode(String.self, forKey: key)
                    }
                }
            }
        }
        struct PeerEntry: Decodable {
            var name: String?
            var url: String?
            var urls: [String]?
            var tokenFile: String?
            var caFile: String?
            var snapshotUploadInterval: String?
            enum CodingKeys: String, CodingKey {
                case name, url, urls, tokenFile = "token_file", caFile = "ca_file", snapshotUploadInterval = "snapshot_upload_interval"
            }
        }
        /// The trust section: scalars, and the `keys` and `revoked` lists.
        struct TrustSection: Decodable {
            var values: [String: String] = [:]
            var keys: [[String: String]] = []
            var revoked: [[String: String]] = []
            init(from decoder: Decoder) throws {
                let container = try decoder.container(keyedBy: ServerSection.Key.self)
                for key in container.allKeys {
                    switch key.stringValue {
                    case "keys": keys = try container.decode([[String: String]].self, forKey: key)
                    case "revoked": revoked = try container.decode([[String: String]].self, forKey: key)
                    default: values[key.stringValue] = try container.decode(String.self, forKey: key)
                    }
                }
            }
        }
        var store: Section?
        var server: ServerSection?
        var sync: Section?
        var history: Section?
        var trust: TrustSection?
        var peers: [PeerEntry]?
    }

    /// Parses configuration text; relative paths are resolved against `folder`.
    static func parse(_ text: String, file: String, folder: String, environment: [String: String]) throws(ConfigurationError) -> Configuration {
        func fail(_ message: String) -> ConfigurationError { ConfigurationError(description: "\(file): \(message)") }
        let document: Document
        do {
            guard let node = try Yams.compose(yaml: text) else {
                throw fail("the file is empty; it needs at least store.path, store.model and server.tokens_file")
            }
            try checkKeys(node, fail: fail)
            document = try YAMLDecoder().decode(Document.self, from: node)
        } catch let error as ConfigurationError {
            throw error
        } catch let error as DecodingError {
            throw fail(describe(error))
        } catch {
            throw fail("not valid YAML: \(error)")
        }

        /// The value of a scalar key: the environment's override, else the file's.
        func scalar(_ path: String) -> String? {
            let variable = "FERRY_" + path.replacingOccurrences(of: ".", with: "_").uppercased()
            if let override = environment[variable] { return override }
            let parts = path.split(separator: ".").map(String.init)
            switch (parts.first, parts.count) {
            case ("store", 2): return document.store?.values[parts[1]]
            case ("server", 2): return document.server?.values[parts[1]]
            case ("server", 3): return document.server?.tls?[parts[2]]
            case ("history", 2): return document.history?.values[parts[1]]
            case ("trust", 2): return document.trust?.values[parts[1]]
            default: return document.sync?.values[parts[1]]
            }
        }
        func string(_ path: String, default value: String? = nil) throws(ConfigurationError) -> String {
            guard let found = scalar(path) ?? value else { throw fail("missing key \(path)") }
            guard !found.isEmpty else { throw fail("\(path) is empty") }
            return found
        }
        func number(_ path: String, default value: Double, range: ClosedRange<Double>) throws(ConfigurationError) -> Double {
            guard let text = scalar(path) else { return value }
            guard let number = Double(text.trimmingCharacters(in: .whitespaces)), range.contains(number) else {
                throw fail("\(path) must be a number of seconds from \(range.lowerBound) to \(range.upperBound); found '\(text)'")
            }
            return number
        }
        func integer(_ path: String, default value: Int, range: ClosedRange<Int>) throws(ConfigurationError) -> Int {
            guard let text = scalar(path) else { return value }
            guard let number = Int(text.trimmingCharacters(in: .whitespaces)), range.contains(number) else {
                throw fail("\(path) must be a whole number from \(range.lowerBound) to \(range.upperBound); found '\(text)'")
            }
            return number
        }
        func boolean(_ path: String, default value: Bool) throws(ConfigurationError) -> Bool {
            guard let text = scalar(path) else { return value }
            switch text.trimmingCharacters(in: .whitespaces).lowercased() {
            case "true", "yes", "on": return true
            case "false", "no", "off": return false
            default: throw fail("\(path) must be true or false; found '\(text)'")
            }
        }
        func resolve(_ path: String) -> String {
            path.hasPrefix("/") ? path : URL(fileURLWithPath: folder).appendingPathComponent(path).standardizedFileURL.path
        }

        var peers: [Peer] = []
        for (index, entry) in (document.peers ?? []).enumerated() {
            let place = "peers[\(index)]"
            guard let name = entry.name, !name.isEmpty else { throw fail("missing key \(place).name") }
            let urlTexts: [String]
            switch (entry.url, entry.urls) {
            case (let one?, nil): urlTexts = [one]
            case (nil, let several?):
                guard !several.isEmpty else { throw fail("\(place).urls is empty; list the peer's URLs (relays sharing one database), or give one url") }
                urlTexts = several
            case (nil, nil): throw fail("missing key \(place).url (or urls, a list of relays sharing one database)")
            case (_?, _?): throw fail("\(place) has both url and urls; give one url, or list every URL under urls")
            }
            var urls: [URL] = []
            for (number, urlText) in urlTexts.enumerated() {
                let key = entry.urls == nil ? "\(place).url" : "\(place).urls[\(number)]"
                guard let url = URL(string: urlText), url.scheme == "http" || url.scheme == "https", url.host != nil else {
                    throw fail("\(key) must be an http:// or https:// URL with a host; found '\(urlText)'")
                }
                guard !urls.contains(url) else { throw fail("\(key) lists '\(urlText)' twice") }
                urls.append(url)
            }
            guard let tokenFile = entry.tokenFile, !tokenFile.isEmpty else { throw fail("missing key \(place).token_file") }
            var caFile: String?
            if let file = entry.caFile {
                guard !file.isEmpty else {
                    throw fail("\(place).ca_file is empty; name the peer's CA certificate file, or remove the key to use the system trust store")
                }
                if let plain = urls.first(where: { $0.scheme != "https" }) {
                    throw fail("\(place).ca_file is only for https:// peers; \(place) is reached at '\(plain.absoluteString)'")
                }
                caFile = resolve(file)
            }
            guard !peers.contains(where: { $0.name == name }) else { throw fail("two peers are named '\(name)'; names must differ") }
            var snapshotUploadInterval: TimeInterval?
            if let text = entry.snapshotUploadInterval {
                guard let seconds = TimeInterval(text), seconds > 0, seconds.isFinite else {
                    throw fail("\(place).snapshot_upload_interval must be a number of seconds > 0; found '\(text)'")
                }
                snapshotUploadInterval = seconds
            }
            peers.append(Peer(name: name, urls: urls, tokenFile: resolve(tokenFile), caFile: caFile, snapshotUploadInterval: snapshotUploadInterval))
        }

        var tls: TLS?
        switch (scalar("server.tls.certificate"), scalar("server.tls.key")) {
        case (nil, nil): tls = nil
        case (let certificate?, let key?): tls = TLS(certificate: resolve(certificate), key: resolve(key), caFile: scalar("server.tls.ca_file").map(resolve))
        case (nil, _): throw fail("missing key server.tls.certificate (server.tls needs both certificate and key)")
        case (_, nil): throw fail("missing key server.tls.key (server.tls needs both certificate and key)")
        }
        if let caFile = scalar("server.tls.ca_file") {
            guard tls != nil else { throw fail("server.tls.ca_file needs server.tls.certificate and server.tls.key (it is the CA of that certificate)") }
            guard !caFile.isEmpty else {
                throw fail("server.tls.ca_file is empty; name the CA certificate file, or remove the key to use the system trust store")
            }
        }

        let history = History(purgeInterval: try number("history.purge_interval", default: 3600, range: 0...(365 * 86400)),
                              retention: try number("history.retention", default: 7 * 86400, range: 0...(3650 * 86400)),
                              tombstoneHorizon: try number("history.tombstone_horizon", default: 90 * 86400, range: 0...(3650 * 86400)))
        guard history.tombstoneHorizon >= history.retention else {
            throw fail("history.tombstone_horizon (\(history.tombstoneHorizon) s) must be at least history.retention (\(history.retention) s): "
                       + "a delete must be remembered as long as the change set that made it is kept")
        }
        let trust = try trustPolicy(document.trust, scalar: scalar, fail: fail)
        return Configuration(
            store: Store(path: resolve(try string("store.path")), model: resolve(try string("store.model")),
                         signingKey: scalar("store.signing_key").map(resolve)),
            server: Server(host: try string("server.host", default: "127.0.0.1"),
                           port: try integer("server.port", default: 7400, range: 0...65535),
                           tokensFile: resolve(try string("server.tokens_file")),
                           maxBodyBytes: try integer("server.max_body_bytes", default: 64 << 20, range: 1024...(1 << 32)),
                           maxConcurrentBodies: try integer("server.max_concurrent_bodies", default: 4, range: 1...1024),
                           maxConnections: try integer("server.max_connections", default: 256, range: 2...100_000),
                           tls: tls),
            peers: peers,
            sync: Sync(pullInterval: try number("sync.pull_interval", default: 30, range: 0.05...86400),
                       batchSize: try integer("sync.batch_size", default: 500, range: 1...100_000),
                       requestTimeout: try number("sync.request_timeout", default: 30, range: 0.1...3600),
                       maxBackoff: try number("sync.max_backoff", default: 60, range: 1...86400),
                       maxOrigins: try integer("sync.max_origins", default: 10_000, range: 2...10_000_000),
                       bootstrap: try boolean("sync.bootstrap", default: true)),
            history: history,
            trust: trust,
            file: file
        )
    }

    /// The `trust` section as a policy: each key and revocation checked (a store UUID, a 32-byte
    /// Ed25519 public key in base64, a first sequence number ≥ 1, an ISO 8601 time).
    private static func trustPolicy(_ section: Document.TrustSection?, scalar: (String) -> String?,
                                    fail: (String) -> ConfigurationError) throws(ConfigurationError) -> OriginTrust.Policy {
        var policy = OriginTrust.Policy()
        if let text = scalar("trust.unknown_origins") {
            guard let value = OriginTrust.Policy.UnknownOrigins(rawValue: text.trimmingCharacters(in: .whitespaces)) else {
                throw fail("trust.unknown_origins must be refuse or accept; found '\(text)'")
            }
            policy.unknownOrigins = value
        }
        if let text = scalar("trust.first_use") {
            switch text.trimmingCharacters(in: .whitespaces) {
            case "peers": policy.trustsPeersOnFirstUse = true
            case "off": policy.trustsPeersOnFirstUse = false
            default: throw fail("trust.first_use must be peers or off; found '\(text)'")
            }
        }
        func origin(_ entry: [String: String], _ place: String) throws(ConfigurationError) -> UUID {
            guard let text = entry["origin"] else { throw fail("missing key \(place).origin (the store's UUID, from its `ferry state`)") }
            guard let origin = UUID(uuidString: text) else { throw fail("\(place).origin must be a store UUID; found '\(text)'") }
            return origin
        }
        func key(_ entry: [String: String], _ place: String) throws(ConfigurationError) -> String {
            guard let text = entry["key"] else { throw fail("missing key \(place).key (the store's public key, from its `ferry state`)") }
            guard VerifyingKey(base64: text) != nil else {
                throw fail("\(place).key must be an Ed25519 public key in base64 (44 characters, as `ferry state` shows it); found '\(text)'")
            }
            return text
        }
        for (index, entry) in (section?.keys ?? []).enumerated() {
            let place = "trust.keys[\(index)]"
            var first: Int64 = 1
            if let text = entry["from"] {
                guard let number = Int64(text), number >= 1 else { throw fail("\(place).from must be a sequence number ≥ 1; found '\(text)'") }
                first = number
            }
            policy.pinned.append(OriginKey(origin: try origin(entry, place), publicKey: try key(entry, place), firstSequence: first, source: .pinned))
        }
        for (index, entry) in (section?.revoked ?? []).enumerated() {
            let place = "trust.revoked[\(index)]"
            guard let text = entry["after"] else { throw fail("missing key \(place).after (an ISO 8601 time such as 2026-11-24T12:00:00Z)") }
            guard let date = try? Date(text, strategy: .iso8601) else {
                throw fail("\(place).after must be an ISO 8601 time such as 2026-11-24T12:00:00Z; found '\(text)'")
            }
            policy.revocations.append(OriginTrust.Revocation(origin: try origin(entry, place), publicKey: try key(entry, place),
                                                             after: HybridTimestamp.wall(date)))
        }
        return policy
    }

    /// Refuses keys the daemon does not know (a typo would otherwise be ignored silently).
    private static func checkKeys(_ node: Node, fail: (String) -> ConfigurationError) throws(ConfigurationError) {
        guard let root = node.mapping else { throw fail("the top level must be a mapping of keys (store, server, peers, sync)") }
        try checkKeys(root, allowed: sectionKeys[""] ?? [], place: "", fail: fail)
        for (key, value) in root {
            guard let name = key.string else { continue }
            if name == "peers" {
                guard let list = value.sequence else { throw fail("'peers' must be a list of {name, url, token_file}") }
                for (index, entry) in list.enumerated() {
                    guard let mapping = entry.mapping else { throw fail("peers[\(index)] must be a mapping with name, url and token_file") }
                    try checkKeys(mapping, allowed: sectionKeys["peer"] ?? [], place: "peers[\(index)].", fail: fail)
                }
            } else if name == "trust", let mapping = value.mapping {
                try checkKeys(mapping, allowed: sectionKeys["trust"] ?? [], place: "trust.", fail: fail)
                for (child, childValue) in mapping where childValue.scalar == nil {
                    let childName = child.string ?? "?"
                    guard let allowed = sectionKeys["trust.\(childName)"], let list = childValue.sequence else {
                        throw fail("trust.\(childName) must be a single value")
                    }
                    for (index, entry) in list.enumerated() {
                        guard let entryMapping = entry.mapping else {
                            throw fail("trust.\(childName)[\(index)] must be a mapping with \(allowed.sorted().joined(separator: ", "))")
                        }
                        try checkKeys(entryMapping, allowed: allowed, place: "trust.\(childName)[\(index)].", fail: fail)
                    }
                }
            } else {
                guard let mapping = value.mapping else { throw fail("'\(name)' must be a mapping of keys") }
                try checkKeys(mapping, allowed: sectionKeys[name] ?? [], place: name + ".", fail: fail)
                for (child, childValue) in mapping where childValue.scalar == nil {
                    let childName = child.string ?? "?"
                    if let nested = sectionKeys["\(name).\(childName)"], let childMapping = childValue.mapping {
                        try checkKeys(childMapping, allowed: nested, place: "\(name).\(childName).", fail: fail)
                        for (leaf, leafValue) in childMapping where leafValue.scalar == nil {
                            throw fail("\(name).\(childName).\(leaf.string ?? "?") must be a single value")
                        }
                        continue
                    }
                    throw fail("\(name).\(childName) must be a single value, not a list or mapping")
                }
            }
        }
    }

    private static func checkKeys(_ mapping: Node.Mapping, allowed: Set<String>, place: String,
                                  fail: (String) -> ConfigurationError) throws(ConfigurationError) {
        for key in mapping.keys.compactMap(\.string).sorted() where !allowed.contains(key) {
            throw fail("unknown key \(place)\(key); known keys here: \(allowed.sorted().joined(separator: ", "))")
        }
    }

    private static func describe(_ error: DecodingError) -> String {
        switch error {
        case .typeMismatch(_, let context), .valueNotFound(_, let context), .keyNotFound(_, let context), .dataCorrupted(let context):
            let path = context.codingPath.map { $0.intValue.map { "[\($0)]" } ?? ".\($0.stringValue)" }.joined().drop { $0 == "." }
            return "\(path.isEmpty ? "the file" : String(path)): \(context.debugDescription)"
        @unknown default:
            return "\(error)"
        }
    }
}
