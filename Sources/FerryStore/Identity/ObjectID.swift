import Foundation

/// The identity of one object: temporary until its first save, then permanent.
///
/// A permanent ID has the URI form `x-coredata://<STORE-UUID>/<Entity>/p<N>`,
/// where N is the row's primary key; a temporary one has
/// `x-coredata:///<Entity>/t<UUID>`. IDs are values: compare and hash them freely,
/// and send them between tasks.
public struct ObjectID: Hashable, Sendable, CustomStringConvertible {
    enum Kind: Hashable, Sendable {
        /// A context's UUID and a counter, written `t<UUID><counter>` as Core Data does.
        case temporary(UUID, Int)
        case permanent(store: UUID, primaryKey: Int64)
    }

    /// The concrete entity of the object.
    public let entityName: String
    let kind: Kind

    init(entityName: String, kind: Kind) {
        self.entityName = entityName
        self.kind = kind
    }

    /// A temporary ID: unique per context (`namespace`) and insert (`counter`).
    static func temporary(entityName: String, namespace: UUID, counter: Int) -> ObjectID {
        ObjectID(entityName: entityName, kind: .temporary(namespace, counter))
    }

    public static func == (lhs: ObjectID, rhs: ObjectID) -> Bool {
        lhs.kind == rhs.kind && lhs.entityName == rhs.entityName
    }

    /// Hashes only the row number or counter: cheap, and equal IDs still hash equally.
    public func hash(into hasher: inout Hasher) {
        switch kind {
        case .temporary(_, let counter): hasher.combine(counter)
        case .permanent(_, let key): hasher.combine(key)
        }
    }

    /// A permanent ID in the store `store` for row `primaryKey`.
    /// Stores call this; applications get IDs from objects or URIs.
    public static func permanent(entityName: String, store: UUID, primaryKey: Int64) -> ObjectID {
        ObjectID(entityName: entityName, kind: .permanent(store: store, primaryKey: primaryKey))
    }

    /// Whether the object has not been saved yet (Core Data's `isTemporaryID`).
    public var isTemporaryID: Bool {
        if case .temporary = kind { return true }
        return false
    }

    /// The store's UUID for a permanent ID, nil for a temporary one.
    public var storeIdentifier: UUID? {
        if case .permanent(let store, _) = kind { return store }
        return nil
    }

    /// The row's primary key (`Z_PK`) for a permanent ID, nil for a temporary one.
    public var primaryKey: Int64? {
        if case .permanent(_, let key) = kind { return key }
        return nil
    }

    /// The URI form, e.g. `x-coredata://96EBBFDE-…/Person/p2`.
    public var uriString: String {
        switch kind {
        case .temporary(let uuid, let counter): "x-coredata:///\(entityName)/t\(uuid.uuidString)\(counter)"
        case .permanent(let store, let key): "x-coredata://\(store.uuidString)/\(entityName)/p\(key)"
        }
    }

    /// The URI form as a URL.
    public var uriRepresentation: URL {
        // Entity names are identifiers and UUIDs are hex, so the string is always a valid URL.
        URL(string: uriString) ?? URL(fileURLWithPath: "/")
    }

    public var description: String { uriString }
}

/// The parts of an object URI, before they are checked against a store
/// (a temporary ID has no store and no primary key).
package struct ObjectURIComponents: Equatable {
    package var store: UUID?
    package var entityName: String
    package var primaryKey: Int64?

    /// Splits `x-coredata://<UUID>/<Entity>/p<N>` (or the temporary form).
    package static func parse(_ text: String) -> Result<ObjectURIComponents, ObjectURIError> {
        let scheme = "x-coredata://"
        guard text.hasPrefix(scheme) else {
            return .failure(.malformed(text, "it must start with x-coredata://"))
        }
        let parts = text.dropFirst(scheme.count).split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 3 else {
            return .failure(.malformed(text, "expected x-coredata://<STORE-UUID>/<Entity>/p<N>"))
        }
        let (host, entity, reference) = (parts[0], parts[1], parts[2])
        guard !entity.isEmpty else { return .failure(.malformed(text, "the entity name is empty")) }
        if host.isEmpty {
            guard reference.hasPrefix("t"), reference.count > 37, UUID(uuidString: String(reference.dropFirst().prefix(36))) != nil else {
                return .failure(.malformed(text, "a URI without a store UUID must be a temporary ID t<UUID><N>"))
            }
            return .success(ObjectURIComponents(store: nil, entityName: entity, primaryKey: nil))
        }
        guard let store = UUID(uuidString: host) else {
            return .failure(.malformed(text, "'\(host)' is not a store UUID"))
        }
        guard reference.hasPrefix("p"), let key = Int64(reference.dropFirst()), key > 0 else {
            return .failure(.malformed(text, "the last part must be p<N> with N a positive row number"))
        }
        return .success(ObjectURIComponents(store: store, entityName: entity, primaryKey: key))
    }
}

/// Why an object URI could not be turned into an ``ObjectID``.
public enum ObjectURIError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The text is not an object URI.
    case malformed(String, String)
    /// The URI names another store.
    case foreignStore(String, expected: UUID)
    /// The URI names an entity the model does not have.
    case unknownEntity(String, entity: String)
    /// The URI is a temporary ID, which names nothing outside its context.
    case temporary(String)

    public var description: String {
        switch self {
        case .malformed(let uri, let reason):
            "'\(uri)' is not an object URI: \(reason)"
        case .foreignStore(let uri, let expected):
            "'\(uri)' belongs to another store; this store's UUID is \(expected.uuidString)"
        case .unknownEntity(let uri, let entity):
            "'\(uri)' names entity '\(entity)', which this model does not have"
        case .temporary(let uri):
            "'\(uri)' is a temporary ID of an unsaved object; only permanent URIs can be resolved"
        }
    }
}
