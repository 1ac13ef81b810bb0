import Foundation

/// Writes a model as the `contents` XML Xcode keeps in a `.xcdatamodel` folder: everything
/// ``XcodeModelReader`` reads, so that reading the text back gives an equal model. A store
/// keeps each model version it has known in this form (``ManagedObjectModel`` has no other
/// serialized form).
public enum XcodeModelWriter {
    /// The `contents` XML of `model`, entities sorted by name as Xcode sorts them.
    public static func contents(of model: ManagedObjectModel) -> String {
        var lines = [#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?>"#]
        var modelAttributes: [(String, String)] = [("type", "com.apple.IDECoreDataModeler.DataModel"), ("documentVersion", "1.0")]
        if let version = model.versionIdentifier { modelAttributes.append(("userDefinedModelVersionIdentifier", version)) }
        lines.append(open("model", modelAttributes))
        for entity in model.entities.sorted(by: { $0.name < $1.name }) {
            lines.append(contentsOf: self.entity(entity).map { "    " + $0 })
        }
        for template in model.fetchRequestTemplates.values.sorted(by: { $0.name < $1.name }) {
            var attributes = [("name", template.name), ("entity", template.entityName)]
            if let predicate = template.predicate { attributes.append(("predicateString", predicate)) }
            if template.fetchLimit > 0 { attributes.append(("fetchLimit", String(template.fetchLimit))) }
            lines.append("    " + element("fetchRequest", attributes))
        }
        for (name, members) in model.configurations.sorted(by: { $0.key < $1.key }) {
            lines.append("    " + open("configuration", [("name", name)]))
            for member in members { lines.append("        " + element("memberEntity", [("name", member)])) }
            lines.append("    </configuration>")
        }
        lines.append(contentsOf: userInfo(model.userInfo).map { "    " + $0 })
        lines.append("</model>")
        return lines.joined(separator: "\n") + "\n"
    }

    private static func entity(_ entity: EntityDescription) -> [String] {
        var attributes: [(String, String)] = [("name", entity.name)]
        if let className = entity.className { attributes.append(("representedClassName", className)) }
        if let parent = entity.parentName { attributes.append(("parentEntity", parent)) }
        if entity.isAbstract { attributes.append(("isAbstract", "YES")) }
        if let modifier = entity.versionHashModifier { attributes.append(("versionHashModifier", modifier)) }
        if let renamed = entity.renamingIdentifier { attributes.append(("elementID", renamed)) }
        var lines = [open("entity", attributes)]
        for attribute in entity.ownAttributes { lines.append("    " + self.attribute(attribute)) }
        for relationship in entity.ownRelationships { lines.append("    " + self.relationship(relationship)) }
        for fetched in entity.ownFetchedProperties {
            lines.append("    " + open("fetchedProperty", [("name", fetched.name), ("optional", "YES")]))
            var request = [("name", "fetchedPropertyFetchRequest"), ("entity", fetched.entityName)]
            if let predicate = fetched.predicate { request.append(("predicateString", predicate)) }
            lines.append("        " + element("fetchRequest", request))
            lines.append(contentsOf: userInfo(fetched.userInfo).map { "        " + $0 })
            lines.append("    </fetchedProperty>")
        }
        if !entity.uniquenessConstraints.isEmpty {
            lines.append("    <uniquenessConstraints>")
            for constraint in entity.uniquenessConstraints {
                lines.append("        <uniquenessConstraint>")
                for name in constraint { lines.append("            " + element("constraint", [("value", name)])) }
                lines.append("        </uniquenessConstraint>")
            }
            lines.append("    </uniquenessConstraints>")
        }
        lines.append(contentsOf: userInfo(entity.userInfo).map { "    " + $0 })
        lines.append("</entity>")
        return lines
    }

    private static func attribute(_ attribute: AttributeDescription) -> String {
        var attributes: [(String, String)] = [("name", attribute.name)]
        if attribute.isOptional { attributes.append(("optional", "YES")) }
        if attribute.isTransient { attributes.append(("transient", "YES")) }
        attributes.append(("attributeType", attribute.type.xcodeName))
        if let derivation = attribute.derivation {
            attributes.append(("derived", "YES"))
            attributes.append(("derivationExpression", derivation.expression))
        }
        let isDate = attribute.type == .date
        if let value = attribute.defaultValue { attributes.append((isDate ? "defaultDateTimeInterval" : "defaultValueString", value.modelString)) }
        if let minimum = attribute.validation.minimum { attributes.append((isDate ? "minDateTimeInterval" : "minValueString", minimum.modelString)) }
        if let maximum = attribute.validation.maximum { attributes.append((isDate ? "maxDateTimeInterval" : "maxValueString", maximum.modelString)) }
        if let pattern = attribute.validation.regularExpression { attributes.append(("regularExpressionString", pattern)) }
        if attribute.isIndexed { attributes.append(("indexed", "YES")) }
        if let transformer = attribute.valueTransformerName { attributes.append(("valueTransformerName", transformer)) }
        if attribute.preservesValueInHistoryOnDeletion { attributes.append(("preserveAfterDeletion", "YES")) }
        if let modifier = attribute.versionHashModifier { attributes.append(("versionHashModifier", modifier)) }
        if let renamed = attribute.renamingIdentifier { attributes.append(("elementID", renamed)) }
        return withUserInfo("attribute", attributes, attribute.userInfo)
    }

    private static func relationship(_ relationship: RelationshipDescription) -> String {
        var attributes: [(String, String)] = [("name", relationship.name)]
        if relationship.isOptional { attributes.append(("optional", "YES")) }
        if relationship.isTransient { attributes.append(("transient", "YES")) }
        if relationship.isToMany {
            attributes.append(("toMany", "YES"))
            if relationship.isOrdered { attributes.append(("ordered", "YES")) }
            if relationship.minCount > 0 { attributes.append(("minCount", String(relationship.minCount))) }
            if relationship.maxCount > 0 { attributes.append(("maxCount", String(relationship.maxCount))) }
        } else {
            attributes.append(("maxCount", "1"))
        }
        attributes.append(("deletionRule", relationship.deleteRule.xcodeName))
        attributes.append(("destinationEntity", relationship.destinationEntityName))
        if let inverse = relationship.inverseName {
            attributes.append(("inverseName", inverse))
            attributes.append(("inverseEntity", relationship.destinationEntityName))
        }
        if let modifier = relationship.versionHashModifier { attributes.append(("versionHashModifier", modifier)) }
        if let renamed = relationship.renamingIdentifier { attributes.append(("elementID", renamed)) }
        return withUserInfo("relationship", attributes, relationship.userInfo)
    }

    // MARK: - XML

    private static func withUserInfo(_ name: String, _ attributes: [(String, String)], _ info: [String: String]) -> String {
        guard !info.isEmpty else { return element(name, attributes) }
        return ([open(name, attributes)] + userInfo(info).map { "    " + $0 } + ["</\(name)>"]).joined(separator: "\n    ")
    }

    private static func userInfo(_ info: [String: String]) -> [String] {
        guard !info.isEmpty else { return [] }
        return ["<userInfo>"] + info.sorted(by: { $0.key < $1.key }).map { "    " + element("entry", [("key", $0.key), ("value", $0.value)]) } + ["</userInfo>"]
    }

    private static func open(_ name: String, _ attributes: [(String, String)]) -> String {
        "<\(name)" + attributes.map { " \($0.0)=\"\(escaped($0.1))\"" }.joined() + ">"
    }

    private static func element(_ name: String, _ attributes: [(String, String)]) -> String {
        "<\(name)" + attributes.map { " \($0.0)=\"\(escaped($0.1))\"" }.joined() + "/>"
    }

    /// An attribute value as XML text: markup characters and the blanks an XML reader would
    /// otherwise normalize to spaces, as character references.
    private static func escaped(_ text: String) -> String {
        var result = ""
        result.reserveCapacity(text.utf8.count)
        for character in text.unicodeScalars {
            switch character {
            case "&": result += "&amp;"
            case "<": result += "&lt;"
            case ">": result += "&gt;"
            case "\"": result += "&quot;"
            case "\n": result += "&#10;"
            case "\r": result += "&#13;"
            case "\t": result += "&#9;"
            default: result.unicodeScalars.append(character)
            }
        }
        return result
    }
}
