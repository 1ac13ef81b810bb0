/// How the entities and persistent properties of one model version correspond to another's,
/// as Core Data's lightweight migration matches them: a destination entity or property with a
/// Renaming ID (``EntityDescription/renamingIdentifier``) matches the source one of that name,
/// else the one of its own name. What is left over in the source was removed; what is left
/// over in the destination is new. Stores migrate their files by it, and replicas translate
/// change sets made with another version by it.
public struct ModelVersionMapping: Sendable {
    /// The version changes are read in.
    public let source: ManagedObjectModel
    /// The version they are written for.
    public let destination: ManagedObjectModel
    /// Destination entity name → source entity name, for entities that exist in both.
    public private(set) var entityMatches: [String: String] = [:]
    /// Destination entity name → (destination property → source property), for persistent
    /// properties that exist in both (inherited ones included).
    public private(set) var propertyMatches: [String: [String: String]] = [:]
    /// Two destination entities or properties that claim the same source one (a model error).
    public private(set) var conflicts: [String] = []

    private var destinationEntityOfSource: [String: String] = [:]
    private var destinationPropertyOfSource: [String: [String: String]] = [:]

    /// Matches `destination`'s entities and properties to `source`'s.
    public init(from source: ManagedObjectModel, to destination: ManagedObjectModel) {
        self.source = source
        self.destination = destination
        for entity in destination.entities.sorted(by: { $0.name < $1.name }) {
            guard let sourceName = [entity.renamingIdentifier, entity.name].compactMap({ $0 }).first(where: { source.entity(named: $0) != nil }) else {
                continue
            }
            if let other = destinationEntityOfSource[sourceName] {
                conflicts.append("entities '\(other)' and '\(entity.name)' both claim the old entity '\(sourceName)' (by name or Renaming ID)")
                continue
            }
            destinationEntityOfSource[sourceName] = entity.name
            entityMatches[entity.name] = sourceName
        }
        for (destinationName, sourceName) in entityMatches {
            guard let entity = destination.entity(named: destinationName), let previous = source.entity(named: sourceName) else { continue }
            var matches: [String: String] = [:]
            var byOld: [String: String] = [:]
            for property in entity.properties where property.isPersistent {
                let isAttribute = property.attribute != nil
                let found = [property.renamingIdentifier, property.name].compactMap { $0 }.first { name in
                    guard let old = previous.property(named: name), old.isPersistent else { return false }
                    return (old.attribute != nil) == isAttribute
                }
                guard let sourceProperty = found else { continue }
                if byOld[sourceProperty] != nil {
                    conflicts.append("entity '\(destinationName)': two properties claim the old property '\(sourceProperty)' (by name or Renaming ID)")
                    continue
                }
                byOld[sourceProperty] = property.name
                matches[property.name] = sourceProperty
            }
            propertyMatches[destinationName] = matches
            destinationPropertyOfSource[sourceName] = byOld
        }
        conflicts.sort()
    }

    /// The destination name of a source entity; nil when the destination removed it.
    public func destinationEntity(ofSource name: String) -> String? { destinationEntityOfSource[name] }

    /// The destination name of a source entity's persistent property; nil when removed.
    public func destinationProperty(ofSource property: String, inSourceEntity entity: String) -> String? {
        destinationPropertyOfSource[entity]?[property]
    }

    /// Source entities the destination removed.
    public var removedEntities: [String] {
        source.entities.map(\.name).filter { destinationEntityOfSource[$0] == nil }.sorted()
    }

    /// (destination entity, source property) pairs of persistent properties the destination removed.
    public var removedProperties: [(entity: String, property: String)] {
        entityMatches.sorted(by: { $0.key < $1.key }).flatMap { destinationName, sourceName -> [(entity: String, property: String)] in
            guard let previous = source.entity(named: sourceName) else { return [] }
            let kept = destinationPropertyOfSource[sourceName] ?? [:]
            return previous.properties.filter { $0.isPersistent && kept[$0.name] == nil }.map { (destinationName, $0.name) }
        }
    }
}
