import Foundation

/// Where a store stands: its UUID, its model, and what it has taken in. The
/// answer of `GET /v1/state` and what `ferry state` prints:
/// `{"model":…,"store":…,"vector":{…}}`.
public struct HistoryState: Sendable, Hashable, Codable {
    /// The store's UUID.
    public var store: UUID
    /// The version hash of the store's model.
    public var modelHash: String
    /// For each origin, the highest sequence number taken in.
    public var vector: VersionVector

    /// A state.
    public init(store: UUID, modelHash: String, vector: VersionVector) {
        self.store = store
        self.modelHash = modelHash
        self.vector = vector
    }

    enum CodingKeys: String, CodingKey {
        case store, modelHash = "model", vector
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        store = try container.decode(UUID.self, forKey: .store)
        modelHash = try container.decode(String.self, forKey: .modelHash)
        vector = try container.decode(WireVector.self, forKey: .vector).vector
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(store.uuidString, forKey: .store)
        try container.encode(modelHash, forKey: .modelHash)
        try container.encode(WireVector(vector), forKey: .vector)
    }

    /// The state as JSON text: the same text as ``WireJSON/encode(_:)`` gives (`WireMessageTests`),
    /// written without `JSONEncoder`, whose set-up costs more than the message on a path every
    /// push takes.
    public var json: String {
        JSONValue.sortedObject(["store": .string(store.uuidString), "model": .string(modelHash),
                                "vector": ChangeSetCodec.vectorValue(vector)]).text
    }
}
