import Foundation
import FerryStore

/// What applying a batch of change sets did.
public struct ApplyReport: Sendable, Hashable {
    /// Change sets applied (their changes merged into the store).
    public var applied = 0
    /// Change sets already taken in before (or twice in the batch).
    public var duplicate = 0
    /// Change sets held: a predecessor is missing, or another model version made them.
    public var waiting = 0
    /// Change sets kept but not applied, with a reason (`ferry conflicts list`).
    public var quarantined = 0
    /// The store's version vector afterwards.
    public var vector: VersionVector = [:]

    /// Creates an empty report.
    public init() {}

    /// `{"applied":N,"duplicate":N,"quarantined":N,"vector":{…},"waiting":N}`, the form `ferry apply` prints.
    public var json: String {
        JSONValue.sortedObject([
            "applied": .integer(Int64(applied)),
            "duplicate": .integer(Int64(duplicate)),
            "waiting": .integer(Int64(waiting)),
            "quarantined": .integer(Int64(quarantined)),
            "vector": .sortedObject(Dictionary(uniqueKeysWithValues: vector.map { ($0.key.uuidString, JSONValue.integer($0.value)) })),
        ]).text
    }
}

/// Why a batch of change sets was refused before anything was applied.
public enum ReplayError: Error, Sendable, CustomStringConvertible {
    /// A line is not a valid change set for this model.
    case malformed(line: Int, ChangeSetError)
    /// Other writers kept changing the same objects; nothing of this change set was applied.
    case busy(origin: UUID, sequence: Int64)
    /// Replay needs a SQLite store (it keeps the history and merge metadata).
    case notSQLite

    public var description: String {
        switch self {
        case .malformed(let line, let error): "line \(line): \(error.description); nothing was applied"
        case .notSQLite:
            "change sets can only be applied to a SQLite store (it keeps the history and the merge metadata)"
        case .busy(let origin, let sequence):
            "change set \(sequence) of \(origin.uuidString) kept meeting write conflicts with other writers; it was not applied and can be sent again"
        }
    }
}
