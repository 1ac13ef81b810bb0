import Foundation
import Yams
import FerryModel
import FerryStore
import FerrySigning
import FerrySync

/// Why a configuration file cannot be used: the file, and what is wrong with which key.
public struct ConfigurationError: FerryError, Sendable, Equatable {
    /// The kinds of fault a configuration file has.
    public enum Code: String, Hashable, Sendable {
        /// The file cannot be read (missing, no permission, not UTF-8).
        case unreadable
        /// The file is not YAML.
        case notYAML
        /// The file is empty.
        case empty
        /// A key or value is not one the file takes: an unknown or missing key, a value of the wrong
        /// shape or out of range, settings that contradict each other.
        case invalid
    }

    /// The file.
    public let path: String
    /// What is wrong, for a person to fix, naming the key.
    public let message: String
    /// The kind of fault.
    public let code: Code
    /// The error met reading or parsing the file, when there was one.
    public let cause: (any Error)?

    /// The file at `path` cannot be used, for `message`; `cause` is the error met, when there was one.
    public init(path: String, message: String, code: Code = .invalid, cause: (any Error)? = nil) {
        self.path = path
        self.message = message
        self.code = code
        self.cause = cause
    }

    public var description: String { "\(path): \(message)" }

    /// Errors are equal when they are of the same kind and say the same of the same file (causes are not compared).
    public static func == (lhs: ConfigurationError, rhs: ConfigurationError) -> Bool {
        lhs.path == rhs.path && lhs.message == rhs.message && lhs.code == rhs.code
    }
}

/// A YAML configuration file as `ferry run` (`config/ferry.yaml`) and `ferry relay`
/// (`config/relay.yaml`) read it: one reading, so that both take the same forms and say the
/// same things about the same mistakes.
///
/// - Every key is known: an unknown one (a typo would otherwise be ignored) is refused, naming
///   the keys its place takes. ``Keys`` says what each place takes: `""` the top level, `name`
///   a section (a mapping of single values), `name.child` a mapping inside one, `name[]` or
///   `name.child[]` the entries of a list of mappings, and `name[].key[]` a key of those entries
///   that takes a list of single values.
/// - Scalars are read as text and checked here, so that a message can say exactly what was
///   found and what is wanted ("server.port must be a whole number from 0 to 65535; found 'x'").
/// - With `environment`, `FERRY_` and a key's path in capitals with `_` for `.` overrides it
///   (`FERRY_SERVER_PORT=7401` for `server.port`).
/// - Relative paths are taken from the file's folder.
package struct ConfigurationFile {
    /// The keys each place of the file takes (see the type's notes).
    package typealias Keys = [String: Set<String>]

    /// The file, for messages.
    package let path: String
    private let folder: String
    private let root: Node.Mapping
    private let environment: [String: String]

    /// Reads the file at `path`.
    /// - Throws: ``ConfigurationError`` when it cannot be read or is not such a file (see ``init(text:path:keys:environment:whenEmpty:)``).
    package init(path: String, keys: Keys, environment: [String: String] = [:], whenEmpty: String) throws(ConfigurationError) {
        let text: String
        do {
            text = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw ConfigurationError(path: path, message: "cannot read the configuration file (\(error.localizedDescription))", code: .unreadable, cause: error)
        }
        try self.init(text: text, path: path, keys: keys, environment: environment, whenEmpty: whenEmpty)
    }

    /// Reads `text`, the content of the file at `path`, whose folder relative paths are taken from.
    /// - Throws: ``ConfigurationError`` for text that is not YAML, is empty (`whenEmpty` says what it
    ///   needs), or holds a key its place does not take or a value of the wrong shape.
    package init(text: String, path: String, keys: Keys, environment: [String: String] = [:], whenEmpty: String) throws(ConfigurationError) {
        self.path = path
        self.folder = URL(fileURLWithPath: path).deletingLastPathComponent().path
        self.environment = environment
        let node: Node?
        do {
            node = try Yams.compose(yaml: text)
        } catch {
            throw ConfigurationError(path: path, message: "not valid YAML: \(error)", code: .notYAML, cause: error)
        }
        guard let node else { throw ConfigurationError(path: path, message: "the file is empty; \(whenEmpty)", code: .empty) }
        let top = keys[""] ?? []
        guard let root = node.mapping else {
            throw ConfigurationError(path: path, message: "the top level must be a mapping of keys (\(top.sorted().joined(separator: ", ")))")
        }
        self.root = root
        try check(root, keys: keys)
    }

    /// An error about this file.
    package func fail(_ message: String) -> ConfigurationError {
        ConfigurationError(path: path, message: message)
    }

    /// Whether the top level has `section`.
    package func has(_ section: String) -> Bool { root[section] != nil }

    /// The text of a scalar key (`server.port`, `server.tls.key`): the environment's override, else the file's.
    package func scalar(_ keyPath: String) -> String? {
        let variable = "FERRY_" + keyPath.replacingOccurrences(of: ".", with: "_").uppercased()
        if let override = environment[variable] { return override }
        return node(at: keyPath)?.scalar?.string
    }

    /// The node at a key path of the file (`server.tls.key`); nil when a part is missing.
    private func node(at keyPath: String) -> Node? {
        var node: Node? = .mapping(root)
        for part in keyPath.split(separator: ".") { node = node?.mapping?[String(part)] }
        return node
    }

    /// A key that must be there and not empty (or `value` when it is absent).
    package func string(_ keyPath: String, default value: String? = nil) throws(ConfigurationError) -> String {
        guard let found = scalar(keyPath) ?? value else { throw fail("missing key \(keyPath)") }
        guard !found.isEmpty else { throw fail("\(keyPath) is empty") }
        return found
    }

    /// A whole number within `range`, or `value` when the key is absent.
    package func integer(_ keyPath: String, default value: Int, range: ClosedRange<Int>) throws(ConfigurationError) -> Int {
        try integer(keyPath, range: range) ?? value
    }

    /// A whole number within `range`, or nil when the key is absent.
    package func integer(_ keyPath: String, range: ClosedRange<Int>) throws(ConfigurationError) -> Int? {
        guard let text = scalar(keyPath) else { return nil }
        guard let number = Int(text.trimmingCharacters(in: .whitespaces)), range.contains(number) else {
            throw fail("\(keyPath) must be a whole number from \(range.lowerBound) to \(range.upperBound); found '\(text)'")
        }
        return number
    }

    /// A number of seconds within `range`, or `value` when the key is absent.
    package func seconds(_ keyPath: String, default value: Double, range: ClosedRange<Double>) throws(ConfigurationError) -> Double {
        guard let text = scalar(keyPath) else { return value }
        guard let number = Double(text.trimmingCharacters(in: .whitespaces)), range.contains(number) else {
            throw fail("\(keyPath) must be a number of seconds from \(Self.format(range.lowerBound)) to \(Self.format(range.upperBound)); found '\(text)'")
        }
        return number
    }

    /// `true`, `yes` or `on`; `false`, `no` or `off`; or `value` when the key is absent.
    package func boolean(_ keyPath: String, default value: Bool) throws(ConfigurationError) -> Bool {
        guard let text = scalar(keyPath) else { return value }
        switch text.trimmingCharacters(in: .whitespaces).lowercased() {
        case "true", "yes", "on": return true
        case "false", "no", "off": return false
        default: throw fail("\(keyPath) must be true or false; found '\(text)'")
        }
    }

    /// One of `Choice`'s raw values, or nil when the key is absent.
    package func choice<Choice: RawRepresentable & CaseIterable>(_ keyPath: String, _ type: Choice.Type) throws(ConfigurationError) -> Choice?
    where Choice.RawValue == String {
        guard let text = scalar(keyPath) else { return nil }
        guard let value = Choice(rawValue: text.trimmingCharacters(in: .whitespaces)) else {
            let names = Choice.allCases.map(\.rawValue)
            let list = names.count > 1 ? names.dropLast().joined(separator: ", ") + " or " + (names.last ?? "") : names.joined()
            throw fail("\(keyPath) must be \(list); found '\(text)'")
        }
        return value
    }

    /// A file path, taken from the configuration file's folder when relative.
    package func resolve(_ file: String) -> String {
        file.hasPrefix("/") ? file : URL(fileURLWithPath: folder).appendingPathComponent(file).standardizedFileURL.path
    }

    /// The entries of a list of mappings (`peers`, `trust.keys`), each as its keys' texts; empty when absent.
    package func entries(_ keyPath: String) -> [[String: Node]] {
        return (node(at: keyPath)?.sequence ?? []).map { entry in
            var values: [String: Node] = [:]
            for (key, value) in entry.mapping ?? [:] { if let name = key.string { values[name] = value } }
            return values
        }
    }

    // MARK: - Shared sections

    /// `server.tls` (`certificate` and `key`, both or neither), resolved; nil without it.
    package func serverTLS() throws(ConfigurationError) -> (certificate: String, key: String)? {
        switch (scalar("server.tls.certificate"), scalar("server.tls.key")) {
        case (nil, nil): return nil
        case (let certificate?, let key?):
            guard !certificate.isEmpty else { throw fail("server.tls.certificate is empty") }
            guard !key.isEmpty else { throw fail("server.tls.key is empty") }
            return (resolve(certificate), resolve(key))
        case (nil, _): throw fail("missing key server.tls.certificate (server.tls needs both certificate and key)")
        case (_, nil): throw fail("missing key server.tls.key (server.tls needs both certificate and key)")
        }
    }

    /// The `trust` section over `defaults`: `unknown_origins`, `first_use` (when the file's keys
    /// allow it), each pinned key and revocation checked (a store UUID, a 32-byte Ed25519 public key
    /// in base64, a first sequence number ≥ 1, an ISO 8601 time).
    package func trustPolicy(defaults: OriginTrust.Policy) throws(ConfigurationError) -> OriginTrust.Policy {
        var policy = defaults
        if let value = try choice("trust.unknown_origins", OriginTrust.Policy.UnknownOrigins.self) { policy.unknownOrigins = value }
        if let text = scalar("trust.first_use") {
            switch text.trimmingCharacters(in: .whitespaces) {
            case "peers": policy.trustsPeersOnFirstUse = true
            case "off": policy.trustsPeersOnFirstUse = false
            default: throw fail("trust.first_use must be peers or off; found '\(text)'")
            }
        }
        func text(_ entry: [String: Node], _ key: String) -> String? { entry[key]?.scalar?.string }
        func origin(_ entry: [String: Node], _ place: String) throws(ConfigurationError) -> UUID {
            guard let found = text(entry, "origin") else { throw fail("missing key \(place).origin (the store's UUID, from its `ferry state`)") }
            guard let origin = UUID(uuidString: found) else { throw fail("\(place).origin must be a store UUID; found '\(found)'") }
            return origin
        }
        func key(_ entry: [String: Node], _ place: String) throws(ConfigurationError) -> String {
            guard let found = text(entry, "key") else { throw fail("missing key \(place).key (the store's public key, from its `ferry state`)") }
            guard VerifyingKey(base64: found) != nil else {
                throw fail("\(place).key must be an Ed25519 public key in base64 (44 characters, as `ferry state` shows it); found '\(found)'")
            }
            return found
        }
        for (index, entry) in entries("trust.keys").enumerated() {
            let place = "trust.keys[\(index)]"
            var first: Int64 = 1
            if let found = text(entry, "from") {
                guard let number = Int64(found), number >= 1 else { throw fail("\(place).from must be a sequence number ≥ 1; found '\(found)'") }
                first = number
            }
            policy.pinned.append(OriginKey(origin: try origin(entry, place), publicKey: try key(entry, place), firstSequence: first, source: .pinned))
        }
        for (index, entry) in entries("trust.revoked").enumerated() {
            let place = "trust.revoked[\(index)]"
            guard let found = text(entry, "after") else {
                throw fail("missing key \(place).after (an ISO 8601 time such as 2026-11-24T12:00:00Z)")
            }
            guard let date = try? Date(found, strategy: .iso8601) else {
                throw fail("\(place).after must be an ISO 8601 time such as 2026-11-24T12:00:00Z; found '\(found)'")
            }
            policy.revocations.append(OriginTrust.Revocation(origin: try origin(entry, place), publicKey: try key(entry, place),
                                                             after: HybridTimestamp.wall(date)))
        }
        return policy
    }

    // MARK: - Checking the keys

    /// Refuses keys the file's places do not take, and values of the wrong shape.
    private func check(_ root: Node.Mapping, keys: Keys) throws(ConfigurationError) {
        try check(root, allowed: keys[""] ?? [], place: "")
        for (key, value) in root {
            guard let name = key.string else { continue }
            if let allowed = keys[name + "[]"] {
                // (A top-level list left empty, its entries commented out, is no entries.)
                if let text = value.scalar?.string, ["", "~", "null"].contains(text) { continue }
                try checkList(value, allowed: allowed, place: name, keys: keys)
                continue
            }
            guard let mapping = value.mapping else { throw fail("'\(name)' must be a mapping of keys") }
            try check(mapping, allowed: keys[name] ?? [], place: name + ".")
            for (child, childValue) in mapping {
                let childName = child.string ?? "?"
                let childPlace = "\(name).\(childName)"
                // A place that takes a mapping or a list refuses a single value (or none): `tls: on`
                // must not read as no TLS at all.
                let takesMore = keys[childPlace] != nil || keys[childPlace + "[]"] != nil
                if childValue.scalar != nil, !takesMore { continue }
                if let allowed = keys[childPlace + "[]"] {
                    try checkList(childValue, allowed: allowed, place: childPlace, keys: keys)
                } else if let allowed = keys[childPlace] {
                    guard let childMapping = childValue.mapping else { throw fail("\(childPlace) must be a mapping of keys") }
                    try check(childMapping, allowed: allowed, place: childPlace + ".")
                    for (leaf, leafValue) in childMapping where leafValue.scalar == nil {
                        throw fail("\(childPlace).\(leaf.string ?? "?") must be a single value")
                    }
                } else {
                    throw fail("\(childPlace) must be a single value, not a list or mapping")
                }
            }
        }
    }

    /// A list of mappings, each with keys of `allowed`, each a single value or a list of them.
    private func checkList(_ value: Node, allowed: Set<String>, place: String, keys: Keys) throws(ConfigurationError) {
        let names = allowed.sorted().joined(separator: ", ")
        let named = place.contains(".") ? place : "'\(place)'"
        guard let list = value.sequence else { throw fail("\(named) must be a list of mappings (\(names))") }
        for (index, entry) in list.enumerated() {
            guard let mapping = entry.mapping else { throw fail("\(place)[\(index)] must be a mapping with \(names)") }
            try check(mapping, allowed: allowed, place: "\(place)[\(index)].")
            for (leaf, leafValue) in mapping where leafValue.scalar == nil {
                let leafName = leaf.string ?? "?"
                // Only the keys marked as lists of values (`peers[].urls[]`) take a list.
                guard keys["\(place)[].\(leafName)[]"] != nil, let values = leafValue.sequence,
                      values.allSatisfy({ $0.scalar != nil }) else {
                    throw fail("\(place)[\(index)].\(leafName) must be a single value")
                }
            }
        }
    }

    private func check(_ mapping: Node.Mapping, allowed: Set<String>, place: String) throws(ConfigurationError) {
        for key in mapping.keys.compactMap(\.string).sorted() where !allowed.contains(key) {
            throw fail("unknown key \(place)\(key); known keys here: \(allowed.sorted().joined(separator: ", "))")
        }
    }

    /// A bound as a person writes it: `3600`, `0.05`.
    private static func format(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? String(Int(value)) : String(value)
    }
}
