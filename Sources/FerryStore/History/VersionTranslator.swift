import FerryModel

/// Reads change sets made with an earlier version of a store's model in the store's version
/// (``ChangeSetTranslation``): a fleet upgrading one replica at a time keeps applying what the
/// replicas not yet upgraded send, and a store reads its own history after an upgrade. One per
/// store (its versions are fixed when it opens): the replay engine and the SQLite store share
/// this one reading.
package struct VersionTranslator: Sendable {
    /// How each earlier version maps to the model, by version hash.
    private let mappings: [String: ModelVersionMapping]
    /// To-many relationships that an earlier version had as to-one, as `Entity.relationship`
    /// (subentities included): a to-one write of that version replaces their members.
    package let replacedRelationships: Set<String>

    /// For `model` and the earlier versions `earlierModels` (the model itself is skipped).
    package init(model: ManagedObjectModel, earlierModels: [ManagedObjectModel]) {
        var mappings: [String: ModelVersionMapping] = [:]
        var replaced = Set<String>()
        for earlier in earlierModels where earlier.versionHash != model.versionHash {
            let mapping = ModelVersionMapping(from: earlier, to: model)
            mappings[earlier.versionHash] = mapping
            for entity in model.entities {
                guard let oldEntity = mapping.entityMatches[entity.name].flatMap(earlier.entity(named:)) else { continue }
                for relationship in entity.relationships where relationship.isToMany {
                    guard let oldName = mapping.propertyMatches[entity.name]?[relationship.name],
                          oldEntity.relationship(named: oldName)?.isToMany == false else { continue }
                    replaced.insert("\(entity.name).\(relationship.name)")
                }
            }
        }
        self.mappings = mappings
        self.replacedRelationships = replaced
    }

    /// What became of a line made with the model version `hash`.
    package enum Outcome {
        /// Read and translated.
        case translated(ChangeSet)
        /// A version the store knows, but the change set cannot be read in the store's (why).
        case refused(String)
        /// A version the store does not know (a later one, or a stranger): it waits.
        case unknownVersion
    }

    /// `line` (made with the model version `hash`) read in the store's version.
    package func translate(_ line: String, madeWith hash: String) -> Outcome {
        guard let mapping = mappings[hash] else { return .unknownVersion }
        do {
            guard case .changeSet(let changeSet) = try ChangeSetCodec.decode(line, model: mapping.source, versionHash: hash) else {
                return .unknownVersion
            }
            return .translated(try ChangeSetTranslation.translate(changeSet, by: mapping))
        } catch let refusal as ChangeSetTranslation.Refusal {
            return .refused(refusal.description)
        } catch {
            return .refused("it does not decode with its own model version: \(error)")
        }
    }

    /// `uri` as the earlier versions spelled it, where one renamed the object's entity.
    package func earlierSpellings(of uri: String) -> [String] {
        var spellings: Set<String> = []
        for mapping in mappings.values {
            let spelled = ObjectURIComponents.renamingEntity(of: uri) { entity in mapping.entityMatches[entity] }
            if spelled != uri { spellings.insert(spelled) }
        }
        return spellings.sorted()
    }
}
