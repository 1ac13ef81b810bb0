import FerryModel
import FerryStore

/// Where each entity and property lives in SQLite, in Core Data's spirit:
/// one table `Z<ROOT>` per root entity with `Z_PK`, `Z_ENT`, `Z_OPT`; one column
/// `Z<NAME>` per attribute and to-one relationship (numeric suffix on clashes);
/// a `Z<n>_<NAME>` entity column when a to-one's destination has subentities;
/// `Z_FOK_<NAME>` order columns for ordered to-many; join tables for
/// many-to-many and one-way to-many.
///
/// The mapping is stored in the file (`Z_MODELCACHE`) and only ever extended,
/// so entity numbers and column names never change under existing rows.
struct SchemaMapping: Codable, Sendable, Equatable {
    struct EntityMapping: Codable, Sendable, Equatable {
        var number: Int
        var table: String
        var parent: String?
        /// Property name → column (attributes and to-one relationships).
        var columns: [String: String]
        /// To-one name → column holding the destination's `Z_ENT` (destinations with subentities).
        var entityColumns: [String: String]
        /// To-one name → order column, when the inverse to-many is ordered.
        var orderColumns: [String: String]
    }

    struct JoinTableMapping: Codable, Sendable, Equatable {
        var table: String
        /// Holds the primary key of the canonical side's object.
        var canonicalColumn: String
        /// Holds the primary key of the other side's object.
        var otherColumn: String
        /// Order of the other side's objects within the canonical relationship, when ordered.
        var canonicalOrderColumn: String?
        /// Order of the canonical objects within the inverse relationship, when ordered.
        var otherOrderColumn: String?
        var canonicalEntity: String
        var otherEntity: String
    }

    var entities: [String: EntityMapping] = [:]
    /// Keyed by `Entity.relationship` of the canonical side.
    var joinTables: [String: JoinTableMapping] = [:]

    static let reservedColumns: Set<String> = ["Z_PK", "Z_ENT", "Z_OPT"]

    /// A fresh mapping for a new store.
    init(model: ManagedObjectModel) {
        extend(for: model)
    }

    /// Adds mappings for whatever `model` has that this mapping lacks, never
    /// renaming anything that exists.
    mutating func extend(for model: ManagedObjectModel) {
        var nextNumber = (entities.values.map(\.number).max() ?? 0) + 1
        for entity in Self.numberingOrder(model) where entities[entity.name] == nil {
            let rootTable = "Z" + entity.rootName.uppercased()
            entities[entity.name] = EntityMapping(number: nextNumber, table: rootTable, parent: entity.parentName,
                                                  columns: [:], entityColumns: [:], orderColumns: [:])
            nextNumber += 1
        }
        for entity in Self.numberingOrder(model) {
            for property in entity.properties where property.isPersistent {
                let declaring = model.declaringEntityName(ofProperty: property.name, in: entity)
                switch property {
                case .attribute(let attribute):
                    assignColumn(entity.name, declaring: declaring, property: attribute.name)
                case .relationship(let relationship) where !relationship.isToMany:
                    assignColumn(entity.name, declaring: declaring, property: relationship.name)
                    if let destination = model.entity(named: relationship.destinationEntityName), !destination.subentityNames.isEmpty {
                        assignEntityColumn(entity.name, declaring: declaring, relationship: relationship.name, destination: destination.name)
                    }
                    if let inverse = model.inverse(of: relationship), inverse.isToMany, inverse.isOrdered {
                        assignOrderColumn(entity.name, declaring: declaring, relationship: relationship.name)
                    }
                case .relationship(let relationship):
                    if case .joinTable(let key, true) = model.storage(of: relationship, in: entity), declaring == entity.name {
                        addJoinTable(key, relationship: relationship, model: model)
                    }
                }
            }
        }
    }

    /// Depth-first, alphabetical: roots by name, each followed by its subentities.
    static func numberingOrder(_ model: ManagedObjectModel) -> [EntityDescription] {
        var result: [EntityDescription] = []
        func visit(_ entity: EntityDescription) {
            result.append(entity)
            for child in model.entities where child.parentName == entity.name { visit(child) }
        }
        for root in model.rootEntities { visit(root) }
        return result
    }

    /// Every column name already used in `table`.
    func usedColumns(in table: String) -> Set<String> {
        var used = Self.reservedColumns
        for mapping in entities.values where mapping.table == table {
            used.formUnion(mapping.columns.values)
            used.formUnion(mapping.entityColumns.values)
            used.formUnion(mapping.orderColumns.values)
        }
        return used
    }

    /// `base`, or `base` with the first numeric suffix no column of `table` has.
    func uniqueName(_ base: String, in table: String) -> String {
        let used = usedColumns(in: table)
        if !used.contains(base) { return base }
        var suffix = 1
        while used.contains(base + String(suffix)) { suffix += 1 }
        return base + String(suffix)
    }

    /// Inherited properties reuse the declaring entity's column.
    private mutating func assignColumn(_ entity: String, declaring: String, property: String) {
        guard entities[entity]?.columns[property] == nil, let table = entities[entity]?.table else { return }
        let column = entities[declaring]?.columns[property] ?? uniqueName("Z" + property.uppercased(), in: table)
        entities[entity]?.columns[property] = column
    }

    private mutating func assignEntityColumn(_ entity: String, declaring: String, relationship: String, destination: String) {
        guard entities[entity]?.entityColumns[relationship] == nil, let table = entities[entity]?.table,
              let number = entities[destination]?.number else { return }
        let column = entities[declaring]?.entityColumns[relationship]
            ?? uniqueName("Z\(number)_" + relationship.uppercased(), in: table)
        entities[entity]?.entityColumns[relationship] = column
    }

    private mutating func assignOrderColumn(_ entity: String, declaring: String, relationship: String) {
        guard entities[entity]?.orderColumns[relationship] == nil, let table = entities[entity]?.table else { return }
        let column = entities[declaring]?.orderColumns[relationship] ?? uniqueName("Z_FOK_" + relationship.uppercased(), in: table)
        entities[entity]?.orderColumns[relationship] = column
    }

    private mutating func addJoinTable(_ key: JoinTableKey, relationship: RelationshipDescription, model: ManagedObjectModel) {
        let name = Self.joinKey(key)
        guard joinTables[name] == nil, let source = entities[key.entityName],
              let destination = entities[relationship.destinationEntityName] else { return }
        let inverse = model.inverse(of: relationship)
        let canonicalColumn = "Z_\(source.number)" + (inverse?.name.uppercased() ?? "SOURCE")
        var otherColumn = "Z_\(destination.number)" + relationship.name.uppercased()
        if otherColumn == canonicalColumn { otherColumn += "1" }
        joinTables[name] = JoinTableMapping(
            table: "Z_\(source.number)" + relationship.name.uppercased(),
            canonicalColumn: canonicalColumn, otherColumn: otherColumn,
            canonicalOrderColumn: relationship.isOrdered ? "Z_FOK_" + otherColumn.dropFirst(2) : nil,
            otherOrderColumn: (inverse?.isOrdered ?? false) ? "Z_FOK_" + canonicalColumn.dropFirst(2) : nil,
            canonicalEntity: key.entityName, otherEntity: relationship.destinationEntityName
        )
    }

    static func joinKey(_ key: JoinTableKey) -> String { "\(key.entityName).\(key.relationshipName)" }

    /// The entity numbers of `entity` and all its subentities.
    func family(of entity: EntityDescription) -> [Int] {
        ([entity.name] + entity.subentityNames).compactMap { entities[$0]?.number }.sorted()
    }

    /// Entity name by `Z_ENT` number.
    var entityNamesByNumber: [Int: String] {
        Dictionary(uniqueKeysWithValues: entities.map { ($1.number, $0) })
    }
}
