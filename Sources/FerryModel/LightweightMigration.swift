/// What Core Data's lightweight migration infers from one model version to the next, for any
/// store: how entities and properties match (``ModelVersionMapping``), what each store must do
/// to its data (defaults to fill, columns to retype, derived values to compute), and the
/// differences no rule covers. `SQLiteStore` carries it out in SQL, `InMemoryStore` on its rows;
/// the rules, with an example each, are in docs/STORE.md, "Migration".
public struct LightweightMigration: Sendable {
    /// One property (attribute or relationship) of one (destination) entity.
    public struct PropertyReference: Sendable, Hashable {
        public var entity: String
        public var property: String

        public init(entity: String, property: String) {
            self.entity = entity
            self.property = property
        }
    }

    /// What a change of attribute type needs.
    public enum TypeChange: Sendable, Equatable {
        /// Nothing: stored values read as the new type as they are (integer widening, float ↔ double).
        case none
        /// The values are converted to the new type (integer → Double, Float or Decimal).
        case conversion
        /// Not inferred; why.
        case refused(String)
    }

    /// How the two versions' entities and properties match.
    public let versions: ModelVersionMapping
    /// Attributes whose stored nil becomes the model's default (optional → required, or a new required attribute).
    public private(set) var defaultsToFill: [(attribute: PropertyReference, value: AttributeValue)] = []
    /// Attributes whose values must be converted to a new type.
    public private(set) var retypedAttributes: [(attribute: PropertyReference, type: AttributeType)] = []
    /// Derived attributes (computed on every replica) that are new or derive something new:
    /// every object's value is computed. (A new `now()` attribute stays empty until the next save.)
    public private(set) var derivationsToCompute: [PropertyReference] = []
    /// To-one relationships that became (unordered) to-many, kept in a join table of their own
    /// side: each object's destination becomes its one member. In a fleet, a to-one write of the
    /// earlier version replaces the members (docs/SYNC.md, "A to-one that became to-many").
    public private(set) var toManyConversions: [PropertyReference] = []
    /// Every difference no rule covers, in words; empty when the migration can run.
    public private(set) var problems: [String]

    /// Infers the migration from a store of `previous` to `model`.
    public init(from previous: ManagedObjectModel, to model: ManagedObjectModel) {
        let versions = ModelVersionMapping(from: previous, to: model)
        self.versions = versions
        var problems = versions.conflicts
        // The new name of an old entity, for comparing destinations and parents.
        let renamed = { (oldName: String?) -> String? in oldName.map { versions.destinationEntity(ofSource: $0) ?? "(removed \($0))" } }

        for entity in model.entities.sorted(by: { $0.name < $1.name }) {
            let place = "entity '\(entity.name)'"
            guard let oldName = versions.entityMatches[entity.name], let old = previous.entity(named: oldName) else {
                // A new entity: nothing stored yet; its attributes need no value.
                continue
            }
            if renamed(old.parentName) != entity.parentName {
                problems.append("\(place) changed parent from \(old.parentName ?? "none") to \(entity.parentName ?? "none"); " +
                                "Core Data infers no migration for a changed hierarchy")
            }
            if !old.isAbstract && entity.isAbstract {
                problems.append("\(place) became abstract, but the store may hold objects of it")
            }
            let matches = versions.propertyMatches[entity.name] ?? [:]
            for attribute in entity.ownAttributes where attribute.derivation?.isComputedOnEveryReplica == true {
                let stored = matches[attribute.name].flatMap { old.attribute(named: $0) }
                if stored?.derivation?.expression != attribute.derivation?.expression {
                    derivationsToCompute.append(PropertyReference(entity: entity.name, property: attribute.name))
                }
            }
            for property in entity.properties where property.isPersistent {
                guard let oldProperty = matches[property.name] else {
                    // New property.
                    switch property {
                    case .attribute(let attribute) where !attribute.isOptional:
                        if let value = attribute.defaultValue {
                            defaultsToFill.append((PropertyReference(entity: entity.name, property: attribute.name), value))
                        } else {
                            problems.append("\(place): new attribute '\(attribute.name)' is required and has no default value; " +
                                            "existing objects would have none (give it a default value, or make it optional)")
                        }
                    case .relationship(let relationship):
                        if !relationship.isOptional {
                            problems.append("\(place): new relationship '\(relationship.name)' is required; existing objects have none (make it optional)")
                        }
                        if let inverse = relationship.inverseName, versions.propertyMatches[relationship.destinationEntityName]?[inverse] != nil {
                            problems.append("\(place): new relationship '\(relationship.name)' is the inverse of the existing " +
                                            "'\(relationship.destinationEntityName).\(inverse)', which changes how that one is stored")
                        }
                    default:
                        break
                    }
                    continue
                }
                switch property {
                case .attribute(let attribute):
                    guard let stored = old.attribute(named: oldProperty) else { continue }
                    let name = "\(place): attribute '\(attribute.name)'" + (oldProperty == attribute.name ? "" : " (was '\(oldProperty)')")
                    if stored.type != attribute.type {
                        switch Self.typeChange(from: stored.type, to: attribute.type) {
                        case .none: break
                        case .conversion: retypedAttributes.append((PropertyReference(entity: entity.name, property: attribute.name), attribute.type))
                        case .refused(let why):
                            problems.append("\(name) changed type from \(stored.type.xcodeName) to \(attribute.type.xcodeName): \(why)")
                        }
                    }
                    if stored.isOptional && !attribute.isOptional {
                        if let value = attribute.defaultValue {
                            defaultsToFill.append((PropertyReference(entity: entity.name, property: attribute.name), value))
                        } else {
                            problems.append("\(name) became required without a default value; " +
                                            "stored objects may have none (give it a default value, as Core Data's lightweight migration needs)")
                        }
                    }
                case .relationship(let relationship):
                    guard let stored = old.relationship(named: oldProperty) else { continue }
                    let name = "\(place): relationship '\(relationship.name)'" + (oldProperty == relationship.name ? "" : " (was '\(oldProperty)')")
                    if renamed(stored.destinationEntityName) != relationship.destinationEntityName {
                        problems.append("\(name) changed destination from \(stored.destinationEntityName) to \(relationship.destinationEntityName)")
                    }
                    let ownsJoinTable = model.writesOwnJoinTable(relationship, of: entity)
                    let inverseWasToMany = stored.inverseName
                        .flatMap { previous.entity(named: stored.destinationEntityName)?.relationship(named: $0) }
                        .map(\.isToMany) ?? true
                    if !stored.isToMany && relationship.isToMany && !relationship.isOrdered && ownsJoinTable && inverseWasToMany {
                        if old.ownRelationships.contains(where: { $0.name == oldProperty }) {
                            toManyConversions.append(PropertyReference(entity: entity.name, property: relationship.name))
                        }
                    } else if !stored.isToMany && relationship.isToMany {
                        let why = relationship.isOrdered ? "to an ordered to-many"
                            : !inverseWasToMany ? "from one-to-one (the facts would move to the other side)"
                            : "into a many-to-many whose join table the other side writes (its name sorts first; rename one side, or add a new relationship)"
                        problems.append("\(name) changed from to-one to to-many \(why); " +
                                        "Ferry migrates a to-one that becomes an unordered to-many only when this side writes the join table (docs/STORE.md)")
                    } else if stored.isToMany != relationship.isToMany || stored.isOrdered != relationship.isOrdered {
                        let from = Self.kind(toMany: stored.isToMany, ordered: stored.isOrdered)
                        let to = Self.kind(toMany: relationship.isToMany, ordered: relationship.isOrdered)
                        problems.append("\(name) changed from \(from) to \(to); Ferry does not migrate a change of cardinality or order yet " +
                                        "(docs/STORE.md says why; keep the old relationship, add a new one and copy the objects in code)")
                    }
                    let newInverseOld = relationship.inverseName.flatMap { inverse in
                        model.entity(named: relationship.destinationEntityName)?.relationship(named: inverse).map { $0.renamingIdentifier ?? $0.name }
                    }
                    if stored.inverseName != newInverseOld && stored.inverseName != relationship.inverseName {
                        problems.append("\(name) changed its inverse from \(stored.inverseName ?? "none") to \(relationship.inverseName ?? "none"), " +
                                        "which changes how it is stored")
                    }
                    if stored.isOptional && !relationship.isOptional {
                        problems.append("\(name) became required; stored objects may have none")
                    }
                }
            }
        }
        self.problems = problems
    }

    /// Every change, in words ("renamed Note.stars to rating", "removed entity Tag", …).
    public var changes: [String] {
        let model = versions.destination
        var result: [String] = []
        for entity in model.entities.sorted(by: { $0.name < $1.name }) {
            guard let oldName = versions.entityMatches[entity.name] else {
                result.append("added entity \(entity.name)")
                continue
            }
            if oldName != entity.name { result.append("renamed entity \(oldName) to \(entity.name)") }
            let matches = versions.propertyMatches[entity.name] ?? [:]
            let own = Set(entity.ownAttributes.map(\.name) + entity.ownRelationships.map(\.name))
            for property in entity.properties where property.isPersistent && own.contains(property.name) {
                if let previous = matches[property.name] {
                    if previous != property.name { result.append("renamed \(entity.name).\(previous) to \(property.name)") }
                } else {
                    result.append("added \(entity.name).\(property.name)")
                }
            }
        }
        result += versions.removedEntities.map { "removed entity \($0)" } + versions.removedProperties.map { "removed \($0.entity).\($0.property)" }
        result += retypedAttributes.map { "changed \($0.attribute.entity).\($0.attribute.property) to \($0.type.xcodeName)" }
        result += defaultsToFill.map { "gave \($0.attribute.entity).\($0.attribute.property) its default where it had no value" }
        result += derivationsToCompute.map { "derived \($0.entity).\($0.property) for every object" }
        result += toManyConversions.map { "made \($0.entity).\($0.property) to-many" }
        return result
    }

    /// What the migration would delete, in words: removed entities' objects, removed properties'
    /// values. Empty when it loses nothing.
    public var losses: [String] {
        versions.removedEntities.map { "entity '\($0)' was removed (its objects would be deleted)" }
            + versions.removedProperties.map { "entity '\($0.entity)': '\($0.property)' was removed or made transient (its values would be dropped)" }
    }

    private static func kind(toMany: Bool, ordered: Bool) -> String {
        toMany ? (ordered ? "ordered to-many" : "to-many") : "to-one"
    }

    /// Ferry's inferred type changes (Core Data documents none; these lose no value).
    public static func typeChange(from old: AttributeType, to new: AttributeType) -> TypeChange {
        let integers: [AttributeType] = [.integer16, .integer32, .integer64]
        if let from = integers.firstIndex(of: old), let to = integers.firstIndex(of: new) {
            return to >= from ? .none : .refused("a narrower integer may not hold the stored values")
        }
        if integers.contains(old), [.double, .float, .decimal].contains(new) { return .conversion }
        if [.double, .float].contains(old), [.double, .float].contains(new) { return .none }
        return .refused("only integer widening, integer to Double, Float or Decimal, and Float to Double (or back) migrate without losing values")
    }
}
