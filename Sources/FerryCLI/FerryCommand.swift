import ArgumentParser
import FerryStore
import FerrySigning

/// The `ferry` command line: operator and test tools for Ferry stores.
public struct FerryCommand: AsyncParsableCommand {
    /// The command's name, help and subcommands.
    public static let configuration = CommandConfiguration(
        commandName: "ferry",
        abstract: "Core Data-style object-graph stores on SQLite, and their replication.",
        discussion: """
            Exit status: 0 on success, 1 when the operation failed (invalid model, store, input, \
            or a save refused by validation or a Deny rule), 64 for a usage error.
            """,
        subcommands: [ModelCommand.self, InitCommand.self, SnapshotCommand.self, PutCommand.self, DumpCommand.self, QueryCommand.self, OriginsCommand.self,
                      StateCommand.self, HistoryCommand.self, ApplyCommand.self, ConflictsCommand.self, KeyCommand.self, TrustCommand.self,
                      RunCommand.self, SyncNowCommand.self, StatusCommand.self, RelayCommand.self]
    )

    /// Creates the command (argument parsing fills it in).
    public init() {}
}

/// The options every store command shares: `--store` and `--model`, or
/// `--config` naming a daemon configuration whose `store.path` and `store.model` are used.
struct StoreOptions: ParsableArguments {
    @Option(name: .customLong("store"), help: "The store file (SQLite).")
    var storeOption: String?

    @Option(name: .customLong("model"), help: "The model: a .xcdatamodeld folder, a .xcdatamodel folder, or its contents file.")
    var modelOption: String?

    @Option(name: .long, help: "A daemon configuration file (YAML) to take the store and model from, in place of --store and --model.")
    var config: String?

    func validate() throws {
        if let config {
            guard storeOption == nil, modelOption == nil else {
                throw ValidationError("give either --config or --store and --model, not both")
            }
            _ = try loadConfiguration(config)
        } else if storeOption == nil || modelOption == nil {
            throw ValidationError("give --store and --model (or --config with a daemon configuration)")
        }
    }

    /// The store path (from the configuration when `--config` is given).
    var store: String {
        if let config, let configuration = try? loadConfiguration(config) { return configuration.store.path }
        return storeOption ?? ""
    }

    /// The store's signing key file: the configuration's `store.signing_key` when `--config` is
    /// given, else beside the store.
    var signingKeyPath: String {
        if let config, let configuration = try? loadConfiguration(config) { return configuration.store.signingKey }
        return StoreSigningKey.defaultPath(forStore: store)
    }

    /// The model path (from the configuration when `--config` is given).
    var model: String {
        if let config, let configuration = try? loadConfiguration(config) { return configuration.store.model }
        return modelOption ?? ""
    }
}
