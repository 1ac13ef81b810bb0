import Foundation
import FerryModel

/// The canonical logical dump `ferry dump` prints: one JSON object per object,
/// `{"entity":…,"uri":…,"values":{…}}`, sorted by URI, keys sorted, every
/// persistent property present (null when empty), to-one relationships as
/// URIs, to-many as arrays of URIs (sorted, or in order for ordered ones).
/// Objects are named by origin URI (the URI they got in the store where they
/// were inserted), so two replicas with the same logical content dump
/// byte-identical text.
public struct StoreDump {
    /// The store to read.
    public let store: any PersistentStore

    /// Creates a dump of `store`.
    public init(store: any PersistentStore) {
        self.store = store
    }

    /// Calls `emit` with each line (without a newline), in URI order.
    public func write(_ emit: (String) throws -> Void) throws {
        for line in try entries() { try emit(line.text) }
    }

    /// Each object's line with the origin URI it names, in URI order.
    public func entries() throws -> [(uri: String, text: String)] {
        var lines: [(uri: String, text: String)] = []
        let model = store.model
        let origins = try store.originURIs()
        for entity in model.entities where !entity.isAbstract {
            var offset = 0
            let batch = 1000
            while true {
                let request = FetchRequest(entityName: entity.name, fetchLimit: batch, fetchOffset: offset, includesSubentities: false)
                let rows = try store.fetchRows(request)
                for row in rows {
                    lines.append((origins[row.objectID] ?? row.objectID.uriString, try line(for: row, entity: entity, origins: origins)))
                }
                if rows.count < batch { break }
                offset += batch
            }
        }
        lines.sort { $0.uri.utf8.lexicographicallyPrecedes($1.uri.utf8) }
        return lines
    }

    /// The canonical line for one row (the form `ferry dump` and `ferry query` print).
    public func line(for row: RowSnapshot) throws -> String {
        guard let entity = store.model.entity(named: row.objectID.entityName) else {
            throw QueryError.unknownEntity(row.objectID.entityName)
        }
        return try line(for: row, entity: entity, origins: try store.originURIs())
    }

    private func line(for row: RowSnapshot, entity: EntityDescription, origins: [ObjectID: String]) throws -> String {
        func uri(_ id: ObjectID) -> String { origins[id] ?? id.uriString }
        var values: [String: JSONValue] = [:]
        for (index, property) in entity.properties.enumerated() where property.isPersistent {
            switch property {
            case .attribute:
                values[property.name] = AttributeJSON.encode(row.attributes[index])
            case .relationship(let relationship) where !relationship.isToMany:
                values[property.name] = row.toOne[index].map { .string(uri($0)) } ?? .null
            case .relationship(let relationship):
                var uris = try store.relatedObjectIDs(of: row.objectID, relationship: relationship.name).map(uri)
                if !relationship.isOrdered { uris.sort { $0.utf8.lexicographicallyPrecedes($1.utf8) } }
                values[property.name] = .array(uris.map(JSONValue.string))
            }
        }
        return JSONValue.sortedObject([
            "entity": .string(entity.name),
            "uri": .string(uri(row.objectID)),
            "values": .sortedObject(values),
        ]).text
    }
}
