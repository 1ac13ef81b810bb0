import ArgumentParser
import Foundation
import FerryStore
import FerrySigning
import FerrySQLite
import FerrySync

struct StateCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "state",
        abstract: "Print the store's UUID, model hash and version vector as one JSON line.",
        discussion: #"Output: {"model":HASH,"public_key":BASE64,"store":UUID,"vector":{UUID:SEQ,…}}. "# +
            #"The vector says, per origin store, the last change set taken in; "# +
            #"public_key is the store's signing key's public half (left out when its key file is not there)."#
    )

    @Option(name: .long, help: "The store file (SQLite).")
    var store: String?

    @Option(name: .long, help: "A daemon configuration file (YAML) to take the store from, in place of --store.")
    var config: String?

    @Flag(name: .long, help: "Print only the version vector (the form `ferry history --after` takes).")
    var vector = false

    func validate() throws {
        guard (store == nil) != (config == nil) else { throw ValidationError("give either --store or --config") }
    }

    func run() throws {
        let configured = try config.map { try loadConfiguration($0).store }
        let path = configured?.path ?? store ?? ""
        do {
            let state = try SQLiteStore.historyState(atPath: path, keyFile: configured?.signingKey)
            print(vector ? ChangeSetCodec.encode(state.vector) : state.json)
        } catch {
            throw CLIError(.store, error)
        }
    }
}

struct HistoryCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "history",
        abstract: "Print the change sets the store has and a vector does not cover, one JSON line each.",
        discussion: "The lines come in the order the store took them in, which `ferry apply` can apply as is, " +
            "each written as it is read (one state of the history, whatever is saved meanwhile). See docs/PROTOCOL.md.",
        subcommands: [PurgeCommand.self]
    )

    @OptionGroup var options: StoreOptions

    @Option(name: .long, help: #"A version vector {"STORE-UUID": SEQ, …}; change sets it covers are left out (default: none)."#)
    var after: String?

    func run() throws {
        let vector: VersionVector
        do {
            vector = try after.map { text throws(ChangeSetError) in try ChangeSetCodec.decodeVector(text) } ?? [:]
        } catch {
            throw CLIError(.argument, "--after: \(error.description)", cause: error)
        }
        let store = try options.openSQLiteStore()
        // Each line is written as it is read, a large one a piece at a time: a history larger than
        // memory prints with a line's worth held, not the whole of it (docs/RELIABILITY.md).
        var output = BufferedOutput()
        defer { output.flush() }  // (also what was read before an error)
        do {
            try store.forEachChangeSetLine(after: vector) { line in try output.line(line) }
        } catch {
            throw CLIError(.store, error)
        }
    }
}

/// `ferry history purge`: what the daemon does every `history.purge_interval`, by hand.
struct PurgeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "purge",
        abstract: "Delete the change sets every peer has, and forget deletes past the tombstone horizon; print what went.",
        discussion: """
            Give one --acknowledged file per peer this store replicates with: the output of `ferry state`
            (or `ferry state --vector`) on that peer, saying what it has taken in. Change sets every file
            covers and made more than --retention seconds ago are deleted; quarantined change sets and
            those left invalid stay. With --tombstone-horizon, tombstones of deletes made longer ago are
            forgotten (and aliases of duplicates merged before then), and from then on change sets that do
            not know everything made before that time are refused (their store must start again from a
            copy); the horizon needs this store to hold everything each --acknowledged peer held, so
            that nothing made without knowing a forgotten delete can still arrive. Without any
            --acknowledged file no change set is deleted.
            Output: {"forgotten_aliases":N,"forgotten_tombstones":N,"purged_change_sets":N}. See docs/SYNC.md, "Bounded history".
            """
    )

    @OptionGroup var options: StoreOptions

    @Option(name: .long, help: "A file with a peer's state or version vector (repeat for every peer).")
    var acknowledged: [String] = []

    @Option(name: .long, help: "Keep change sets made in the last SECONDS (default 0: none kept for their age).")
    var retention: Double = 0

    @Option(name: .long, help: "Forget the deletes made more than SECONDS ago (default: keep every tombstone).")
    var tombstoneHorizon: Double?

    func validate() throws {
        guard retention >= 0 else { throw ValidationError("--retention must be 0 or more seconds") }
        if let tombstoneHorizon {
            guard tombstoneHorizon >= retention else {
                throw ValidationError("--tombstone-horizon must be at least --retention: " +
                                      "a delete must be remembered as long as the change set that made it is kept")
            }
        }
    }

    func run() throws {
        var vectors: [(file: String, vector: VersionVector)] = []
        for file in acknowledged {
            let text: String
            do {
                text = try String(contentsOfFile: file, encoding: .utf8)
            } catch {
                throw CLIError(.input, "--acknowledged \(file): cannot read it (\(error.localizedDescription))", cause: error)
            }
            vectors.append((file, try Self.vector(in: text, file: file)))
        }
        let store = try options.openSQLiteStore()
        do {
            if tombstoneHorizon != nil {
                // Forgetting a delete is safe only once nothing made without knowing it can still arrive:
                // everything each peer held when it acknowledged must be here already.
                let local = try store.historyState().vector
                for (file, vector) in vectors {
                    let missing = vector.filter { local[$0.key, default: 0] < $0.value }
                    guard missing.isEmpty else {
                        let list = missing.keys.map { "\($0.uuidString) through \(missing[$0] ?? 0)" }.sorted().joined(separator: ", ")
                        throw CLIError(.unsafe, "--tombstone-horizon: the peer of --acknowledged \(file) holds change sets this store has not taken in "
                                       + "(\(list)); they may not know deletes the horizon would forget, and would then be refused. "
                                       + "Sync with that peer first, then purge.")
                    }
                }
            }
            let report = try store.purgeHistory(PurgePolicy.at(Date(), acknowledged: vectors.map(\.vector), retention: retention,
                                                               horizon: tombstoneHorizon))
            print(JSONValue.sortedObject(["purged_change_sets": .integer(Int64(report.changeSets)),
                                          "forgotten_tombstones": .integer(Int64(report.tombstones)),
                                          "forgotten_aliases": .integer(Int64(report.aliases))]).text)
        } catch {
            throw CLIError(.store, error)
        }
    }

    /// The vector in a peer's `ferry state` output (or the vector alone, as `ferry state --vector` prints it).
    static func vector(in text: String, file: String) throws -> VersionVector {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        if let state = try? JSONValue.parse(trimmed), let vector = state["vector"] {
            do {
                return try ChangeSetCodec.decodeVector(vector.text)
            } catch {
                throw CLIError(.input, "--acknowledged \(file): its \"vector\" is not a version vector: \(error.description)", cause: error)
            }
        }
        do {
            return try ChangeSetCodec.decodeVector(trimmed)
        } catch {
            throw CLIError(.input, "--acknowledged \(file): not the output of `ferry state` nor a version vector: \(error.description)", cause: error)
        }
    }
}

struct ApplyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "apply",
        abstract: "Apply change sets (one JSON line each) from a file or standard input.",
        discussion: """
            Every line is checked before anything is applied; a malformed file is rejected whole (exit 1). \
            Prints {"applied":N,"duplicate":N,"quarantined":N,"vector":{…},"waiting":N}. Change sets whose \
            predecessors are missing, or made with another model version, are held in the store and applied \
            when they can be; quarantined ones are listed by `ferry conflicts list`.
            """
    )

    @OptionGroup var options: StoreOptions

    @Argument(help: "A file of change-set lines, or - for standard input.")
    var file: String

    func run() throws {
        let text = try InputFile.read(file)
        let store = try options.openSQLiteStore()
        do {
            let report = try ReplayEngine(store: store).apply(lines: text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init))
            print(report.json)
        } catch {
            throw CLIError(.store, error)
        }
    }
}

struct ConflictsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "conflicts",
        abstract: "List or retry quarantined change sets.",
        subcommands: [List.self, Retry.self]
    )

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print each quarantined change set as {\"origin\",\"seq\",\"reason\"}, one per line, then the held ones, " +
                "then those applied although they left the store breaking a rule of the model (status left-invalid)."
        )

        @OptionGroup var options: StoreOptions

        func run() throws {
            let store = try options.openSQLiteStore()
            do {
                let listed = try store.quarantinedChangeSets().map { ("quarantined", $0) } + store.heldChangeSets().map { ("waiting", $0) }
                    + store.changeSetsLeftInvalid().map { ("left-invalid", $0) }
                for (status, entry) in listed {
                    print(JSONValue.sortedObject(["status": .string(status), "origin": .string(entry.origin.uuidString),
                                                  "seq": .integer(entry.sequence), "reason": .string(entry.reason)]).text)
                }
            } catch {
                throw CLIError(.store, error)
            }
        }
    }

    struct Retry: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Apply the quarantined change sets again (after a fix); print how many applied and how many stay quarantined."
        )

        @OptionGroup var options: StoreOptions

        func run() throws {
            let store = try options.openSQLiteStore()
            do {
                let report = try ReplayEngine(store: store).retryQuarantined()
                print(JSONValue.sortedObject(["applied": .integer(Int64(report.applied)), "quarantined": .integer(Int64(report.quarantined))]).text)
            } catch {
                throw CLIError(.store, error)
            }
        }
    }
}

struct OriginsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "origins",
        abstract: "List the origins this store takes change sets from, or remove a bogus one.",
        discussion: """
            A peer with a valid token can send change sets under origins no store has (each is kept,
            replicated, and carried in every vector). `remove` forgets one origin's change sets here:
            its history, its place in the vector, the held ones; the objects they made stay. Run it
            on every replica (stop its daemon first), or peers that still hold the origin send it back.
            """,
        subcommands: [List.self, Remove.self]
    )

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print each origin as {\"origin\",\"seq\",\"own\"}, one per line.")

        @OptionGroup var options: StoreOptions

        func run() throws {
            let store = try options.openSQLiteStore()
            do {
                for (origin, sequence) in try store.historyState().vector.sorted(by: { $0.key.uuidString < $1.key.uuidString }) {
                    print(JSONValue.sortedObject(["origin": .string(origin.uuidString), "seq": .integer(sequence),
                                                  "own": .bool(origin == store.identifier)]).text)
                }
            } catch {
                throw CLIError(.store, error)
            }
        }
    }

    struct Remove: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Forget every change set of ORIGIN here; print how many went.")

        @OptionGroup var options: StoreOptions
        @Argument(help: "The origin's store UUID.") var origin: String

        func run() throws {
            guard let uuid = UUID(uuidString: origin) else { throw CLIError(.argument, "'\(origin)' is not a store UUID") }
            let store = try options.openSQLiteStore()
            do {
                print(JSONValue.sortedObject(["removed": .integer(Int64(try store.removeOrigin(uuid)))]).text)
            } catch {
                throw CLIError(.store, error)
            }
        }
    }
}
