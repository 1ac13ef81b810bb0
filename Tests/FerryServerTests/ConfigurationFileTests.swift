import Foundation
import Testing
import FerrySync
@testable import FerryServer

/// The one reading of `ferry run`'s and `ferry relay`'s configuration files (``ConfigurationFile``).
@Suite("Configuration files")
struct ConfigurationFileTests {
    static let keys: ConfigurationFile.Keys = [
        "": ["server", "items", "trust"],
        "server": ["port", "name", "tls", "mode", "wait"],
        "server.tls": ["certificate", "key"],
        "items[]": ["name", "urls"],
        "items[].urls[]": [],
        "trust": ["unknown_origins", "keys", "revoked"],
        "trust.keys[]": ["origin", "key", "from"],
        "trust.revoked[]": ["origin", "key", "after"],
    ]

    enum Mode: String, CaseIterable { case fast, safe, slow }

    func file(_ text: String, environment: [String: String] = [:]) throws(ConfigurationError) -> ConfigurationFile {
        try ConfigurationFile(text: text, path: "/etc/ferry/x.yaml", keys: Self.keys, environment: environment, whenEmpty: "it needs a server")
    }

    func error(_ text: String) -> String {
        do {
            _ = try file(text)
            return "no error"
        } catch {
            return error.description
        }
    }

    @Test("Scalars read as typed values, with defaults, overrides from the environment and paths from the file's folder")
    func values() throws {
        let read = try file("server: {port: 7401, name: a, mode: safe, wait: 2.5, tls: {certificate: c.pem, key: /k.pem}}\n")
        #expect(try read.integer("server.port", default: 1, range: 0...65535) == 7401)
        #expect(try read.integer("server.missing", default: 9, range: 0...10) == 9)
        #expect(try read.seconds("server.wait", default: 1, range: 0...10) == 2.5)
        #expect(try read.choice("server.mode", Mode.self) == .safe)
        #expect(try read.string("server.name") == "a")
        let tls = try #require(try read.serverTLS())
        #expect(tls.certificate == "/etc/ferry/c.pem" && tls.key == "/k.pem")
        let overridden = try file("server: {port: 7401}\n", environment: ["FERRY_SERVER_PORT": "7402"])
        #expect(try overridden.integer("server.port", default: 1, range: 0...65535) == 7402)
    }

    @Test("Each mistake gets one message naming the file and the key",
          arguments: [
            ("", "the file is empty; it needs a server"),
            ("server: {port: [\n", "not valid YAML"),
            ("[1]\n", "the top level must be a mapping of keys (items, server, trust)"),
            ("servr: {}\n", "unknown key servr; known keys here: items, server, trust"),
            ("server: {colour: red}\n", "unknown key server.colour; known keys here: mode, name, port, tls, wait"),
            ("server: [a]\n", "'server' must be a mapping of keys"),
            ("server: {name: [a, b]}\n", "server.name must be a single value, not a list or mapping"),
            ("server: {tls: {certificate: c, pin: p}}\n", "unknown key server.tls.pin; known keys here: certificate, key"),
            ("server: {tls: {certificate: [c]}}\n", "server.tls.certificate must be a single value"),
            ("items: {name: a}\n", "'items' must be a list of mappings (name, urls)"),
            ("items: [a]\n", "items[0] must be a mapping with name, urls"),
            ("items: [{name: a, colour: red}]\n", "unknown key items[0].colour; known keys here: name, urls"),
            ("trust: {keys: {origin: x}}\n", "trust.keys must be a list of mappings (from, key, origin)"),
            ("trust: {keys: on}\n", "trust.keys must be a list of mappings (from, key, origin)"),
            ("server: {tls: on}\n", "server.tls must be a mapping of keys"),
            ("server:\n  tls:\n", "server.tls must be a mapping of keys"),
            ("items: [{name: [a]}]\n", "items[0].name must be a single value"),
            ("items: [{name: a, urls: [{x: 1}]}]\n", "items[0].urls must be a single value"),
          ])
    func mistakes(text: String, message: String) {
        let said = error(text)
        #expect(said.hasPrefix("/etc/ferry/x.yaml: ") && said.contains(message), "\(text) → \(said)")
    }

    @Test("Values of the wrong kind say what is wanted and what was found")
    func wrongValues() throws {
        let read = try file("server: {port: seventy, wait: soon, mode: quick, name: ''}\n")
        #expect(throws: ConfigurationError(path: "/etc/ferry/x.yaml", message: "server.port must be a whole number from 0 to 65535; found 'seventy'")) {
            try read.integer("server.port", default: 1, range: 0...65535)
        }
        #expect(throws: ConfigurationError(path: "/etc/ferry/x.yaml", message: "server.wait must be a number of seconds from 0 to 0.5; found 'soon'")) {
            try read.seconds("server.wait", default: 0, range: 0...0.5)
        }
        #expect(throws: ConfigurationError(path: "/etc/ferry/x.yaml", message: "server.mode must be fast, safe or slow; found 'quick'")) {
            try read.choice("server.mode", Mode.self)
        }
        #expect(throws: ConfigurationError(path: "/etc/ferry/x.yaml", message: "server.name is empty")) { try read.string("server.name") }
        #expect(throws: ConfigurationError(path: "/etc/ferry/x.yaml", message: "missing key server.other")) { try read.string("server.other") }
        let halfTLS = try file("server: {tls: {certificate: c}}\n")
        #expect(throws: ConfigurationError.self) { try halfTLS.serverTLS() }
    }

    @Test("The trust section: pinned keys and revocations checked, over the caller's defaults")
    func trust() throws {
        let origin = UUID()
        let key = "11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo="
        let read = try file("trust:\n  unknown_origins: accept\n  keys:\n    - {origin: \(origin), key: '\(key)', from: 3}\n")
        let policy = try read.trustPolicy(defaults: OriginTrust.Policy(unknownOrigins: .refuse, trustsPeersOnFirstUse: false))
        #expect(policy.unknownOrigins == .accept && !policy.trustsPeersOnFirstUse)
        #expect(policy.pinned.count == 1 && policy.pinned.first?.origin == origin && policy.pinned.first?.firstSequence == 3)
        let bad = try file("trust:\n  keys:\n    - {origin: nope, key: '\(key)'}\n")
        #expect(throws: ConfigurationError.self) { try bad.trustPolicy(defaults: OriginTrust.Policy()) }
    }
}
