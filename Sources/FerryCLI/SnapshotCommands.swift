import ArgumentParser
import Foundation
import FerryStore
import FerrySQLite
import FerrySync

/// `ferry snapshot`: a consistent snapshot of a store in a file, for `ferry init --from-snapshot`.
struct SnapshotCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "snapshot",
        abstract: "Write a consistent snapshot of a store to a new file (for ferry init --from-snapshot).",
        discussion: """
            The snapshot is the store's SQLite file as one read transaction saw it: objects, their clocks,
            tombstones and aliases within the horizon, the version vector, the change sets still kept, the
            model's metadata. A daemon may keep running meanwhile. See docs/SYNC.md, "Snapshots".
            """
    )

    @OptionGroup var options: StoreOptions

    @Argument(help: "The snapshot file to write (it must not exist).")
    var output: String

    func run() throws {
        let store = try options.openSQLiteStore()
        do {
            try store.writeSnapshot(to: output)
        } catch {
            throw CLIError(.snapshot, error)
        }
        let state = try? store.historyState()
        StandardError.write("wrote a snapshot of \(store.identifier.uuidString) to \(output) (\(state?.vector.values.reduce(0, +) ?? 0) change sets taken in)")
    }
}

/// Where `ferry init` takes a new store's content from: nothing, a snapshot file, or a peer.
struct InitialContent: ParsableArguments {
    @Option(name: .long, help: "Start from this snapshot file (written by ferry snapshot); the file is copied, not moved.")
    var fromSnapshot: String?

    @Option(name: .long, help: "Start from a snapshot of the peer at this URL (GET /v1/snapshot).")
    var fromPeer: String?

    @Option(name: .long, help: "With --from-peer: a file holding the token to present to the peer.")
    var tokenFile: String?

    @Option(name: .long, help: "With --from-peer over HTTPS: check the peer's certificate against this CA file (PEM), not the system trust store.")
    var caFile: String?

    func validate() throws {
        if fromSnapshot != nil, fromPeer != nil { throw ValidationError("give --from-snapshot or --from-peer, not both") }
        if fromPeer != nil, tokenFile == nil { throw ValidationError("--from-peer needs --token-file: the file with the token the peer accepts") }
        if fromPeer == nil, tokenFile != nil || caFile != nil { throw ValidationError("--token-file and --ca-file go with --from-peer") }
    }

    /// Writes the snapshot to `path`: copied from `--from-snapshot`, or downloaded from `--from-peer`.
    func fetch(to path: String) async throws {
        if let fromSnapshot {
            do {
                try FileManager.default.copyItem(atPath: fromSnapshot, toPath: path)
            } catch {
                throw CLIError(.snapshot, "--from-snapshot \(fromSnapshot): cannot copy it (\(error.localizedDescription))", cause: error)
            }
        } else if let fromPeer, let tokenFile {
            guard let url = URL(string: fromPeer), ["http", "https"].contains(url.scheme ?? "") else {
                throw CLIError(.argument, "--from-peer \(fromPeer): not an http:// or https:// URL")
            }
            let token: String
            do {
                token = try PeerClient.token(inFile: tokenFile)
            } catch {
                throw CLIError(.input, "--token-file \(tokenFile): cannot read one token from it", cause: error)
            }
            var trust = PeerTrust.systemStore
            if let caFile {
                do {
                    trust = .certificateAuthority(try CertificateAuthority(file: caFile))
                } catch {
                    throw CLIError(.input, "--ca-file: \(error)", cause: error)
                }
            }
            do {
                try await PeerClient(baseURL: url, token: token, timeout: 60, trust: trust).downloadSnapshot(to: path)
            } catch {
                throw CLIError(.snapshot, "--from-peer \(fromPeer): \(error)", cause: error)
            }
        }
    }

    var isEmpty: Bool { fromSnapshot == nil && fromPeer == nil }
}
