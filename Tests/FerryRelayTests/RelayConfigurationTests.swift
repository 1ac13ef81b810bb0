import Foundation
import Testing
import FerryTestTraits
import FerryRelay
import FerryServer
import FerryStore
import FerrySync

/// `ferry relay --config`: every key read, and each bad or missing one named.
@Suite("Relay configuration", .blocking)
struct RelayConfigurationTests {
    static let key = "gJ66q3WSbKW7Jn9ez+uvaa23kiLsFsVzF5nOR+MJnio="
    static let origin = "1BDB1D3D-DE08-4862-8690-64105074E331"

    func parse(_ text: String) throws(ConfigurationError) -> RelayConfiguration {
        try RelayConfiguration.parse(text, path: "/etc/ferry/relay.yaml")
    }

    func error(_ text: String) -> String {
        do {
            _ = try parse(text)
            return "no error"
        } catch {
            return error.description
        }
    }

    @Test("Every key is read; relative paths resolve against the file's folder; defaults for the rest")
    func everyKey() throws {
        let full = try parse("""
            database: {host: db.internal, port: 6543, user: relay, password_file: pg-password, name: fleet, tls: require, connections: 4}
            server: {host: 127.0.0.1, port: 7501, tokens_file: tokens, max_body_bytes: 4096, max_change_set_bytes: 8192, max_concurrent_bodies: 2, \
            tls: {certificate: tls/relay.pem, key: /etc/ferry/relay.key}}
            trust:
              unknown_origins: accept
              keys:
                - {origin: \(Self.origin), key: '\(Self.key)', from: 3}
              revoked:
                - {origin: \(Self.origin), key: '\(Self.key)', after: '2026-11-24T12:00:00Z'}
            retention: {keep: 60, peer_expiry: 120, interval: 5}
            """)
        #expect(full.database.host == "db.internal" && full.database.port == 6543 && full.database.user == "relay")
        #expect(full.database.passwordFile == "/etc/ferry/pg-password" && full.database.name == "fleet")
        #expect(full.database.tls == .require && full.database.connections == 4)
        #expect(full.server.host == "127.0.0.1" && full.server.port == 7501 && full.server.tokensFile == "/etc/ferry/tokens")
        #expect(full.server.maxBodyBytes == 4096 && full.server.maxChangeSetBytes == 8192 && full.server.maxConcurrentBodies == 2)
        #expect(full.server.tls == RelayConfiguration.TLS(certificate: "/etc/ferry/tls/relay.pem", key: "/etc/ferry/relay.key"))
        #expect(full.trust.unknownOrigins == .accept && !full.trust.trustsPeersOnFirstUse)
        #expect(full.trust.pinned.map(\.firstSequence) == [3] && full.trust.pinned.first?.origin == UUID(uuidString: Self.origin))
        #expect(full.trust.revocations.count == 1)
        #expect(full.retention.keep == 60 && full.retention.peerExpiry == 120 && full.retention.interval == 5)

        let least = try parse("database: {}\nserver: {tokens_file: /etc/ferry/tokens}\n")
        #expect(least.database.host == "127.0.0.1" && least.database.port == 5432 && least.database.name == "ferry" && least.database.tls == .prefer)
        #expect(least.server.port == 7500 && least.trust.unknownOrigins == .refuse && least.trust.pinned.isEmpty)
        #expect(least.retention.keep == 7 * 24 * 3600)
        #expect(least.server.maxBodyBytes == 16 << 20 && least.server.maxChangeSetBytes == 256 << 20)
        // A max_body_bytes above the default max_change_set_bytes raises the latter with it.
        let wide = try parse("database: {}\nserver: {tokens_file: t, max_body_bytes: 536870912}\n")
        #expect(wide.server.maxChangeSetBytes == 512 << 20)
    }

    @Test("Each bad or missing key gets an error naming the file and the key")
    func badKeys() {
        let cases: [(String, String)] = [
            ("", "the file is empty"),
            ("server: {tokens_file: t}\n", "missing section 'database'"),
            ("database: {}\n", "missing section 'server'"),
            ("database: {}\nserver: {}\n", "missing key server.tokens_file"),
            ("database: {colour: red}\nserver: {tokens_file: t}\n",
             "unknown key database.colour; known keys here: connections, host, name, password_file, port, tls, user"),
            ("databse: {}\n", "unknown key databse; known keys here: database, retention, server, trust"),
            ("database: {port: 0}\nserver: {tokens_file: t}\n", "database.port must be a whole number from 1 to 65535"),
            ("database: {tls: maybe}\nserver: {tokens_file: t}\n", "database.tls must be disable, prefer or require"),
            ("database: {}\nserver: {tokens_file: t, port: 70000}\n", "server.port must be a whole number from 0 to 65535"),
            ("database: {}\nserver: {tokens_file: t}\ntrust: {unknown_origins: sometimes}\n", "trust.unknown_origins must be refuse or accept"),
            ("database: {}\nserver: {tokens_file: t}\ntrust: {keys: [{origin: nope, key: k}]}\n", "trust.keys[0].origin must be a store UUID"),
            ("database: {}\nserver: {tokens_file: t}\ntrust: {keys: [{origin: \(Self.origin), key: short}]}\n",
             "trust.keys[0].key must be an Ed25519 public key"),
            ("database: {}\nserver: {tokens_file: t}\ntrust: {revoked: [{origin: \(Self.origin), key: k, after: yesterday}]}\n",
             "trust.revoked[0].after must be an ISO 8601 time"),
            ("database: {}\nserver: {tokens_file: t}\nretention: {keep: -1}\n", "retention.keep must be a number of seconds from 0 to"),
            ("database: [a]\nserver: {tokens_file: t}\n", "'database' must be a mapping"),
            ("database: {host: [\n", "not valid YAML"),
            ("database: {}\nserver: {tokens_file: t}\ntrust: {keys: {origin: x}}\n", "trust.keys must be a list"),
            ("database: {}\nserver: {tokens_file: t, tls: {certificate: c}}\n", "missing key server.tls.key"),
            ("database: {}\nserver: {tokens_file: t, max_body_bytes: 8192, max_change_set_bytes: 4096}\n",
             "server.max_change_set_bytes (4096) must be at least server.max_body_bytes (8192)"),
            ("database: {}\nserver: {tokens_file: t, max_change_set_bytes: 5000000000}\n",
             "server.max_change_set_bytes must be a whole number from 1024 to 2147483648"),
            ("database: {}\nserver: {tokens_file: t, tls: {certificate: c, key: k, pin: p}}\n",
             "unknown key server.tls.pin; known keys here: certificate, key"),
        ]
        for (text, expected) in cases {
            let message = error(text)
            #expect(message.hasPrefix("/etc/ferry/relay.yaml: "), "\(text)")
            #expect(message.contains(expected), "\(text) → \(message)")
        }
    }

    @Test("The example configuration config/relay.yaml is valid")
    func example() throws {
        let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../config/relay.yaml").standardizedFileURL.path
        let configuration = try RelayConfiguration.load(path: path)
        #expect(configuration.server.port == 7500 && configuration.database.name == "ferry" && configuration.trust.unknownOrigins == .refuse)
    }
}
