import ArgumentParser
import Foundation
import FerryStore
import FerrySigning
import FerrySQLite

/// `ferry key`: the store's own signing key.
struct KeyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "key",
        abstract: "Manage the store's signing key.",
        subcommands: [Rotate.self]
    )

    struct Rotate: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "rotate",
            abstract: "Move the store to a new signing key, endorsed by its current one.",
            discussion: """
                Makes a new key, signs with the current key that the new one signs the store's change sets from its \
                next sequence number on, records both in the store, and puts the new key file in place of the old one \
                (kept beside it as KEYFILE.retired-TIME). Peers take the new key from the endorsement, through any \
                peer that holds it. Stop the daemon first and start it again after: a process holding the old key \
                records nothing more with it. A key that may have been stolen is also revoked on every store \
                (`ferry trust revoke`, or trust.revoked in the configuration).
                """
        )

        @OptionGroup var options: StoreOptions

        func run() throws {
            let keyPath = options.signingKeyPath
            let current: StoreSigningKey
            do { current = try StoreSigningKey(contentsOf: keyPath) } catch { throw CLIError(.signingKey, "\(error)", cause: error) }
            let store = try options.openSQLiteStore()
            guard case .key(let signer) = store.signing, signer.publicKey == current.publicKey else {
                throw CLIError(.signingKey, "\(keyPath) is not the key this store signs with; rotation needs the store's current key")
            }
            let next = StoreSigningKey()
            let pending = keyPath + ".new"
            do {
                try next.write(to: pending)
            } catch {
                throw CLIError(.signingKey, "\(error) (a rotation cut short leaves it: remove it and run again)", cause: error)
            }
            do {
                let first = (try store.historyState().vector[store.identifier] ?? 0) + 1
                let endorsement = try current.signature(of: ChangeSetSignature.rotationMessage(origin: store.identifier, firstSequence: first,
                                                                                                 publicKey: next.publicKey))
                try store.recordOriginKey(OriginKey(origin: store.identifier, publicKey: next.publicKey, firstSequence: first,
                                                    endorsement: endorsement, source: .own))
                let retired = keyPath + ".retired-" + Date().formatted(.iso8601).replacingOccurrences(of: ":", with: "")
                guard rename(keyPath, retired) == 0, rename(pending, keyPath) == 0 else {
                    throw CLIError(.signingKey, "the store now signs with \(next.publicKey), whose key is at \(pending), " +
                                   "but it could not be moved to \(keyPath) (\(String(cString: strerror(errno)))); move it there by hand")
                }
                print(next.publicKey)
                StandardError.write("the store signs its change sets from \(first) on with \(next.publicKey); the old key is at \(retired)")
            } catch let error as CLIError {
                throw error
            } catch {
                unlink(pending)
                throw CLIError(.store, error)
            }
        }
    }
}

/// `ferry trust`: the keys a store holds for other origins.
struct TrustCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "trust",
        abstract: "List, pin and revoke the keys a store trusts (docs/SYNC.md, \"Signed change sets\").",
        discussion: """
            Keys pinned in the daemon's configuration (trust.keys, trust.revoked) apply on top of these. \
            A running daemon takes changes made here on its next scheduled pull (sync.pull_interval).
            """,
        subcommands: [List.self, Add.self, Revoke.self]
    )

    /// `--origin`'s store UUID.
    static func storeIdentifier(_ text: String) throws -> UUID {
        guard let origin = UUID(uuidString: text) else { throw CLIError(.argument, "--origin must be a store UUID; found '\(text)'") }
        return origin
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "list", abstract: "Print the keys the store holds, one JSON line each.")

        @OptionGroup var options: StoreOptions

        func run() throws {
            let store = try options.openSQLiteStore()
            for key in try store.originKeys() {
                var fields: [String: JSONValue] = ["origin": .string(key.origin.uuidString), "key": .string(key.publicKey),
                                                   "from": .integer(key.firstSequence), "source": .string(key.source.rawValue)]
                if key.origin == store.identifier { fields["own"] = .bool(true) }
                if let revoked = key.revokedAfter {
                    fields["revoked_after"] = .string(revoked.date.formatted(.iso8601))
                }
                print(JSONValue.sortedObject(fields).text)
            }
        }
    }

    struct Add: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "add",
            abstract: "Pin another store's public key (shown by its `ferry state`): how a new store joins a fleet whose stores do not all talk to it.")

        @OptionGroup var options: StoreOptions
        @Option(help: "The store's UUID.") var origin: String
        @Option(help: "Its Ed25519 public key, base64.") var key: String
        @Option(help: "The first of its sequence numbers the key signs (earlier ones were recorded before it had a key).") var from: Int64 = 1

        func run() throws {
            let originID = try TrustCommand.storeIdentifier(origin)
            guard VerifyingKey(base64: key) != nil else {
                throw CLIError(.argument, "--key must be an Ed25519 public key in base64 (44 characters, as `ferry state` shows it)")
            }
            guard from >= 1 else { throw CLIError(.argument, "--from must be a sequence number ≥ 1") }
            let store = try options.openSQLiteStore()
            guard originID != store.identifier else { throw CLIError(.argument, "\(origin) is this store; its own key is managed with `ferry key rotate`") }
            do {
                try store.recordOriginKey(OriginKey(origin: originID, publicKey: key, firstSequence: from, source: .pinned))
            } catch {
                throw CLIError(.store, error)
            }
        }
    }

    struct Revoke: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "revoke",
            abstract: "Refuse change sets signed with a key from a time on (a stolen key; its owner rotates to a new one).")

        @OptionGroup var options: StoreOptions
        @Option(help: "The store's UUID.") var origin: String
        @Option(help: "The public key, base64.") var key: String
        @Option(help: "From when its signatures are refused: an ISO 8601 time, or now.") var after: String = "now"

        func run() throws {
            let originID = try TrustCommand.storeIdentifier(origin)
            let date: Date
            if after == "now" {
                date = Date()
            } else if let parsed = try? Date(after, strategy: .iso8601) {
                date = parsed
            } else {
                throw CLIError(.argument, "--after must be an ISO 8601 time such as 2026-11-24T12:00:00Z, or now; found '\(after)'")
            }
            let store = try options.openSQLiteStore()
            guard var held = try store.originKeys().first(where: { $0.origin == originID && $0.publicKey == key }) else {
                throw CLIError(.argument, "the store holds no key \(key) for \(origin) (`ferry trust list`); " +
                               "a key pinned in the daemon's configuration is revoked there (trust.revoked)")
            }
            held.revokedAfter = HybridTimestamp.wall(date)
            do {
                try store.recordOriginKey(held)
            } catch {
                throw CLIError(.store, error)
            }
        }
    }
}
