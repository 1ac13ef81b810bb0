import FerryModel

/// Fetched properties: read-only, predicate-based properties declared in the
/// model (`<fetchedProperty>` in an Xcode model file).
extension ManagedObjectContext {
    /// The objects of a fetched property of `object`: the objects of the
    /// property's entity that match its predicate, where `$FETCH_SOURCE` is
    /// `object` (so `$FETCH_SOURCE.name` is its name) and
    /// `$FETCHED_PROPERTY.userInfo.KEY` reads the property's user info.
    ///
    /// Unlike Core Data, which caches the result until the object is refreshed,
    /// the predicate is evaluated at every call, like any fetch: unsaved changes
    /// of this context are included, results come in primary-key order.
    ///
    /// ```swift
    /// let colleagues = try context.fetchedProperty("colleagues", of: person)
    /// ```
    /// - Throws: ``ContextError/unknownKey(entity:key:)`` when the entity (or its
    ///   ancestors) declares no such fetched property, ``PredicateFormatError`` for
    ///   a predicate that does not bind, or a store error.
    public func fetchedProperty(_ name: String, of object: ManagedObject) throws -> [ManagedObject] {
        guard let property = fetchedPropertyDescription(name, in: object.entity) else {
            throw ContextError.unknownKey(entity: object.entity.name, key: name)
        }
        guard object.managedObjectContext === self else {
            throw ContextError.objectFromAnotherContext(object.objectID.uriString)
        }
        var request = FetchRequest(entityName: property.entityName)
        if let format = property.predicate {
            request.predicate = try FetchPredicate(format: format, variables: ["FETCH_SOURCE": object, "FETCHED_PROPERTY": property],
                                                   entity: property.entityName, model: model)
        }
        return try fetch(request)
    }

    /// The fetched property declared on `entity` or its nearest ancestor.
    private func fetchedPropertyDescription(_ name: String, in entity: EntityDescription) -> FetchedPropertyDescription? {
        var current: EntityDescription? = entity
        while let candidate = current {
            if let found = candidate.ownFetchedProperties.first(where: { $0.name == name }) { return found }
            current = candidate.parentName.flatMap { model.entity(named: $0) }
        }
        return nil
    }
}
