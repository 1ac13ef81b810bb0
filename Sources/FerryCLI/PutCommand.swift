import ArgumentParser
import FerryStore

extension MergePolicy: ExpressibleByArgument {}

struct PutCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "put",
        abstract: "Apply insert/update/delete operations to a store, one save per JSON array.",
        discussion: """
            FILE (or - for standard input) holds a JSON array of operations (one save) or JSON \
            lines, each such an array (one save per line). Operations:
              {"op":"insert","entity":E,"ref":R,"values":{...}}
              {"op":"update","object":REF_OR_URI,"values":{...}}
              {"op":"delete","object":REF_OR_URI}
            The whole input is checked before anything is written. Prints a JSON object mapping \
            each ref to its permanent URI, in the input's order. A save refused by validation or a Deny rule writes \
            nothing, stops the run, prints its errors as JSON on standard error, and exits 1; \
            the saves before it stay written. With uniqueness constraints in the model, \
            --merge-policy says what a save that duplicates a unique key does (Core Data's \
            merge policies): error (the default: the save is refused, naming the constraint and \
            both objects), store-trump, object-trump (an upsert), overwrite, or rollback.
            """
    )

    @OptionGroup var options: StoreOptions

    @Option(name: .long, help: "What a save that duplicates a unique key does: error, store-trump, object-trump, overwrite or rollback.")
    var mergePolicy: MergePolicy = .error

    @Argument(help: "The operations file, or - for standard input.")
    var file: String

    func run() throws {
        let container = try options.openContainer()
        let outcome: BatchApplier.Outcome
        do {
            let progress = TerminalProgress(label: "ferry put: saves committed")
            outcome = try BatchApplier(container: container, mergePolicy: mergePolicy).apply(text: try InputFile.read(file)) { saves, total in
                if total > 1, saves % 10 == 0 || saves == total { progress.update(saves, of: total) }
            }
            progress.finish()
        } catch let error as InterchangeError {
            StandardError.write(JSONValue.object([("error", .string("invalid input")), ("message", .string(error.description))]).text)
            throw ExitCode.failure
        }
        Self.printRefs(outcome.insertedObjects)
        if let failure = outcome.failure {
            StandardError.write(SaveFailureReport.json(failure.error, save: failure.save, committedSaves: outcome.committedSaves,
                                                       refs: failure.refsByObjectURI).text)
            throw ExitCode.failure
        }
    }
}

extension PutCommand {
    /// `{"ref":"URI",…}`, in the input's order, written without building one value per ref
    /// (a put of W1's rows names 100,000).
    static func printRefs(_ refs: [(ref: String, objectID: ObjectID)]) {
        var output = BufferedOutput()
        output.append(byte: UInt8(ascii: "{"))
        for (index, entry) in refs.enumerated() {
            if index > 0 { output.append(byte: UInt8(ascii: ",")) }
            output.appendQuoted(entry.ref)
            output.append(byte: UInt8(ascii: ":"))
            output.appendQuoted(entry.objectID)
        }
        output.line("}")
        output.flush()
    }
}

/// The JSON `ferry put` prints on standard error when a save fails.
enum SaveFailureReport {
    static func json(_ error: SaveError, save: Int, committedSaves: Int, refs: [String: String]) -> JSONValue {
        var members: [(String, JSONValue)] = [
            ("error", .string(kind(error))),
            ("code", .integer(Int64(error.code))),
            ("save", .integer(Int64(save))),
            ("committedSaves", .integer(Int64(committedSaves))),
        ]
        switch error {
        case .validationFailed(let failures):
            members.append(("errors", .array(failures.map { failure in
                .object([
                    ("code", .integer(Int64(failure.code.rawValue))),
                    ("name", .string(failure.code.name)),
                    ("entity", .string(failure.entityName)),
                    ("object", .string(failure.objectURI)),
                    ("ref", refs[failure.objectURI].map(JSONValue.string) ?? .null),
                    ("key", failure.key.map(JSONValue.string) ?? .null),
                    ("message", .string(failure.message)),
                ])
            })))
        case .conflict, .mergeConflict:
            members.append(("objects", .array(error.conflictedObjectURIs.map(JSONValue.string))))
            members.append(("message", .string(error.description)))
        case .constraintConflict(let conflicts):
            members.append(("conflicts", .array(conflicts.map { conflict in
                .object([
                    ("constraint", .string(conflict.constraint.description)),
                    ("object", .string(conflict.objectURI)),
                    ("ref", refs[conflict.objectURI].map(JSONValue.string) ?? .null),
                    ("conflictingObject", .string(conflict.conflictingObjectURI)),
                    ("conflictingRef", refs[conflict.conflictingObjectURI].map(JSONValue.string) ?? .null),
                    ("values", .array(conflict.values.map(JSONValue.string))),
                ])
            })))
            members.append(("message", .string(error.description)))
        case .storeFailed(let failure):
            members.append(("message", .string(failure.message)))
        }
        return .object(members)
    }

    private static func kind(_ error: SaveError) -> String {
        switch error {
        case .validationFailed: "validation failed"
        case .conflict, .mergeConflict: "conflict"
        case .constraintConflict: "uniqueness constraint"
        case .storeFailed: "store failure"
        }
    }
}
