import Foundation
import FerryStore

/// What applying a batch of change sets did: the answer of `POST /v1/changesets`
/// and what `ferry apply` prints, `{"applied":N,"duplicate":N,"quarantined":N,"vector":{…},"waiting":N}`.
public struct ApplyReport: Sendable, Hashable, Codable {
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

    enum CodingKeys: String, CodingKey {
        case applied, duplicate, waiting, quarantined, vector
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        applied = try container.decode(Int.self, forKey: .applied)
        duplicate = try container.decode(Int.self, forKey: .duplicate)
        waiting = try container.decode(Int.self, forKey: .waiting)
        quarantined = try container.decode(Int.self, forKey: .quarantined)
        vector = try container.decode(WireVector.self, forKey: .vector).vector
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(applied, forKey: .applied)
        try container.encode(duplicate, forKey: .duplicate)
        try container.encode(waiting, forKey: .waiting)
        try container.encode(quarantined, forKey: .quarantined)
        try container.encode(WireVector(vector), forKey: .vector)
    }

    /// The report as JSON text: the same text as ``WireJSON/encode(_:)`` gives (`WireMessageTests`),
    /// written without `JSONEncoder`, whose set-up costs more than the message on the answer to
    /// every push.
    public var json: String {
        JSONValue.sortedObject([
            "applied": .integer(Int64(applied)), "duplicate": .integer(Int64(duplicate)),
            "waiting": .integer(Int64(waiting)), "quarantined": .integer(Int64(quarantined)),
            "vector": ChangeSetCodec.vectorValue(vector),
        ]).text
    }
}
