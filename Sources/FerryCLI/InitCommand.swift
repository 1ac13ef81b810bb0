import ArgumentParser
import Foundation
import FerrySQLite

struct InitCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "init",
        abstract: "Create a new store for a model and print its UUID."
    )

    @OptionGroup var options: StoreOptions

    func run() throws {
        let model = try loadModel(options.model)
        guard !FileManager.default.fileExists(atPath: options.store) else {
            throw CLIError("\(options.store) already exists; remove it or choose another path")
        }
        do {
            let store = try SQLiteStore(path: options.store, model: model)
            print(store.identifier.uuidString)
        } catch {
            throw CLIError(error)
        }
    }
}
