import Foundation
import FerryServer
import FerryStore
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

extension Configuration {
    /// The keys each place of the file takes (``ConfigurationFile/Keys``).
    static let keys: ConfigurationFile.Keys = [
        "": ["store", "server", "peers", "sync", "history", "trust"],
        "store": ["path", "model", "signing_key"],
        "server": ["host", "port", "tokens_file", "max_body_bytes", "max_concurrent_bodies", "max_connections", "tls"],
        "server.tls": ["certificate", "key", "ca_file"],
        "sync": ["pull_interval", "batch_size", "request_timeout", "max_backoff", "max_origins", "bootstrap"],
        "peers[]": ["name", "url", "urls", "token_file", "ca_file", "snapshot_upload_interval"],
        "peers[].urls[]": [],
        "history": ["purge_interval", "retention", "tombstone_horizon"],
        "trust": ["unknown_origins", "first_use", "keys", "revoked"],
        "trust.keys[]": ["origin", "key", "from"],
        "trust.revoked[]": ["origin", "key", "after"],
    ]

    /// What an empty file lacks.
    private static let needed = "it needs at least store.path, store.model and server.tokens_file"

    /// Reads and checks the configuration at `path`, applying `environment` overrides.
    public static func load(path: String, environment: [String: String] = ProcessInfo.processInfo.environment) throws(ConfigurationError) -> Configuration {
        try read(ConfigurationFile(path: path, keys: keys, environment: environment, whenEmpty: needed))
    }

    /// Parses configuration text, the content of the file at `file`: relative paths are taken from its folder.
    static func parse(_ text: String, file: String, environment: [String: String]) throws(ConfigurationError) -> Configuration {
        try read(ConfigurationFile(text: text, path: file, keys: keys, environment: environment, whenEmpty: needed))
    }

    private static func read(_ file: ConfigurationFile) throws(ConfigurationError) -> Configuration {
        let fail = file.fail
        let resolve = file.resolve
        let scalar = file.scalar
        var peers: [Peer] = []
        for (index, entry) in file.entries("peers").enumerated() {
            let place = "peers[\(index)]"
            func text(_ key: String) -> String? { entry[key]?.scalar?.string }
            guard let name = text("name"), !name.isEmpty else { throw fail("missing key \(place).name") }
            var listed: [String]?
            if let node = entry["urls"] {
                guard let list = node.sequence else { throw fail("\(place).urls must be a list of URLs") }
                listed = list.compactMap { $0.scalar?.string }
            }
            let urlTexts: [String]
            switch (text("url"), listed) {
            case (let one?, nil): urlTexts = [one]
            case (nil, let several?):
                guard !several.isEmpty else { throw fail("\(place).urls is empty; list the peer's URLs (relays sharing one database), or give one url") }
                urlTexts = several
            case (nil, nil): throw fail("missing key \(place).url (or urls, a list of relays sharing one database)")
            case (_?, _?): throw fail("\(place) has both url and urls; give one url, or list every URL under urls")
            }
            var urls: [URL] = []
            for (number, urlText) in urlTexts.enumerated() {
                let key = listed == nil ? "\(place).url" : "\(place).urls[\(number)]"
                guard let url = URL(string: urlText), url.scheme == "http" || url.scheme == "https", url.host != nil else {
                    throw fail("\(key) must be an http:// or https:// URL with a host; found '\(urlText)'")
                }
                guard !urls.contains(url) else { throw fail("\(key) lists '\(urlText)' twice") }
                urls.append(url)
            }
            guard let tokenFile = text("token_file"), !tokenFile.isEmpty else { throw fail("missing key \(place).token_file") }
            var caFile: String?
            if let caText = text("ca_file") {
                guard !caText.isEmpty else {
                    throw fail("\(place).ca_file is empty; name the peer's CA certificate file, or remove the key to use the system trust store")
                }
                if let plain = urls.first(where: { $0.scheme != "https" }) {
                    throw fail("\(place).ca_file is only for https:// peers; \(place) is reached at '\(plain.absoluteString)'")
                }
                caFile = resolve(caText)
            }
            guard !peers.contains(where: { $0.name == name }) else { throw fail("two peers are named '\(name)'; names must differ") }
            var snapshotUploadInterval: TimeInterval?
            if let intervalText = text("snapshot_upload_interval") {
                guard let seconds = TimeInterval(intervalText), seconds > 0, seconds.isFinite else {
                    throw fail("\(place).snapshot_upload_interval must be a number of seconds > 0; found '\(intervalText)'")
                }
                snapshotUploadInterval = seconds
            }
            peers.append(Peer(name: name, urls: urls, tokenFile: resolve(tokenFile), caFile: caFile, snapshotUploadInterval: snapshotUploadInterval))
        }

        let tls = try file.serverTLS().map { TLS(certificate: $0.certificate, key: $0.key, caFile: scalar("server.tls.ca_file").map(resolve)) }
        if let caFile = scalar("server.tls.ca_file") {
            guard tls != nil else { throw fail("server.tls.ca_file needs server.tls.certificate and server.tls.key (it is the CA of that certificate)") }
            guard !caFile.isEmpty else {
                throw fail("server.tls.ca_file is empty; name the CA certificate file, or remove the key to use the system trust store")
            }
        }

        let history = History(purgeInterval: try file.seconds("history.purge_interval", default: 3600, range: 0...(365 * 86400)),
                              retention: try file.seconds("history.retention", default: 7 * 86400, range: 0...(3650 * 86400)),
                              tombstoneHorizon: try file.seconds("history.tombstone_horizon", default: 90 * 86400, range: 0...(3650 * 86400)))
        guard history.tombstoneHorizon >= history.retention else {
            throw fail("history.tombstone_horizon (\(history.tombstoneHorizon) s) must be at least history.retention (\(history.retention) s): "
                       + "a delete must be remembered as long as the change set that made it is kept")
        }
        let trust = try file.trustPolicy(defaults: OriginTrust.Policy())
        return Configuration(
            store: Store(path: resolve(try file.string("store.path")), model: resolve(try file.string("store.model")),
                         signingKey: scalar("store.signing_key").map(resolve)),
            server: Server(host: try file.string("server.host", default: "127.0.0.1"),
                           port: try file.integer("server.port", default: 7400, range: 0...65535),
                           tokensFile: resolve(try file.string("server.tokens_file")),
                           maxBodyBytes: try file.integer("server.max_body_bytes", default: 64 << 20, range: 1024...(1 << 32)),
                           maxConcurrentBodies: try file.integer("server.max_concurrent_bodies", default: 4, range: 1...1024),
                           maxConnections: try file.integer("server.max_connections", default: 256, range: 2...100_000),
                           tls: tls),
            peers: peers,
            sync: Sync(pullInterval: try file.seconds("sync.pull_interval", default: 30, range: 0.05...86400),
                       batchSize: try file.integer("sync.batch_size", default: 500, range: 1...100_000),
                       requestTimeout: try file.seconds("sync.request_timeout", default: 30, range: 0.1...3600),
                       maxBackoff: try file.seconds("sync.max_backoff", default: 60, range: 1...86400),
                       maxOrigins: try file.integer("sync.max_origins", default: 10_000, range: 2...10_000_000),
                       bootstrap: try file.boolean("sync.bootstrap", default: true)),
            history: history,
            trust: trust,
            file: file.path
        )
    }
}
