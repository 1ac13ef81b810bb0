import Foundation

/// Turns the element tree of a `contents` file into a model.
struct XcodeModelInterpreter {
    let file: String

    /// Elements that only describe layout or storage tuning; skipped.
    private static let ignoredElements: Set<String> = ["elements", "fetchIndex", "compoundIndexes"]

    func model(from root: XMLNode) throws(ModelError) -> ManagedObjectModel {
        guard root.name == "model" else {
            throw error(root, "<\(root.name)>", "the root element must be <model>; this is not a Core Data model file")
        }
        var entities: [EntityDescription] = []
        var templates: [FetchRequestTemplate] = []
        var configurations: [String: [String]] = [:]
        var userInfo: [String: String] = [:]
        for child in root.children {
            switch child.name {
            case "entity": entities.append(try entity(child))
            case "fetchRequest": templates.append(try template(child))
            case "configuration":
                let name = try required(child, "name", "<configuration>")
                configurations[name] = try child.children(named: "memberEntity").map { member throws(ModelError) in
                    try required(member, "name", "<memberEntity> in configuration '\(name)'")
                }
            case "userInfo": userInfo = try self.userInfo(child, "model")
            case let name where Self.ignoredElements.contains(name): continue
            default:
                throw error(child, "<\(child.name)>", "unsupported element in <model>; Ferry reads entity, fetchRequest, configuration, userInfo and elements")
            }
        }
        do {
            return try ManagedObjectModel(
                entities: entities, fetchRequestTemplates: templates, configurations: configurations,
                userInfo: userInfo, versionIdentifier: nonEmpty(root.attributes["userDefinedModelVersionIdentifier"])
            )
        } catch {
            var located = error
            located.file = file
            return try { () throws(ModelError) -> ManagedObjectModel in throw located }()
        }
    }

    private func entity(_ node: XMLNode) throws(ModelError) -> EntityDescription {
        let name = try required(node, "name", "<entity>")
        let place = "<entity name=\"\(name)\">"
        var attributes: [AttributeDescription] = []
        var relationships: [RelationshipDescription] = []
        var fetched: [FetchedPropertyDescription] = []
        var constraints: [[String]] = []
        var userInfo: [String: String] = [:]
        for child in node.children {
            switch child.name {
            case "attribute": attributes.append(try attribute(child, entity: name))
            case "relationship": relationships.append(try relationship(child, entity: name))
            case "fetchedProperty": fetched.append(try fetchedProperty(child, entity: name))
            case "uniquenessConstraints":
                for constraint in child.children(named: "uniquenessConstraint") {
                    constraints.append(try constraint.children(named: "constraint").map { item throws(ModelError) in
                        try required(item, "value", "<constraint> in \(place)")
                    })
                }
            case "userInfo": userInfo = try self.userInfo(child, place)
            case let other where Self.ignoredElements.contains(other): continue
            default:
                throw error(child, "<\(child.name)> in \(place)",
                            "unsupported element; an entity holds attribute, relationship, fetchedProperty, uniquenessConstraints, indexes and userInfo")
            }
        }
        return EntityDescription(
            name: name, parent: nonEmpty(node.attributes["parentEntity"]),
            isAbstract: try flag(node, "isAbstract", place), className: nonEmpty(node.attributes["representedClassName"]),
            attributes: attributes, relationships: relationships, fetchedProperties: fetched,
            uniquenessConstraints: constraints, versionHashModifier: nonEmpty(node.attributes["versionHashModifier"]),
            renamingIdentifier: try renamingIdentifier(node, place), userInfo: userInfo
        )
    }

    private func attribute(_ node: XMLNode, entity: String) throws(ModelError) -> AttributeDescription {
        let name = try required(node, "name", "<attribute> in entity '\(entity)'")
        let place = "<attribute name=\"\(name)\"> in entity '\(entity)'"
        let typeName = try required(node, "attributeType", place)
        guard let type = AttributeType(xcodeName: typeName) else {
            let known = AttributeType.allCases.map(\.xcodeName).joined(separator: ", ")
            throw error(node, place, "attributeType '\(typeName)' is not supported; Ferry supports \(known)")
        }
        var derivation: Derivation?
        if try flag(node, "derived", place) {
            guard let expression = nonEmpty(node.attributes["derivationExpression"]) else {
                throw error(node, place, "derived=\"YES\" without a derivationExpression; give the expression, or make it a plain attribute")
            }
            let read = Derivation(expression: expression)
            if let problem = read.problem { throw error(node, place, problem) }
            derivation = read
        }
        var validation = AttributeValidation()
        var defaultValue: AttributeValue?
        if type == .date {
            defaultValue = try value(node, "defaultDateTimeInterval", as: .date, place)
            validation.minimum = try value(node, "minDateTimeInterval", as: .date, place)
            validation.maximum = try value(node, "maxDateTimeInterval", as: .date, place)
        } else {
            defaultValue = try value(node, "defaultValueString", as: type, place)
            // For strings (and binary data) the bounds are lengths.
            let boundType: AttributeType = (type == .string || type == .binaryData) ? .integer64 : type
            validation.minimum = try value(node, "minValueString", as: boundType, place)
            validation.maximum = try value(node, "maxValueString", as: boundType, place)
        }
        validation.regularExpression = nonEmpty(node.attributes["regularExpressionString"])
        if validation.regularExpression != nil && type != .string {
            throw error(node, place, "a regular expression applies to String attributes only")
        }
        return AttributeDescription(
            name: name, type: type, isOptional: try flag(node, "optional", place),
            isTransient: try flag(node, "transient", place), defaultValue: defaultValue, validation: validation,
            isIndexed: try flag(node, "indexed", place), valueTransformerName: nonEmpty(node.attributes["valueTransformerName"]),
            preservesValueInHistoryOnDeletion: try flag(node, "preserveAfterDeletion", place),
            versionHashModifier: nonEmpty(node.attributes["versionHashModifier"]),
            renamingIdentifier: try renamingIdentifier(node, place), derivation: derivation,
            userInfo: try userInfo(node.first("userInfo"), place)
        )
    }

    private func relationship(_ node: XMLNode, entity: String) throws(ModelError) -> RelationshipDescription {
        let name = try required(node, "name", "<relationship> in entity '\(entity)'")
        let place = "<relationship name=\"\(name)\"> in entity '\(entity)'"
        let destination = try required(node, "destinationEntity", place)
        let inverseName = nonEmpty(node.attributes["inverseName"])
        if let inverseEntity = nonEmpty(node.attributes["inverseEntity"]), inverseEntity != destination {
            throw error(node, place, "inverseEntity '\(inverseEntity)' differs from destinationEntity '\(destination)'")
        }
        var rule = DeleteRule.nullify
        if let ruleName = node.attributes["deletionRule"] {
            guard let parsed = DeleteRule(xcodeName: ruleName) else {
                throw error(node, place, "deletionRule '\(ruleName)' is not one of Nullify, Cascade, Deny, No Action")
            }
            rule = parsed
        }
        let isToMany = try flag(node, "toMany", place)
        let minCount = try count(node, "minCount", place)
        let maxCount = try count(node, "maxCount", place)
        if !isToMany && maxCount > 1 {
            throw error(node, place, "a to-one relationship has maxCount \(maxCount); set toMany=\"YES\" or maxCount=\"1\"")
        }
        return RelationshipDescription(
            name: name, destination: destination, inverse: inverseName, isToMany: isToMany,
            isOrdered: try flag(node, "ordered", place), isOptional: try flag(node, "optional", place),
            minCount: isToMany ? minCount : 0, maxCount: isToMany ? maxCount : 0,
            deleteRule: rule, isTransient: try flag(node, "transient", place),
            versionHashModifier: nonEmpty(node.attributes["versionHashModifier"]),
            renamingIdentifier: try renamingIdentifier(node, place),
            userInfo: try userInfo(node.first("userInfo"), place)
        )
    }

    /// Xcode's Renaming ID: the model file writes it as `elementID`. A hand-written
    /// `renamingIdentifier` is refused: Xcode's model compiler ignores it, and the migration
    /// it was meant for would silently lose the old values.
    private func renamingIdentifier(_ node: XMLNode, _ place: String) throws(ModelError) -> String? {
        if node.attributes["renamingIdentifier"] != nil {
            throw error(node, place, "Xcode writes a Renaming ID as elementID=\"OLD NAME\"; " +
                        "renamingIdentifier is ignored by Xcode's model compiler, so a migration would drop the old values. Use elementID")
        }
        return nonEmpty(node.attributes["elementID"])
    }

    private func fetchedProperty(_ node: XMLNode, entity: String) throws(ModelError) -> FetchedPropertyDescription {
        let name = try required(node, "name", "<fetchedProperty> in entity '\(entity)'")
        let place = "<fetchedProperty name=\"\(name)\"> in entity '\(entity)'"
        guard let request = node.first("fetchRequest") else {
            throw error(node, place, "missing its <fetchRequest> child")
        }
        return FetchedPropertyDescription(
            name: name, entityName: try required(request, "entity", "<fetchRequest> of \(place)"),
            predicate: nonEmpty(request.attributes["predicateString"]),
            userInfo: try userInfo(node.first("userInfo"), place)
        )
    }

    private func template(_ node: XMLNode) throws(ModelError) -> FetchRequestTemplate {
        let name = try required(node, "name", "<fetchRequest>")
        let place = "<fetchRequest name=\"\(name)\">"
        return FetchRequestTemplate(
            name: name, entityName: try required(node, "entity", place),
            predicate: nonEmpty(node.attributes["predicateString"]), fetchLimit: try count(node, "fetchLimit", place)
        )
    }

    private func userInfo(_ node: XMLNode?, _ place: String) throws(ModelError) -> [String: String] {
        guard let node else { return [:] }
        var result: [String: String] = [:]
        for entry in node.children(named: "entry") {
            let key = try required(entry, "key", "<entry> in the userInfo of \(place)")
            result[key] = entry.attributes["value"] ?? ""
        }
        return result
    }

    // MARK: - Attribute helpers

    private func required(_ node: XMLNode, _ key: String, _ place: String) throws(ModelError) -> String {
        guard let value = node.attributes[key], !value.isEmpty else {
            throw error(node, place, "the required attribute '\(key)' is missing")
        }
        return value
    }

    private func flag(_ node: XMLNode, _ key: String, _ place: String) throws(ModelError) -> Bool {
        switch node.attributes[key] {
        case nil: return false
        case "YES": return true
        case "NO": return false
        case let other?: throw error(node, place, "\(key)=\"\(other)\" must be YES or NO")
        }
    }

    private func count(_ node: XMLNode, _ key: String, _ place: String) throws(ModelError) -> Int {
        guard let text = node.attributes[key] else { return 0 }
        guard let value = Int(text), value >= 0 else {
            throw error(node, place, "\(key)=\"\(text)\" must be a whole number of 0 or more")
        }
        return value
    }

    private func value(_ node: XMLNode, _ key: String, as type: AttributeType, _ place: String) throws(ModelError) -> AttributeValue? {
        guard let text = node.attributes[key] else { return nil }
        guard let value = AttributeValue(modelString: text, type: type) else {
            throw error(node, place, "\(key)=\"\(text)\" is not a valid \(type.xcodeName) value")
        }
        return value
    }

    private func nonEmpty(_ text: String?) -> String? {
        guard let text, !text.isEmpty else { return nil }
        return text
    }

    private func error(_ node: XMLNode, _ element: String, _ message: String) -> ModelError {
        ModelError(.invalidElement, message, file: file, line: node.line, element: element)
    }
}
