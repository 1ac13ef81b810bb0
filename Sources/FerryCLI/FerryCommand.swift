import ArgumentParser

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
        subcommands: [ModelCommand.self, InitCommand.self, PutCommand.self, DumpCommand.self, QueryCommand.self,
                      StateCommand.self, HistoryCommand.self, ApplyCommand.self, ConflictsCommand.self,
                      RunCommand.self, SyncNowCommand.self, StatusCommand.self]
    )

    /// Creates the command (argument parsing fills it in).
    public init() {}
}

/// The options every store command shares.
struct StoreOptions: ParsableArguments {
    @Option(name: .long, help: "The store file (SQLite).")
    var store: String

    @Option(name: .long, help: "The model: a .xcdatamodeld folder, a .xcdatamodel folder, or its contents file.")
    var model: String
}
