import ArgumentParser
import FerryStore
import FerrySQLite

struct DumpCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "dump",
        abstract: "Print every object as one canonical JSON line, sorted by URI.",
        discussion: "Stores with the same logical content print byte-identical dumps, so replicas compare with diff."
    )

    @OptionGroup var options: StoreOptions

    func run() throws {
        let container = try options.openContainer()
        var output = BufferedOutput()
        let progress = TerminalProgress(label: "ferry dump: objects written")
        defer {
            output.flush()
            progress.finish()
        }
        do {
            if let store = container.store as? SQLiteStore {
                // Streamed from SQL in URI order: memory does not grow with the store.
                try store.streamDump(progress: { progress.update($0) }) { output.line($0) }
            } else {
                try StoreDump(store: container.store).write { output.line($0) }
            }
        } catch {
            throw CLIError(.store, error)
        }
    }
}
