import FerryStore

extension ManagedObjectContext {
    /// Inserts an object of `entity` and sets `values` (keys in sorted order).
    @discardableResult
    public func make(_ entity: String, _ values: [String: Any] = [:]) throws -> ManagedObject {
        let object = try insert(entityName: entity)
        for (key, value) in values.sorted(by: { $0.key < $1.key }) { try object.setValue(value, forKey: key) }
        return object
    }

    /// Every object of `entity`, sorted by `key` when given.
    public func all(_ entity: String, sortedBy key: String? = nil) throws -> [ManagedObject] {
        try fetch(FetchRequest(entityName: entity, sortDescriptors: key.map { [FetchSortDescriptor($0)] } ?? []))
    }
}

extension PersistentStore {
    /// Saves three change sets of `Person` objects (an entity with a string `name`): "Before", then
    /// 12,000 people (about 1.3 MiB of text: a change set large enough to be read and sent in pieces),
    /// then "After".
    public func saveAroundALargeChangeSet() throws {
        let context = try PersistentContainer(store: self).newContext()
        try context.make("Person", ["name": "Before"])
        try context.save()
        for index in 0..<12_000 { try context.make("Person", ["name": "Person number \(index)"]) }
        try context.save()
        try context.make("Person", ["name": "After"])
        try context.save()
    }
}

extension ManagedObject {
    /// A string attribute's value.
    public func string(_ key: String) throws -> String? { try value(forKey: key) as? String }

    /// A to-many relationship's members.
    public func objects(_ key: String) throws -> Set<ManagedObject> { try value(forKey: key) as? Set<ManagedObject> ?? [] }
}
