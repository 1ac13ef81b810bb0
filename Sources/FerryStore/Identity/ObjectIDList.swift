import Foundation

/// The IDs of a fetch, kept compactly: a row number and an entity number per object (about ten
/// bytes an object, against some fifty for an array of ``ObjectID``), so that a fetch of a million
/// objects can be held while its objects are read in batches (``FetchedResults``).
public struct ObjectIDList: RandomAccessCollection, Sendable {
    private enum Storage: Sendable {
        /// Permanent IDs of one store.
        case compact(store: UUID, entityNames: [String], entities: [UInt16], keys: [Int64])
        /// Any IDs (temporary ones, or several stores' — rare for a fetch).
        case ids([ObjectID])
    }

    private let storage: Storage

    /// The IDs of one store's rows: entity numbers index `entityNames`.
    package init(store: UUID, entityNames: [String], entities: [UInt16], keys: [Int64]) {
        precondition(entities.count == keys.count, "one entity number per key")
        storage = .compact(store: store, entityNames: entityNames, entities: entities, keys: keys)
    }

    /// A list of `ids`, compact when they are permanent IDs of one store.
    public init(_ ids: [ObjectID]) {
        guard let store = ids.first?.storeIdentifier, ids.allSatisfy({ $0.storeIdentifier == store }) else {
            storage = .ids(ids)
            return
        }
        var names: [String] = []
        var numbers: [String: UInt16] = [:]
        var entities: [UInt16] = []
        var keys: [Int64] = []
        entities.reserveCapacity(ids.count)
        keys.reserveCapacity(ids.count)
        for id in ids {
            // (A permanent ID has a row number; were one without it, the list keeps the IDs as they are rather than lose it.)
            guard let key = id.primaryKey else { storage = .ids(ids); return }
            let number: UInt16
            if let known = numbers[id.entityName] {
                number = known
            } else {
                guard names.count < Int(UInt16.max) else { storage = .ids(ids); return }
                number = UInt16(names.count)
                numbers[id.entityName] = number
                names.append(id.entityName)
            }
            entities.append(number)
            keys.append(key)
        }
        storage = .compact(store: store, entityNames: names, entities: entities, keys: keys)
    }

    public var startIndex: Int { 0 }

    public var endIndex: Int {
        switch storage {
        case .compact(_, _, _, let keys): keys.count
        case .ids(let ids): ids.count
        }
    }

    public subscript(position: Int) -> ObjectID {
        switch storage {
        case .compact(let store, let names, let entities, let keys):
            .permanent(entityName: names[Int(entities[position])], store: store, primaryKey: keys[position])
        case .ids(let ids):
            ids[position]
        }
    }
}
