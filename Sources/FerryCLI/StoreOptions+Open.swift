import Foundation
import FerryModel
import FerryStore
import FerrySigning
import FerrySQLite

extension StoreOptions {
    /// Reads the model and opens the existing store (never creates one).
    func openContainer() throws -> PersistentContainer {
        let store = try openSQLiteStore()
        do {
            return try PersistentContainer(store: store)
        } catch {
            throw CLIError(.store, error)
        }
    }

    /// Reads the model (every version of its bundle) and opens the existing SQLite store: a
    /// store made with an earlier version of the bundle migrates to the current one.
    func openSQLiteStore() throws -> SQLiteStore {
        let versions = try loadModelVersions(model)
        // The store's key, where the configuration (or the default) puts it; the store reports a key it cannot use at its first save.
        let keyPath = signingKeyPath
        let key = FileManager.default.fileExists(atPath: keyPath) ? try? StoreSigningKey(contentsOf: keyPath) : nil
        let progress = TerminalProgress(label: "ferry: migrating the store to the model's current version")
        defer { progress.finish() }
        do {
            return try SQLiteStore(path: store, model: versions.current,
                                   options: .init(createIfMissing: false, earlierModels: versions.earlier,
                                                  migrationProgress: { step, number, total in progress.show("step \(number) of \(total), \(step)") },
                                                  signingKey: key))
        } catch {
            throw CLIError(.store, error)
        }
    }
}

/// Reads a model file, turning its error into a one-line CLI error.
func loadModel(_ path: String) throws -> ManagedObjectModel {
    try loadModelVersions(path).current
}

/// Reads every version of a model file, turning its error into a one-line CLI error.
func loadModelVersions(_ path: String) throws -> ModelVersions {
    do {
        return try XcodeModelReader.readVersions(at: path)
    } catch {
        throw CLIError(.model, error)
    }
}
