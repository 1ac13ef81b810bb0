import FerryModel

/// A change set made with an earlier model version, rewritten for a later one by the rules a
/// store's migration follows (``ModelVersionMapping``): renamed properties under their new
/// names, removed entities' changes and removed properties' values dropped, values converted
/// to changed types, and a nil given to an attribute that became required with a default (or an
/// insert's missing attribute that is new, required and has a default) taking that default —
/// what the object would hold had it been migrated with the store. Its origin,
/// sequence, clock and dependencies stay: it is the same change set, read in another version.
package enum ChangeSetTranslation {
    /// Why a change set cannot be read in the later version (it then waits, held and visible).
    package struct Refusal: FerryError, Sendable {
        /// A translation fails one way: a value that cannot take its new type.
        package enum Code: String, Hashable, Sendable {
            /// A value does not fit the type the later version gives its attribute.
            case valueDoesNotFit
        }

        package let description: String
        package var code: Code { .valueDoesNotFit }
    }

    /// `changeSet`, decoded with `mapping.source`, as `mapping.destination` would have written it.
    /// An object's URI names its entity: across an entity rename, every URI of an object of the
    /// renamed entity is rewritten too (``ObjectURIComponents/renamingEntity(of:_:)``), as each store's migration rewrites
    /// the URIs it keeps.
    /// - Throws: ``Refusal`` when a value cannot take its new type.
    package static func translate(_ changeSet: ChangeSet, by mapping: ModelVersionMapping) throws(Refusal) -> ChangeSet {
        let renamesEntities = mapping.entityMatches.contains { $0.key != $0.value }
        let uri = { (text: String) -> String in
            renamesEntities ? ObjectURIComponents.renamingEntity(of: text) { mapping.destinationEntity(ofSource: $0) } : text
        }
        var translated = changeSet
        translated.modelHash = mapping.destination.versionHash
        translated.changes = []
        translated.changes.reserveCapacity(changeSet.changes.count)
        for change in changeSet.changes {
            guard let entityName = mapping.destinationEntity(ofSource: change.entity),
                  let entity = mapping.destination.entity(named: entityName) else { continue }  // the entity was removed
            var rewritten = change
            rewritten.entity = entityName
            rewritten.uri = uri(change.uri)
            rewritten.mergedInto = change.mergedInto.map(uri)
            /// The new name of a property of this change's entity (nil: removed).
            func renamed(_ property: String) -> String? { mapping.destinationProperty(ofSource: property, inSourceEntity: change.entity) }
            rewritten.values = [:]
            for (key, value) in change.values {
                guard let name = renamed(key) else { continue }
                switch (value, entity.attribute(named: name)) {
                case (_, let description?) where !description.isReplicated:
                    continue  // derived here: every replica computes it
                case (.attribute(let attribute), let description?):
                    guard let converted = attribute.converted(to: description.type) else {
                        throw Refusal(description: "\(entityName).\(name): the value \(attribute) does not fit \(description.type.xcodeName)")
                    }
                    rewritten.values[name] = .attribute(converted)
                case (.null, let description?) where !description.isOptional && description.defaultValue != nil:
                    rewritten.values[name] = description.defaultValue.map(ChangeValue.attribute) ?? .null
                case (.object(let target), _):
                    rewritten.values[name] = .object(uri(target))
                default:
                    rewritten.values[name] = value
                }
            }
            if change.kind == .insert {
                // New in this version and required with a default: what a migrated object got.
                let matched = mapping.propertyMatches[entityName] ?? [:]
                for attribute in entity.attributes where attribute.isReplicated && !attribute.isOptional && matched[attribute.name] == nil {
                    if rewritten.values[attribute.name] == nil, let value = attribute.defaultValue { rewritten.values[attribute.name] = .attribute(value) }
                }
            }
            rewritten.added = renamedKeys(change.added, renamed).mapValues { $0.map(uri) }
            rewritten.removed = renamedKeys(change.removed, renamed).mapValues { $0.map(uri) }
            rewritten.positions = renamedKeys(change.positions, renamed).mapValues { positions in
                Dictionary(positions.map { (uri($0.key), $0.value) }, uniquingKeysWith: { first, _ in first })
            }
            translated.changes.append(rewritten)
        }
        return translated
    }

    private static func renamedKeys<Value>(_ dictionary: [String: Value], _ renamed: (String) -> String?) -> [String: Value] {
        var result: [String: Value] = [:]
        for (key, value) in dictionary {
            if let name = renamed(key) { result[name] = value }
        }
        return result
    }
}
