import ArgumentParser
import FerryStore

struct QueryCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "query",
        abstract: "Print the objects of an entity that match a predicate, one canonical JSON line each, or their count.",
        discussion: """
            PREDICATE uses Core Data's format syntax, e.g. "name BEGINSWITH[c] 'jo' AND manager != nil". \
            --sort takes keys separated by commas; a leading - sorts that key descending, a trailing [c] \
            sorts a string key ignoring case (name[c],-id). \
            A bad predicate exits 1 with the error and a caret under the offending place.
            """
    )

    @OptionGroup var options: StoreOptions

    @Argument(help: "The entity to query (subentities included).")
    var entity: String

    @Option(name: .customLong("where"), help: "A predicate in Core Data's format syntax.")
    var predicate: String?

    @Option(parsing: .unconditional, help: "Sort keys, comma-separated; prefix a key with - for descending, suffix [c] to ignore case.")
    var sort: String?

    @Option(help: "The most objects to print.")
    var limit: Int?

    @Option(help: "How many matches to skip.")
    var offset: Int?

    @Flag(help: "Print the number of matches instead of the objects.")
    var count = false

    func validate() throws {
        if let limit, limit < 0 { throw ValidationError("--limit must be 0 or more") }
        if let offset, offset < 0 { throw ValidationError("--offset must be 0 or more") }
    }

    func run() throws {
        let container = try options.openContainer()
        var request: FetchRequest
        do {
            request = try predicate.map { format throws(PredicateFormatError) in
                try FetchRequest(entityName: entity, format: format, model: container.model)
            } ?? FetchRequest(entityName: entity)
        } catch {
            throw CLIError(.argument, error.description, cause: error)
        }
        request.sortDescriptors = sortDescriptors()
        request.fetchLimit = limit ?? 0
        request.fetchOffset = offset ?? 0
        do {
            _ = try request.validated(in: container.model)
            if count {
                print(try container.store.count(request))
                return
            }
            let dump = StoreDump(store: container.store)
            for row in try container.store.fetchRows(request) { print(try dump.line(for: row)) }
        } catch {
            throw CLIError(.store, error)
        }
    }

    private func sortDescriptors() -> [FetchSortDescriptor] {
        (sort ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }.map { entry in
            var key = Substring(entry)
            let ascending = !key.hasPrefix("-")
            if !ascending { key = key.dropFirst() }
            let caseInsensitive = key.lowercased().hasSuffix("[c]")
            if caseInsensitive { key = key.dropLast(3) }
            return FetchSortDescriptor(String(key), ascending: ascending, caseInsensitive: caseInsensitive)
        }
    }
}
