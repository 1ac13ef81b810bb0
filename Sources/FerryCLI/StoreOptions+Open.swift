import FerryModel
import FerryStore
import FerrySQLite

extension StoreOptions {
    /// Reads the model and opens the existing store (never creates one).
    func openContainer() throws -> PersistentContainer {
        let model = try loadModel(model)
        do {
            let store = try SQLiteStore(path: store, model: model, options: .init(createIfMissing: false))
            return try PersistentContainer(store: store)
        } catch {
            throw CLIError(error)
        }
    }
}

/// Reads a model file, turning its error into a one-line CLI error.
func loadModel(_ path: String) throws -> ManagedObjectModel {
    do {
        return try XcodeModelReader.read(at: path)
    } catch {
        throw CLIError(error)
    }
}
