import Foundation

/// Where a store stands: its UUID, its model, and what it has taken in. The
/// answer of `GET /v1/state` and what `ferry state` prints:
/// `{"model":…,"public_key":…,"store":…,"vector":{…}}` (`public_key` when the store's
/// signing key is known to whoever answers).
public struct HistoryState: Sendable, Hashable, Codable {
    /// The store's UUID.
    public var store: UUID
    /// The version hash of the store's model.
    public var modelHash: String
    /// For each origin, the highest sequence number taken in.
    public var vector: VersionVector
    /// The store's Ed25519 public key (base64), what its change sets are to be signed with; nil when not known here.
    public var publicKey: String?
    /// The keys the store holds for every origin, its own included, with their endorsements: what
    /// lets a peer follow a rotation it did not see happen. Empty when not known here.
    public var keys: [PublishedKey]
    /// Whether this is the state of a relay (`ferry relay`): change sets of every store of a fleet,
    /// kept in PostgreSQL, no model and no objects of its own (`store` names the relay's database,
    /// `modelHash` is empty). Peers long-poll a relay for new change sets instead of waiting for pushes.
    public var isRelay: Bool

    /// A state.
    public init(store: UUID, modelHash: String, vector: VersionVector, publicKey: String? = nil, keys: [PublishedKey] = [], isRelay: Bool = false) {
        self.isRelay = isRelay
        self.store = store
        self.modelHash = modelHash
        self.vector = vector
        self.publicKey = publicKey
        self.keys = keys
    }

    enum CodingKeys: String, CodingKey {
        case store, modelHash = "model", vector, publicKey = "public_key", keys, isRelay = "relay"
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        store = try container.decode(UUID.self, forKey: .store)
        modelHash = try container.decode(String.self, forKey: .modelHash)
        vector = try container.decode(WireVector.self, forKey: .vector).vector
        publicKey = try container.decodeIfPresent(String.self, forKey: .publicKey)
        keys = try container.decodeIfPresent([PublishedKey].self, forKey: .keys) ?? []
        isRelay = try container.decodeIfPresent(Bool.self, forKey: .isRelay) ?? false
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(store.uuidString, forKey: .store)
        try container.encode(modelHash, forKey: .modelHash)
        try container.encode(WireVector(vector), forKey: .vector)
        try container.encodeIfPresent(publicKey, forKey: .publicKey)
        if !keys.isEmpty { try container.encode(keys, forKey: .keys) }
        if isRelay { try container.encode(true, forKey: .isRelay) }
    }

    /// The state as JSON text: the same text as ``WireJSON/encode(_:)`` gives (`WireMessageTests`),
    /// written without `JSONEncoder`, whose set-up costs more than the message on a path every
    /// push takes.
    public var json: String {
        var fields: [String: JSONValue] = ["store": .string(store.uuidString), "model": .string(modelHash),
                                           "vector": ChangeSetCodec.vectorValue(vector)]
        if let publicKey { fields["public_key"] = .string(publicKey) }
        if isRelay { fields["relay"] = .bool(true) }
        if !keys.isEmpty {
            fields["keys"] = .array(keys.map { key in
                var entry: [String: JSONValue] = ["origin": .string(key.origin.uuidString), "key": .string(key.key), "from": .integer(key.from)]
                if let endorsement = key.endorsement { entry["endorsement"] = .string(endorsement) }
                return .sortedObject(entry)
            })
        }
        return JSONValue.sortedObject(fields).text
    }
}
