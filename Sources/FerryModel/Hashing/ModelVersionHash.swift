/// Version hashes: what two models must share for their stores and change
/// sets to be interchangeable.
///
/// As in Core Data, an entity's hash covers only what changes the meaning of
/// stored data: the entity's name, parent, abstractness and its persistent
/// properties (attribute name, type, optionality; relationship name,
/// destination, inverse, cardinality, order, optionality and delete rule —
/// delete rules are included because replay applies them), plus any
/// `versionHashModifier`. Validation rules, defaults, indexes, class names,
/// userInfo, fetch templates and transient properties do not change a hash.
extension ManagedObjectModel {
    /// A 64-hex-digit hash per entity name.
    public var entityVersionHashes: [String: String] {
        Dictionary(uniqueKeysWithValues: entities.map { ($0.name, SHA256.hexDigest(Array(canonicalDescription(of: $0).utf8))) })
    }

    /// The model's version hash (64 hex digits): a digest of the sorted entity hashes.
    public var versionHash: String {
        let hashes = entityVersionHashes
        let text = hashes.keys.sorted().map { "\($0)=\(hashes[$0] ?? "")" }.joined(separator: "\n")
        return SHA256.hexDigest(Array(text.utf8))
    }

    func canonicalDescription(of entity: EntityDescription) -> String {
        var lines = ["entity \(entity.name)"]
        if let parent = entity.parentName, let parentEntity = self.entity(named: parent) {
            lines.append("parent \(canonicalDescription(of: parentEntity))")
        }
        lines.append("abstract \(entity.isAbstract)")
        if let modifier = entity.versionHashModifier { lines.append("modifier \(modifier)") }
        let own = entity.ownAttributes.filter { !$0.isTransient }.sorted { $0.name < $1.name }
        for attribute in own {
            var line = "attribute \(attribute.name) \(attribute.type.xcodeName) optional=\(attribute.isOptional)"
            if let modifier = attribute.versionHashModifier { line += " modifier=\(modifier)" }
            // What a derived attribute computes is part of what its stored values mean.
            if let derivation = attribute.derivation { line += " derived=\(derivation.expression)" }
            lines.append(line)
        }
        for relationship in entity.ownRelationships.filter({ !$0.isTransient }).sorted(by: { $0.name < $1.name }) {
            var line = "relationship \(relationship.name) -> \(relationship.destinationEntityName)"
            line += " inverse=\(relationship.inverseName ?? "-") toMany=\(relationship.isToMany)"
            line += " ordered=\(relationship.isOrdered) optional=\(relationship.isOptional)"
            line += " delete=\(relationship.deleteRule.xcodeName)"
            if let modifier = relationship.versionHashModifier { line += " modifier=\(modifier)" }
            lines.append(line)
        }
        return lines.joined(separator: "\n")
    }
}
