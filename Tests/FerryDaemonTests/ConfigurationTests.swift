import Foundation
import Testing
import FerryTestTraits
import FerryStore
import FerrySigning
import FerrySync
@testable import FerryDaemon
import FerryTestSupport
import FerryServer

@Suite("Configuration", .blocking)
struct ConfigurationTests {
    static let complete = """
        store:
          path: data/store.sqlite
          model: models/OrgChart.xcdatamodeld
        server:
          host: 0.0.0.0
          port: 7401
          tokens_file: /etc/ferry/tokens
          max_body_bytes: 1048576
          tls:
            certificate: tls/cert.pem
            key: /etc/ferry/key.pem
            ca_file: tls/ca.pem
        peers:
          - name: berlin
            url: https://berlin.example.com:7400
            token_file: tokens/berlin
          - name: paris
            url: https://paris.internal:7400
            token_file: tokens/paris
            ca_file: tls/internal-ca.pem
        sync:
          pull_interval: 12.5
          batch_size: 250
          request_timeout: 20
          max_backoff: 15
        """

    func parse(_ text: String, environment: [String: String] = [:]) throws(ConfigurationError) -> Configuration {
        try Configuration.parse(text, file: "/srv/ferry/ferry.yaml", environment: environment)
    }

    func error(_ text: String, environment: [String: String] = [:]) -> String {
        do {
            _ = try parse(text, environment: environment)
            return "no error"
        } catch {
            return error.description
        }
    }

    @Test("Every key is read; relative paths resolve against the file's folder")
    func complete() throws {
        let configuration = try parse(Self.complete)
        #expect(configuration.store.path == "/srv/ferry/data/store.sqlite")
        #expect(configuration.store.model == "/srv/ferry/models/OrgChart.xcdatamodeld")
        #expect(configuration.server == .init(host: "0.0.0.0", port: 7401, tokensFile: "/etc/ferry/tokens", maxBodyBytes: 1_048_576,
                                              tls: .init(certificate: "/srv/ferry/tls/cert.pem", key: "/etc/ferry/key.pem", caFile: "/srv/ferry/tls/ca.pem")))
        #expect(configuration.peers == [
            .init(name: "berlin", urls: [URL(string: "https://berlin.example.com:7400")!], tokenFile: "/srv/ferry/tokens/berlin"),
            .init(name: "paris", urls: [URL(string: "https://paris.internal:7400")!], tokenFile: "/srv/ferry/tokens/paris",
                  caFile: "/srv/ferry/tls/internal-ca.pem"),
        ])
        #expect(configuration.sync == .init(pullInterval: 12.5, batchSize: 250, requestTimeout: 20, maxBackoff: 15))
    }

    @Test("A peer may list several URLs (relays sharing one database), tried in order")
    func severalURLs() throws {
        let configuration = try parse(
            "store: {path: s, model: m}\nserver: {tokens_file: t}\npeers:\n  - {name: relays, urls: ['http://r1:7500', 'https://r2:7500'], token_file: t}\n")
        #expect(configuration.peers.map(\.urls) == [[URL(string: "http://r1:7500")!, URL(string: "https://r2:7500")!]])
        #expect(configuration.peers.first?.url == URL(string: "http://r1:7500")!)
    }

    @Test("Defaults for everything but the store and the tokens file")
    func defaults() throws {
        let configuration = try parse("store: {path: s.sqlite, model: m.xcdatamodeld}\nserver: {tokens_file: tokens}\n")
        #expect(configuration.server.host == "127.0.0.1" && configuration.server.port == 7400)
        #expect(configuration.server.maxBodyBytes == 64 << 20)
        #expect(configuration.peers.isEmpty)
        #expect(configuration.sync == .init(pullInterval: 30, batchSize: 500, requestTimeout: 30, maxBackoff: 60))
        #expect(configuration.history == .init(purgeInterval: 3600, retention: 7 * 86400, tombstoneHorizon: 90 * 86400))
        let history = try parse("store: {path: s, model: m}\nserver: {tokens_file: t}\nhistory: {purge_interval: 0, retention: 60, tombstone_horizon: 120}\n")
        #expect(history.history == .init(purgeInterval: 0, retention: 60, tombstoneHorizon: 120))
        #expect(configuration.sync.bootstrap, "a daemon bootstraps from a snapshot on a 410 unless told not to")
        #expect(try parse("store: {path: s, model: m}\nserver: {tokens_file: t}\nsync: {bootstrap: false}\n").sync.bootstrap == false)
        #expect(try parse("store: {path: s, model: m}\nserver: {tokens_file: t}\n", environment: ["FERRY_SYNC_BOOTSTRAP": "no"]).sync.bootstrap == false)
    }

    @Test("FERRY_* environment variables override scalar keys")
    func environment() throws {
        let configuration = try parse(Self.complete, environment: [
            "FERRY_SERVER_PORT": "9000", "FERRY_SYNC_PULL_INTERVAL": "3", "FERRY_STORE_PATH": "/var/lib/ferry/x.sqlite",
            "FERRY_SERVER_TOKENS_FILE": "t", "UNRELATED": "1", "FERRY_SERVER_TLS_KEY": "other.key",
        ])
        #expect(configuration.server.tls?.key == "/srv/ferry/other.key")
        #expect(configuration.server.port == 9000)
        #expect(configuration.sync.pullInterval == 3)
        #expect(configuration.store.path == "/var/lib/ferry/x.sqlite")
        #expect(configuration.server.tokensFile == "/srv/ferry/t")
        #expect(error(Self.complete, environment: ["FERRY_SERVER_PORT": "seventy"])
                    .contains("server.port must be a whole number from 0 to 65535; found 'seventy'"))
    }

    @Test("Each bad or missing key gets an error naming the file and the key")
    func errors() {
        let cases: [(String, String)] = [
            ("server: {tokens_file: t}\n", "missing key store.path"),
            ("store: {path: s}\nserver: {tokens_file: t}\n", "missing key store.model"),
            ("store: {path: s, model: m}\n", "missing key server.tokens_file"),
            ("store: {path: s, model: m, colour: red}\nserver: {tokens_file: t}\n", "unknown key store.colour; known keys here: model, path"),
            ("stor: {path: s}\n", "unknown key stor"),
            ("store: {path: s, model: m}\nserver: {tokens_file: t, port: 70000}\n", "server.port must be a whole number from 0 to 65535; found '70000'"),
            ("store: {path: s, model: m}\nserver: {tokens_file: t}\nsync: {pull_interval: soon}\n", "sync.pull_interval must be a number of seconds"),
            ("store: {path: s, model: m}\nserver: {tokens_file: t}\npeers:\n  - {name: b, url: 'ftp://x', token_file: t}\n",
             "peers[0].url must be an http:// or https:// URL"),
            ("store: {path: s, model: m}\nserver: {tokens_file: t}\npeers:\n  - {name: b, url: 'http://x'}\n", "missing key peers[0].token_file"),
            ("store: {path: s, model: m}\nserver: {tokens_file: t, tls: {ca_file: ca.pem}}\n",
             "server.tls.ca_file needs server.tls.certificate and server.tls.key"),
            ("store: {path: s, model: m}\nserver: {tokens_file: t, tls: {certificate: c, key: k, ca_file: ''}}\n", "server.tls.ca_file is empty"),
            ("store: {path: s, model: m}\nserver: {tokens_file: t}\npeers:\n  - {name: b, url: 'http://x', token_file: t}\n" +
                "  - {name: b, url: 'http://y', token_file: t}\n",
             "two peers are named 'b'"),
            ("store: {path: s, model: m}\nserver: {tokens_file: t}\npeers: {name: b}\n", "'peers' must be a list"),
            ("store: [s, m]\n", "'store' must be a mapping"),
            ("store: {path: [a, b], model: m}\nserver: {tokens_file: t}\n", "store.path must be a single value"),
            ("", "the file is empty"),
            ("store: {path: s\n", "not valid YAML"),
            ("store: {path: s, model: m}\nserver: {tokens_file: t, tls: {certificate: c}}\n", "missing key server.tls.key"),
            ("store: {path: s, model: m}\nserver: {tokens_file: t, tls: {certificate: c, key: k, pin: p}}\n", "unknown key server.tls.pin"),
            ("store: {path: s, model: m}\nserver: {tokens_file: t, tls: {ca_file: ca.pem}}\n",
             "server.tls.ca_file needs server.tls.certificate and server.tls.key"),
            ("store: {path: s, model: m}\nserver: {tokens_file: t, tls: {certificate: c, key: k, ca_file: ''}}\n", "server.tls.ca_file is empty"),
            ("store: {path: s, model: m}\nserver: {tokens_file: t}\npeers:\n  - {name: b, url: 'http://x', token_file: t, ca_file: ca.pem}\n",
             "peers[0].ca_file is only for https:// peers; peers[0] is reached at 'http://x'"),
            ("store: {path: s, model: m}\nserver: {tokens_file: t}\npeers:\n  - {name: b, url: 'https://x', token_file: t, ca_file: ''}\n",
             "peers[0].ca_file is empty"),
            ("store: {path: s, model: m}\nserver: {tokens_file: t}\nhistory: {retention: 600, tombstone_horizon: 60}\n",
             "history.tombstone_horizon (60.0 s) must be at least history.retention (600.0 s)"),
            ("store: {path: s, model: m}\nserver: {tokens_file: t}\nhistory: {purge_interval: -1}\n", "history.purge_interval must be a number of seconds"),
            ("store: {path: s, model: m}\nserver: {tokens_file: t}\nhistory: {keep: forever}\n", "unknown key history.keep"),
            ("store: {path: s, model: m}\nserver: {tokens_file: t}\nsync: {bootstrap: maybe}\n", "sync.bootstrap must be true or false; found 'maybe'"),
            ("store: {path: s, model: m}\nserver: {tokens_file: t}\npeers:\n  - {name: r, urls: [], token_file: t}\n", "peers[0].urls is empty"),
            ("store: {path: s, model: m}\nserver: {tokens_file: t}\npeers:\n  - {name: r, url: 'http://x', urls: ['http://y'], token_file: t}\n",
             "peers[0] has both url and urls"),
            ("store: {path: s, model: m}\nserver: {tokens_file: t}\npeers:\n  - {name: r, urls: ['http://x', 'ftp://y'], token_file: t}\n",
             "peers[0].urls[1] must be an http:// or https:// URL"),
            ("store: {path: s, model: m}\nserver: {tokens_file: t}\npeers:\n  - {name: r, urls: ['http://x', 'http://x'], token_file: t}\n",
             "peers[0].urls[1] lists 'http://x' twice"),
            ("store: {path: s, model: m}\nserver: {tokens_file: t}\npeers:\n  - {name: r, token_file: t}\n", "missing key peers[0].url (or urls"),
        ]
        for (text, expected) in cases {
            let message = error(text)
            #expect(message.hasPrefix("/srv/ferry/ferry.yaml: "), "\(text)")
            #expect(message.contains(expected), "\(text) → \(message)")
        }
    }

    @Test("The trust section: pinned keys, revocations, unknown origins and first use, each checked; the store's signing_key is a key of its own")
    func trust() throws {
        let key = StoreSigningKey().publicKey
        let origin = UUID().uuidString
        let base = "store:\n  path: s.sqlite\n  model: m.xcdatamodeld\n  signing_key: keys/s.key\nserver:\n  tokens_file: tokens\n"
        let configuration = try parse(base + """
            trust:
              unknown_origins: accept
              first_use: off
              keys:
                - origin: \(origin)
                  key: \(key)
                  from: 40
              revoked:
                - origin: \(origin)
                  key: \(key)
                  after: 2026-11-24T12:00:00Z
            """)
        #expect(configuration.store.signingKey == "/srv/ferry/keys/s.key")
        #expect(configuration.trust.unknownOrigins == .accept && !configuration.trust.trustsPeersOnFirstUse)
        #expect(configuration.trust.pinned == [OriginKey(origin: try #require(UUID(uuidString: origin)), publicKey: key, firstSequence: 40, source: .pinned)])
        #expect(configuration.trust.revocations.map(\.after) == [HybridTimestamp.wall(try Date("2026-11-24T12:00:00Z", strategy: .iso8601))])
        // Defaults: refuse unknown origins, trust configured peers on first use, nothing pinned.
        let defaults = try parse(base)
        #expect(defaults.trust == OriginTrust.Policy())
        #expect(defaults.trust.unknownOrigins == .refuse && defaults.trust.trustsPeersOnFirstUse)
        // Each mistake named.
        #expect(error(base + "trust:\n  unknown_origins: maybe\n").contains("trust.unknown_origins must be refuse or accept"))
        #expect(error(base + "trust:\n  first_use: always\n").contains("trust.first_use must be peers or off"))
        #expect(error(base + "trust:\n  keys:\n    - origin: \(origin)\n      key: nope\n").contains("trust.keys[0].key must be an Ed25519 public key"))
        #expect(error(base + "trust:\n  keys:\n    - origin: nope\n      key: \(key)\n").contains("trust.keys[0].origin must be a store UUID"))
        #expect(error(base + "trust:\n  keys:\n    - origin: \(origin)\n").contains("missing key trust.keys[0].key"))
        #expect(error(base + "trust:\n  revoked:\n    - origin: \(origin)\n      key: \(key)\n      after: yesterday\n")
                    .contains("trust.revoked[0].after must be an ISO 8601 time"))
        #expect(error(base + "trust:\n  keys:\n    - origin: \(origin)\n      key: \(key)\n      colour: red\n").contains("unknown key trust.keys[0].colour"))
        #expect(error(base + "trust:\n  pinned: yes\n").contains("unknown key trust.pinned"))
    }

    @Test("The example configuration in config/ is valid")
    func example() throws {
        let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../config/ferry.yaml").standardizedFileURL.path
        let configuration = try Configuration.load(path: path, environment: [:])
        #expect(configuration.store.model.hasSuffix("config/models/OrgChart.xcdatamodeld"))
        #expect(FileManager.default.fileExists(atPath: configuration.store.model))
        #expect(!configuration.peers.isEmpty)
    }
}

@Suite("Store commands with --config", .blocking)
struct StoreCommandsWithConfigurationTests {
    @Test("--config stands for --store and --model on every store command; mixing them is a usage error")
    func config() throws {
        let peer = try DaemonPeer(name: "cli", model: ReplicationTests.model)
        #expect(try FerryProcess.run(["init", "--config", peer.configuration]).status == 0)
        try peer.put("[\(ReplicationTests.person("ann", 1, "Ann"))]")
        let byPaths = try peer.dump()
        #expect(!byPaths.isEmpty)
        #expect(try FerryProcess.run(["dump", "--config", peer.configuration]).standardOutput == byPaths)
        #expect(try FerryProcess.run(["history", "--config", peer.configuration]).standardOutput == peer.ferry(["history"]).standardOutput)
        #expect(try FerryProcess.run(["state", "--config", peer.configuration]).standardOutput
            == FerryProcess.run(["state", "--store", peer.store]).standardOutput)
        let query = try FerryProcess.run(["query", "--config", peer.configuration, "Person", "--where", "name == 'Ann'", "--count"])
        #expect(query.status == 0 && query.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines) == "1", "\(query.standardError)")
        let put = try FerryProcess.run(["put", "--config", peer.configuration, "-"], input: "[\(ReplicationTests.person("bob", 2, "Bob"))]")
        #expect(put.status == 0)
        #expect(try peer.dump().split(separator: "\n").count == 2)
        let both = try FerryProcess.run(["dump", "--config", peer.configuration, "--store", peer.store])
        #expect(both.status == 64 && both.standardError.contains("not both"))
        let neither = try FerryProcess.run(["dump"])
        #expect(neither.status == 64 && neither.standardError.contains("--config"))
        let missing = try FerryProcess.run(["dump", "--config", peer.directory.file("nope.yaml")])
        #expect(missing.status == 1 && missing.standardError.contains("cannot read the configuration file"))
    }
}
