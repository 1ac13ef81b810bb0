import ArgumentParser
import FerryModel
import FerryStore

struct ModelCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "model",
        abstract: "Inspect model files.",
        subcommands: [ModelCheckCommand.self]
    )
}

struct ModelCheckCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check",
        abstract: "Load a model file and report its entities, or the first problem found."
    )

    @Argument(help: "A .xcdatamodeld folder, a .xcdatamodel folder, or a contents XML file.")
    var path: String

    @Flag(help: "Print the entities as JSON.")
    var json = false

    func run() throws {
        let model = try loadModel(path)
        if json {
            print(ModelSummary.json(model).text)
        } else {
            print("ok: \(model.entities.count) entities, version hash \(model.versionHash)")
            for entity in model.entities {
                let parent = entity.parentName.map { " : \($0)" } ?? ""
                let abstract = entity.isAbstract ? " (abstract)" : ""
                print("  \(entity.name)\(parent)\(abstract): \(entity.ownAttributes.count) attributes, \(entity.ownRelationships.count) relationships")
            }
        }
    }
}

/// The JSON shape of `ferry model check --json`.
enum ModelSummary {
    static func json(_ model: ManagedObjectModel) -> JSONValue {
        .object([("entities", .array(model.entities.map(entity)))])
    }

    private static func entity(_ entity: EntityDescription) -> JSONValue {
        .object([
            ("name", .string(entity.name)),
            ("parent", entity.parentName.map(JSONValue.string) ?? .null),
            ("abstract", .bool(entity.isAbstract)),
            ("attributes", .array(entity.ownAttributes.map { attribute in
                var fields: [(String, JSONValue)] = [("name", .string(attribute.name)), ("type", .string(attribute.type.xcodeName)),
                                                     ("optional", .bool(attribute.isOptional))]
                // A derived attribute says what it derives (docs/STORE.md, "Derived attributes").
                if let derivation = attribute.derivation { fields.append(("derivedFrom", .string(derivation.expression))) }
                return .object(fields)
            })),
            ("relationships", .array(entity.ownRelationships.map { relationship in
                .object([("name", .string(relationship.name)), ("destination", .string(relationship.destinationEntityName)),
                         ("toMany", .bool(relationship.isToMany)), ("deleteRule", .string(relationship.deleteRule.xcodeName)),
                         ("inverse", relationship.inverseName.map(JSONValue.string) ?? .null),
                         ("optional", .bool(relationship.isOptional))])
            })),
        ])
    }
}
