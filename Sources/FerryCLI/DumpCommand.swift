import ArgumentParser
import FerryStore

struct DumpCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "dump",
        abstract: "Print every object as one canonical JSON line, sorted by URI.",
        discussion: "Stores with the same logical content print byte-identical dumps, so replicas compare with diff."
    )

    @OptionGroup var options: StoreOptions

    func run() throws {
        let container = try options.openContainer()
        do {
            try StoreDump(store: container.store).write { print($0) }
        } catch {
            throw CLIError(error)
        }
    }
}
