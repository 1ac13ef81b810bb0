import Foundation
import FerryModel

extension InMemoryStore {
    /// This store's content migrated to another version of its model, by the rules of Core Data's
    /// lightweight migration that `SQLiteStore` applies when a file is opened with a new version
    /// (``LightweightMigration``; docs/STORE.md, "Migration"): entities and properties matched by
    /// Renaming ID or name, new ones added (required ones at their default), removed ones dropped,
    /// widened and converted types, derived attributes computed. The new store has this one's
    /// identifier, history and merge metadata (renamed as the SQLite store renames them), and reads
    /// change sets of this store's version translated. This store is left as it was.
    /// (Removals need no list of earlier versions here: this store's model is the source version.)
    /// - Throws: ``StoreError/incompatibleModel(path:differences:)`` naming every difference no rule covers.
    public func migrated(to model: ManagedObjectModel) throws(StoreError) -> InMemoryStore {
        let migration = LightweightMigration(from: self.model, to: model)
        guard migration.problems.isEmpty else {
            throw StoreError.incompatibleModel(path: "in-memory store \(identifier.uuidString)", differences: migration.problems)
        }
        let versions = migration.versions
        let old = state.withLock { $0 }
        var next = State(history: old.history.migrated(by: migration, modelHash: model.versionHash))
        func id(_ id: ObjectID) -> ObjectID? {
            guard let entity = versions.destinationEntity(ofSource: id.entityName) else { return nil }
            return ObjectID(entityName: entity, kind: id.kind)
        }
        let retyped = Dictionary(migration.retypedAttributes.map { ($0.attribute, $0.type) }, uniquingKeysWith: { first, _ in first })
        let defaults = Dictionary(migration.defaultsToFill.map { ($0.attribute, $0.value) }, uniquingKeysWith: { first, _ in first })
        // Rows: each kept object's values by the new entity's property indexes.
        for (oldID, row) in old.rows {
            guard let newID = id(oldID), let entity = model.entity(named: newID.entityName),
                  let previous = self.model.entity(named: oldID.entityName) else { continue }
            let matches = versions.propertyMatches[entity.name] ?? [:]
            var attributes = [AttributeValue?](repeating: nil, count: entity.properties.count)
            var toOne = [ObjectID?](repeating: nil, count: entity.properties.count)
            for (index, property) in entity.properties.enumerated() {
                let reference = LightweightMigration.PropertyReference(entity: entity.name, property: property.name)
                guard let oldName = matches[property.name], let oldIndex = previous.propertyIndex(named: oldName) else {
                    attributes[index] = defaults[reference]
                    continue
                }
                switch property {
                case .attribute:
                    var value = row.attributes[oldIndex]
                    if let type = retyped[reference] { value = value?.converted(to: type) }
                    attributes[index] = value ?? defaults[reference]
                case .relationship(let relationship) where !relationship.isToMany:
                    toOne[index] = row.toOne[oldIndex].flatMap(id)
                case .relationship(let relationship):
                    // A to-one made to-many: its destination becomes the one member.
                    guard migration.toManyConversions.contains(where: { entity.ancestry.contains($0.entity) && $0.property == relationship.name }),
                          let target = row.toOne[oldIndex].flatMap(id),
                          case .joinTable(let key, true) = model.storage(of: relationship, in: entity) else { continue }
                    next.joins[key, default: []].insert(JoinPair(canonical: newID, other: target))
                }
            }
            next.rows[newID] = RowSnapshot(objectID: newID, version: row.version, attributes: attributes, toOne: toOne)
        }
        for (root, key) in old.maxPrimaryKey {
            guard let renamed = versions.destinationEntity(ofSource: root) else { continue }
            next.maxPrimaryKey[renamed] = key
        }
        // Join tables: each old canonical relationship's pairs, under the new canonical side (a rename may swap it).
        for (key, pairs) in old.joins {
            guard let entityName = versions.destinationEntity(ofSource: key.entityName), let entity = model.entity(named: entityName),
                  let relationshipName = versions.destinationProperty(ofSource: key.relationshipName, inSourceEntity: key.entityName),
                  let relationship = entity.relationship(named: relationshipName),
                  case .joinTable(let newKey, let sourceIsCanonical) = model.storage(of: relationship, in: entity) else { continue }
            for pair in pairs {
                guard let canonical = id(pair.canonical), let other = id(pair.other) else { continue }
                next.joins[newKey, default: []].insert(sourceIsCanonical ? JoinPair(canonical: canonical, other: other)
                                                                          : JoinPair(canonical: other, other: canonical))
            }
        }
        for (owner, relationships) in old.order {
            guard let newOwner = id(owner) else { continue }
            for (name, members) in relationships {
                guard let renamed = versions.destinationProperty(ofSource: name, inSourceEntity: owner.entityName) else { continue }
                next.order[newOwner, default: [:]][renamed] = members.compactMap(id)
            }
        }
        let migrated = InMemoryStore(model: model, identifier: identifier, earlierModels: [self.model] + earlierModels, state: next)
        migrated.deriveStoredValues(migration.derivationsToCompute)
        return migrated
    }

    /// Computes derived attributes for every stored object of their entities, as a save computes them.
    private func deriveStoredValues(_ references: [LightweightMigration.PropertyReference]) {
        guard !references.isEmpty else { return }
        state.withLock { state in
            for reference in references {
                guard let entity = model.entity(named: reference.entity), let index = entity.propertyIndex(named: reference.property),
                      let attribute = entity.attribute(named: reference.property), let form = attribute.derivation?.form else { continue }
                for (id, row) in state.rows where model.entity(named: id.entityName)?.isKind(of: entity.name) == true {
                    var updated = row
                    updated.attributes[index] = derive(form, type: attribute.type, of: row, in: state)
                    state.rows[id] = updated
                }
            }
        }
    }

    private func derive(_ form: Derivation.Form, type: AttributeType, of row: RowSnapshot, in state: State) -> AttributeValue? {
        guard let entity = model.entity(named: row.objectID.entityName) else { return nil }
        func value(_ path: Derivation.KeyPath) -> AttributeValue? {
            guard let relationship = path.relationship else {
                return entity.propertyIndex(named: path.attribute).flatMap { row.attributes[$0] }
            }
            guard let hop = entity.propertyIndex(named: relationship), let target = row.toOne[hop].flatMap({ state.rows[$0] }),
                  let source = model.entity(named: target.objectID.entityName)?.propertyIndex(named: path.attribute) else { return nil }
            return target.attributes[source]
        }
        switch form {
        case .value(let path): return value(path)
        case .uppercase(let path), .lowercase(let path), .canonical(let path):
            guard case .string(let text)? = value(path) else { return nil }
            return form.transform(text).map(AttributeValue.string)
        case .count(let relationship):
            return DerivedSum(integer: Int64(members(of: row.objectID, relationship: relationship, in: state).count)).value(as: type)
        case .sum(let relationship, let attribute):
            var sum = DerivedSum()
            for member in members(of: row.objectID, relationship: relationship, in: state) {
                guard let memberRow = state.rows[member], let index = model.entity(named: member.entityName)?.propertyIndex(named: attribute) else { continue }
                sum.add(memberRow.attributes[index])
            }
            return sum.value(as: type)
        case .now:
            return nil  // (never asked: a new now() attribute stays empty until the object's next save)
        }
    }
}
