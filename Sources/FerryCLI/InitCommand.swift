import ArgumentParser
import Foundation
import FerryStore
import FerrySigning
import FerrySQLite
import FerrySync

struct InitCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "init",
        abstract: "Create a new store for a model and print its UUID.",
        discussion: """
            The store's Ed25519 signing key is written beside it (the store's path and `.key`, readable by its
            owner only); its public half is in `ferry state`.


            With --from-snapshot or --from-peer the store starts from a snapshot of another store (docs/SYNC.md,
            "Snapshots"): it holds what that store held, under the same object URIs, with a UUID of its own, and
            replicates from there. The snapshot is checked first (a sound Ferry store of this model, nothing but
            tables and indexes); nothing is left at --store when a check fails.
            """
    )

    @OptionGroup var options: StoreOptions
    @OptionGroup var content: InitialContent

    func run() async throws {
        let versions = try loadModelVersions(options.model)
        let model = versions.current
        let path = options.store
        guard !FileManager.default.fileExists(atPath: path) else {
            throw CLIError(.exists, "\(path) already exists; remove it or choose another path")
        }
        let keyPath = StoreSigningKey.defaultPath(forStore: path)
        guard !FileManager.default.fileExists(atPath: keyPath) else {
            throw CLIError(.exists, "\(keyPath) already exists (the signing key of an earlier store at \(path)?); move it away or choose another path")
        }
        if content.isEmpty {
            do {
                let store = try SQLiteStore(path: path, model: model)
                try writeSigningKey(to: keyPath)
                print(store.identifier.uuidString)
            } catch let error as CLIError {
                throw error
            } catch {
                throw CLIError(.store, error)
            }
            return
        }
        // Written beside the store and renamed into place once installed: never a half store at --store.
        let partial = "\(path).partial-\(UUID().uuidString)"
        defer { SQLiteStore.removeFiles(at: partial) }
        try await content.fetch(to: partial)
        let installed: SQLiteStore.InstalledSnapshot
        do {
            installed = try SQLiteStore.installSnapshot(at: partial, model: model, earlierModels: versions.earlier)
        } catch {
            throw CLIError(.snapshot, "the snapshot cannot start a store: \(error)", cause: error)
        }
        guard rename(partial, path) == 0 else {
            throw CLIError(.store, "cannot move the new store to \(path): \(String(cString: strerror(errno)))")
        }
        try writeSigningKey(to: keyPath)
        print(installed.identifier.uuidString)
        StandardError.write("started from a snapshot of \(installed.source.uuidString): \(installed.vector.values.reduce(0, +)) change sets taken in, " +
                            "\(installed.adoptedObjects) of its own objects named by its URIs")
    }

    /// Makes the new store's signing key and says where it is.
    private func writeSigningKey(to path: String) throws {
        let key = StoreSigningKey()
        do {
            try key.write(to: path)
        } catch {
            throw CLIError(.signingKey, "the store was made, but its signing key was not: \(error); `ferry run` makes one at start", cause: error)
        }
        StandardError.write("signing key: \(path) (public key \(key.publicKey))")
    }
}
