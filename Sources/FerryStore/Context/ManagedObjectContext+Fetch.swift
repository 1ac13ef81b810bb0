import Foundation
import FerryModel

/// Fetching. Without pending changes a fetch is one store query with the
/// filter, order, limit and offset pushed down. With pending changes of the
/// fetched entity's family (and `includesPendingChanges`, the default), the
/// store's matches are merged with the context's: deleted objects drop out,
/// changed objects are re-checked in memory, inserted objects that match are
/// added, and the order and window are applied in memory.
extension ManagedObjectContext {
    /// The objects matching `request`.
    public func fetch(_ request: FetchRequest) throws -> [ManagedObject] {
        mergeWaitingChanges()
        let entity = try request.validated(in: model)
        guard request.includesPendingChanges, hasPendingChanges(inFamilyOf: entity) else {
            return try store.fetchRows(request).map { register($0) }
        }
        var unwindowed = request
        unwindowed.fetchLimit = 0
        unwindowed.fetchOffset = 0
        var seen = Set<Int>()
        var result: [ManagedObject] = []
        for row in try store.fetchRows(unwindowed) {
            let object = register(row)
            seen.insert(object.key)
            guard !object.isDeleted else { continue }
            if !object.changedIndexes.isEmpty, try !matches(object, request) { continue }
            result.append(object)
        }
        let candidates = insertedKeys + updatedKeys.sorted()
        for key in candidates where !seen.contains(key) {
            guard let object = self.object(forKey: key), !object.isDeleted, isFetched(object, by: request), try matches(object, request) else { continue }
            seen.insert(key)
            result.append(object)
        }
        if !request.sortDescriptors.isEmpty {
            result = try sorted(result, by: request.sortDescriptors)
        }
        let start = min(request.fetchOffset, result.count)
        let window = result[start...]
        return Array(request.fetchLimit > 0 ? window.prefix(request.fetchLimit) : window)
    }

    /// The objects matching `request`, as the subclass `type`.
    /// - Throws: ``ContextError/wrongClass(entity:expected:actual:)`` for a match of another class.
    public func fetch<Object: ManagedObject>(_ request: FetchRequest, as type: Object.Type) throws -> [Object] {
        try fetch(request).map { object in
            guard let typed = object as? Object else {
                throw ContextError.wrongClass(entity: object.entity.name, expected: "\(Object.self)", actual: "\(Swift.type(of: object))")
            }
            return typed
        }
    }

    /// The objects matching `request`, read in batches of ``FetchRequest/fetchBatchSize`` as the
    /// collection is read (Core Data's batched faulting): the fetch reads only the matching IDs,
    /// and iterating a large result keeps about one batch of objects in memory (``FetchedResults``).
    ///
    /// With a batch size of 0, or with unsaved changes of the fetched entity's family in the
    /// context (which only a fetch of every object can merge), this is ``fetch(_:)`` as a collection.
    ///
    /// ```swift
    /// var request = FetchRequest(entityName: "Person")
    /// request.fetchBatchSize = 1_000
    /// for person in try context.fetchResults(request) { total += person[attribute: "salary"] ?? Int64(0) }
    /// ```
    public func fetchResults(_ request: FetchRequest) throws -> FetchedResults {
        mergeWaitingChanges()
        let entity = try request.validated(in: model)
        guard request.fetchBatchSize > 0, !(request.includesPendingChanges && hasPendingChanges(inFamilyOf: entity)) else {
            return FetchedResults(objects: try fetch(request), context: self)
        }
        return FetchedResults(ids: try store.fetchObjectIDList(request), batchSize: request.fetchBatchSize, context: self)
    }

    /// The objects of `ids`, in order: registered ones as they are, the others read from the store
    /// in one query. Faults whose rows are gone stay faults; so do all of them when the read fails
    /// (a collection's subscript cannot throw): each then reads its row on first access, and
    /// that access reports the failure.
    func registerBatch(_ ids: [ObjectID]) -> [ManagedObject] {
        sweepDepartedIDsIfNeeded()
        let objects = ids.map { object(with: $0) }
        let faults = objects.filter(\.isFault).map(\.objectID)
        if !faults.isEmpty, let rows = try? store.rows(for: faults) {
            for row in rows.values { register(row) }
        }
        return objects
    }

    /// The IDs of the objects matching `request`.
    public func fetchObjectIDs(_ request: FetchRequest) throws -> [ObjectID] {
        let entity = try request.validated(in: model)
        guard request.includesPendingChanges, hasPendingChanges(inFamilyOf: entity) else {
            return try store.fetchObjectIDs(request)
        }
        return try fetch(request).map(\.objectID)
    }

    /// How many objects match `request` (limit and offset applied).
    public func count(for request: FetchRequest) throws -> Int {
        mergeWaitingChanges()
        let entity = try request.validated(in: model)
        guard request.includesPendingChanges, hasPendingChanges(inFamilyOf: entity) else {
            return try store.count(request)
        }
        return try fetch(request).count
    }

    /// The matching objects' values as dictionaries, keyed by the key paths of
    /// ``FetchRequest/propertiesToFetch`` (Core Data's dictionary result type).
    ///
    /// As in Core Data, this reads the store only: unsaved changes of the
    /// context are not seen. Nil values are left out of a dictionary. With
    /// ``FetchRequest/returnsDistinctResults``, equal dictionaries appear once.
    ///
    /// ```swift
    /// var request = try FetchRequest(entityName: "Person", format: "manager != nil", model: model)
    /// request.propertiesToFetch = ["name", "manager.name"]
    /// let rows = try context.fetchDictionaries(request)   // [["name": .attribute(.string("Bob")), "manager.name": …], …]
    /// ```
    ///
    /// With ``FetchRequest/expressions`` or ``FetchRequest/propertiesToGroupBy`` the fetch
    /// aggregates (one SQL `GROUP BY` statement in the SQLite store): one dictionary per group (or one
    /// over all matches without groups) with the group's key values and each expression's result,
    /// groups filtered by ``FetchRequest/havingPredicate``, sorted by group keys or expression names.
    public func fetchDictionaries(_ request: FetchRequest) throws -> [[String: FetchedValue]] {
        if !request.expressions.isEmpty || !request.propertiesToGroupBy.isEmpty {
            // (The store checks the request; the names need no model.)
            let names = request.aggregateColumnNames
            return try store.fetchAggregates(request).map { Self.dictionary(names, $0) }
        }
        let entity = try request.validated(in: model)
        let keyPaths = request.propertiesToFetch.isEmpty ? Self.storedProperties(of: entity) : request.propertiesToFetch
        guard request.returnsDistinctResults else {
            return try store.fetchValues(request, keyPaths: keyPaths).map { Self.dictionary(keyPaths, $0) }
        }
        var unwindowed = request
        unwindowed.fetchLimit = 0
        unwindowed.fetchOffset = 0
        var seen = Set<[FetchedValue?]>()
        let distinct = try store.fetchValues(unwindowed, keyPaths: keyPaths).filter { seen.insert($0).inserted }
        let start = min(request.fetchOffset, distinct.count)
        let window = distinct[start...]
        return (request.fetchLimit > 0 ? Array(window.prefix(request.fetchLimit)) : Array(window)).map { Self.dictionary(keyPaths, $0) }
    }

    private static func storedProperties(of entity: EntityDescription) -> [String] {
        entity.properties.compactMap { property in
            switch property {
            case .attribute(let attribute): attribute.isTransient ? nil : attribute.name
            case .relationship(let relationship): relationship.isToMany ? nil : relationship.name
            }
        }
    }

    private static func dictionary(_ keyPaths: [String], _ values: [FetchedValue?]) -> [String: FetchedValue] {
        var result: [String: FetchedValue] = [:]
        for (keyPath, value) in zip(keyPaths, values) where value != nil { result[keyPath] = value }
        return result
    }

    // MARK: - In-memory matching

    func hasPendingChanges(inFamilyOf entity: EntityDescription) -> Bool {
        let root = entity.rootName
        func inFamily(_ key: Int) -> Bool { self.object(forKey: key)?.runtime.entity.rootName == root }
        return insertedKeys.contains(where: inFamily) || deletedKeys.contains(where: inFamily) || updatedKeys.contains(where: inFamily)
    }

    func isFetched(_ object: ManagedObject, by request: FetchRequest) -> Bool {
        request.includesSubentities ? object.runtime.isKind(of: request.entityName) : object.runtime.name == request.entityName
    }

    func matches(_ object: ManagedObject, _ request: FetchRequest) throws -> Bool {
        guard let predicate = request.predicate else { return true }
        return try PredicateEvaluator().evaluate(predicate, on: ContextSubject(context: self, object: object))
    }

    /// Follows a key path through to-one relationships, loading faults on the way.
    func value(at keyPath: String, of object: ManagedObject) throws -> KeyPathValue {
        let path = try ResolvedKeyPath.resolve(keyPath, from: object.entity, in: model)
        guard let current = try follow(path.hops, from: object) else { return .null }
        try fulfillFault(current)
        guard let index = current.runtime.propertyIndex(named: path.final.name) else { return .null }
        switch current.runtime.kinds[index] {
        case .attribute:
            return current.attributes[index].map(KeyPathValue.attribute) ?? .null
        case .toOne:
            return current.toOne[index].flatMap { self.object(forKey: $0) }.map { .object($0.objectID) } ?? .null
        case .toMany:
            return .null
        }
    }

    /// The object reached by following to-one `hops` (loading faults), nil at an empty link.
    func follow(_ hops: [RelationshipDescription], from object: ManagedObject) throws -> ManagedObject? {
        var current = object
        for hop in hops {
            try fulfillFault(current)
            guard let index = current.runtime.propertyIndex(named: hop.name),
                  let next = current.toOne[index].flatMap({ self.object(forKey: $0) }) else { return nil }
            current = next
        }
        return current
    }

    func sorted(_ objects: [ManagedObject], by descriptors: [FetchSortDescriptor]) throws -> [ManagedObject] {
        let keyed = try objects.enumerated().map { offset, object in
            (offset, object, try descriptors.map { try value(at: $0.keyPath, of: object) })
        }
        return keyed.sorted { lhs, rhs in
            PredicateEvaluator.precedes(lhs.2, rhs.2, by: descriptors) ?? (lhs.0 < rhs.0)
        }.map(\.1)
    }
}

/// An object of a context, as predicates see it (loading faults on the way).
struct ContextSubject: PredicateSubject {
    let context: ManagedObjectContext
    let object: ManagedObject

    var objectID: ObjectID { object.objectID }

    func value(at keyPath: String) throws -> KeyPathValue {
        try context.value(at: keyPath, of: object)
    }

    func members(at keyPath: String) throws -> [ContextSubject] {
        let path = try ToManyKeyPath.resolve(keyPath, from: object.entity, in: context.model)
        guard let owner = try context.follow(path.hops, from: object), let index = owner.runtime.propertyIndex(named: path.relationship.name) else { return [] }
        return try context.destinations(of: owner, index).filter { !$0.isDeleted }.map { ContextSubject(context: context, object: $0) }
    }
}
