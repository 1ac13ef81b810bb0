import Foundation
import FerryModel

/// The save pipeline, in Core Data's order:
/// 1. delete propagation (Cascade, Nullify) over the pending deletes, then
///    uniqueness constraints resolved by the merge policy (``resolveUniquenessConflicts()``),
///    then derived attributes (``deriveAttributes(replaying:)``);
/// 2. validation of every deleted (Deny, custom), inserted and updated object,
///    all failures collected;
/// 3. one store transaction with every insert, update, delete and relationship change;
/// 4. permanent IDs and committed values in the context.
/// A failure in 1–3 writes nothing and keeps the pending changes.
extension ManagedObjectContext {
    /// Writes every pending change to the store, or nothing.
    /// - Throws: ``SaveError/validationFailed(_:)`` listing every failure,
    ///   ``SaveError/conflict(objectURIs:)`` when another writer changed the same
    ///   objects, ``SaveError/storeFailed(_:)`` when the store cannot write.
    public func save() throws(SaveError) {
        mergeWaitingChanges()
        guard hasChanges else { return }
        try prepareForSave()
        do {
            try callWillSave()
        } catch {
            throw SaveError.storeFailed(StoreFailure(error.description, cause: error))
        }
        // Uniqueness constraints; a child's save leaves them to the save that reaches the store, as Core Data does.
        if parent == nil { try resolveUniquenessConflicts() }
        try deriveForSave(replaying: false)
        // Updated objects are validated and written in key order, so errors and writes are deterministic.
        let updatedInOrder = updatedKeys.sorted()
        let failures = validatePendingChanges(updatedInOrder)
        guard failures.isEmpty else { throw SaveError.validationFailed(failures) }
        var (request, order) = makeSaveRequest(updatedInOrder)
        var pendingEvent = pendingSaveEvent(replaying: false)
        var result = SaveResult.empty
        // (The feed tells the store's commits apart; a child's save commits nothing there.)
        let writesStore = parent == nil
        if writesStore { container.feed.saveWillBegin() }
        var recorded: Int64?
        defer { if writesStore { container.feed.saveDidEnd(recordedSequence: recorded) } }
        lastResolvedConflicts = []
        for round in 0... {
            do {
                result = try Self.storeSave { try store.save(request) }
                recorded = result.recordedSequence
                break
            } catch {
                // Another writer changed what this save writes: resolved by the merge policy.
                guard case .conflict(let uris) = error else { throw error }
                let conflicts = conflicts(for: uris)
                guard !conflicts.isEmpty else { throw error }
                guard mergePolicy != .error, round < Self.conflictRounds else { throw SaveError.mergeConflict(conflicts.map(\.report)) }
                resolve(conflicts)
                lastResolvedConflicts += conflicts.map(\.report)
                let updatedInOrder = updatedKeys.sorted()
                let failures = validatePendingChanges(updatedInOrder)
                guard failures.isEmpty else { throw SaveError.validationFailed(failures) }
                (request, order) = makeSaveRequest(updatedInOrder)
                if pendingEvent != nil { pendingEvent = pendingSaveEvent(replaying: false) }
            }
        }
        try finishSave(result, order, pendingEvent: pendingEvent, replaying: false)
    }

    /// Delete propagation before a save, then the objects-did-change event for what it changed.
    func prepareForSave() throws(SaveError) {
        do {
            try propagateDeletes()
        } catch {
            throw SaveError.storeFailed(StoreFailure(error.description, cause: error))
        }
        publishPendingObjectsDidChange()
    }

    /// Derived attributes, from the values the save leaves (a replay's included).
    func deriveForSave(replaying: Bool) throws(SaveError) {
        do {
            try deriveAttributes(replaying: replaying)
        } catch {
            throw SaveError.storeFailed(StoreFailure(error.description, cause: error))
        }
    }

    /// A store's save, its errors as ``SaveError``s.
    static func storeSave(_ write: () throws -> SaveResult) throws(SaveError) -> SaveResult {
        do {
            return try write()
        } catch let error as SaveError {
            throw error
        } catch let error as StoreError {
            if case .storeFailure(let failure) = error { throw SaveError.storeFailed(failure) }
            throw SaveError.storeFailed(StoreFailure(error.description, cause: error))
        } catch {
            throw SaveError.storeFailed(StoreFailure(error))
        }
    }

    /// After the store wrote the save: permanent IDs and committed values in the context, the
    /// objects' `didSave`, and the did-save event.
    func finishSave(_ result: SaveResult, _ order: RequestOrder, pendingEvent: ObjectChangeEvent?, replaying: Bool) throws(SaveError) {
        guard result.permanentIDs.count == order.inserted.count, result.updatedVersions.count == order.updated.count else {
            throw SaveError.storeFailed(
                "the store answered \(result.permanentIDs.count) IDs for \(order.inserted.count) inserts; the context was left unchanged")
        }
        let saved = objectsWithHooks()
        undoManager?.removeAllActions()
        apply(result, order)
        for object in saved { object.didSave() }
        publishDidSave(pendingEvent, inserted: result.permanentIDs, recordedSequence: result.recordedSequence, replaying: replaying)
    }

    /// Applies delete rules to the pending deletes now (``save()`` does this
    /// too): Cascade deletes destinations, Nullify and No Action remove the deleted
    /// object from its destinations' inverses (Core Data's No Action leaves them
    /// pointing at it; see `docs/STORE.md`), Deny changes nothing (validation refuses).
    /// Also merges what waits for an automatically merging context, and publishes
    /// ``ObjectChangeEvent/Kind/objectsDidChange`` with what changed since the last such event.
    public func processPendingChanges() throws(ContextError) {
        mergeWaitingChanges()
        try propagateDeletes()
        publishPendingObjectsDidChange()
        undoManager?.eventDidEnd()
    }

    func propagateDeletes() throws(ContextError) {
        var position = 0
        while position < deletedKeys.count {
            let key = deletedKeys[position]
            position += 1
            guard let object = self.object(forKey: key) else { continue }
            if !object.isPreparedForDeletion {
                object.isPreparedForDeletion = true
                if object.runtime.hasCustomClass { object.prepareForDeletion() }
            }
            for index in object.runtime.toOneIndexes + object.runtime.toManyIndexes {
                guard let relationship = object.runtime.relationship(at: index) else { continue }
                switch relationship.deleteRule {
                case .cascade:
                    for target in try destinations(of: object, index) where !target.isDeleted && isStored(target) {
                        delete(target)
                    }
                case .nullify, .noAction:
                    // No Action too: unlike Core Data, which leaves the references pointing at the deleted
                    // object, Ferry clears them. A replica that deleted the object before a reference to it
                    // arrived has no row to point at, so only cleared references converge (docs/SYNC.md).
                    try nullifyInverse(of: object, index)
                case .deny:
                    continue
                }
            }
            try clearOneWayReferences(to: object)
        }
    }

    /// Whether an object's row can be read: false for a reference a No Action delete left
    /// pointing at a row that is gone (there is nothing left to cascade to or unlink).
    package func isStored(_ object: ManagedObject) -> Bool {
        do {
            try fulfillFault(object)
            return true
        } catch {
            return false
        }
    }

    /// Removes a deleted object from the inverse of one of its relationships, on every destination.
    private func nullifyInverse(of object: ManagedObject, _ index: Int) throws(ContextError) {
        guard let inverse = object.runtime.inverseIndex[index] else { return }
        for target in try destinations(of: object, index) where !target.isDeleted && isStored(target) {
            try primitiveUnlink(target, inverse, object)
        }
    }

    /// Unlike Core Data, which leaves them dangling, Ferry clears one-way to-one
    /// references (relationships without an inverse) to a deleted object, so a
    /// reference never points at nothing and replicas agree on it.
    private func clearOneWayReferences(to object: ManagedObject) throws(ContextError) {
        guard !object.objectID.isTemporaryID else { return }
        for owner in model.entities {
            for relationship in owner.ownRelationships where !relationship.isToMany && !relationship.isTransient && relationship.inverseName == nil {
                guard object.runtime.isKind(of: relationship.destinationEntityName) else { continue }
                let request = FetchRequest(entityName: owner.name, predicate: .equal(relationship.name, .object(object.objectID)))
                let referrers: [ManagedObject]
                do {
                    referrers = try fetch(request)
                } catch {
                    throw ContextError.referencesNotFound(object.objectID.uriString, cause: error)
                }
                for referrer in referrers where !referrer.isDeleted {
                    try referrer.setToOneValue(nil, forKey: relationship.name)
                }
            }
        }
    }

    // MARK: - Lifecycle hooks

    /// Calls ``ManagedObject/willSave()`` on the pending objects of subclasses, again for those a round
    /// edited or made pending (at most ten rounds), then applies delete rules to deletes the hooks made.
    /// Whether a round edited anything is one comparison of the context's edit count (``noteEdit(_:)``).
    private func callWillSave() throws(ContextError) {
        var due = objectsWithHooks()
        var round = 0
        while !due.isEmpty && round < 10 {
            let editsBefore = editCount
            for object in due { object.willSave() }
            round += 1
            guard editCount != editsBefore else { break }
            due = objectsWithHooks().filter { $0.lastEdit > editsBefore }
        }
        try propagateDeletes()
    }

    /// The pending objects (inserted, updated, deleted) of subclasses, whose hooks a save calls.
    func objectsWithHooks() -> [ManagedObject] {
        var objects: [ManagedObject] = []
        for key in insertedKeys {
            guard let object = self.object(forKey: key), object.runtime.hasCustomClass, !object.isDeleted else { continue }
            objects.append(object)
        }
        for key in updatedKeys.sorted() {
            guard let object = self.object(forKey: key), object.runtime.hasCustomClass, object.isUpdated else { continue }
            objects.append(object)
        }
        for key in deletedKeys {
            guard let object = self.object(forKey: key), object.runtime.hasCustomClass, !object.isInserted else { continue }
            objects.append(object)
        }
        return objects
    }

    // MARK: - Validation

    func validatePendingChanges(_ updatedInOrder: [Int]) -> [ValidationError] {
        var failures: [ValidationError] = []
        let validator = ObjectValidator(context: self)
        for key in deletedKeys {
            guard let object = self.object(forKey: key), !object.isInserted else { continue }
            failures += validator.denyFailures(of: object)
            failures += validator.custom(object, .delete) { try object.validateForDelete() }
        }
        for key in insertedKeys {
            guard let object = self.object(forKey: key), !object.isDeleted else { continue }
            failures += validator.modelRuleFailures(of: object)
            failures += validator.keyHookFailures(of: object, indexes: object.runtime.kinds.indices)
            failures += validator.custom(object, .insert) { try object.validateForInsert() }
        }
        for key in updatedInOrder {
            guard let object = self.object(forKey: key), object.isUpdated else { continue }
            failures += validator.modelRuleFailures(of: object)
            if object.runtime.validatesKeys {
                let names = object.runtime.entity.properties
                failures += validator.keyHookFailures(of: object, indexes: object.changedIndexes.sorted { names[$0].name < names[$1].name })
            }
            failures += validator.custom(object, .update) { try object.validateForUpdate() }
        }
        return failures
    }

    // MARK: - Building the store request

    /// Which objects the request's inserts and updates are, in order.
    struct RequestOrder {
        var inserted: [Int] = []
        var updated: [Int] = []
    }

    func makeSaveRequest(_ updatedInOrder: [Int]) -> (SaveRequest, RequestOrder) {
        var request = SaveRequest()
        var order = RequestOrder()
        request.inserts.reserveCapacity(insertedKeys.count)
        order.inserted.reserveCapacity(insertedKeys.count)
        request.author = transactionAuthor
        request.contextName = name
        for key in insertedKeys {
            guard let object = self.object(forKey: key), !object.isDeleted else { continue }
            var attributes = object.attributes
            if object.runtime.hasTransientAttributes {
                attributes = [AttributeValue?](repeating: nil, count: object.attributes.count)
                for index in object.runtime.persistentAttributeIndexes { attributes[index] = object.attributes[index] }
            }
            var toOne = object.runtime.emptyDestinations  // (shared until a destination is set)
            for index in object.runtime.toOneIndexes {
                if let destination = storedID(object.toOne[index]) { toOne[index] = destination }
            }
            request.inserts.append(SaveRequest.Insert(objectID: object.objectID, attributes: attributes, toOne: toOne))
            order.inserted.append(key)
            appendToManyChanges(of: object, to: &request)
        }
        for key in updatedInOrder {
            guard let object = self.object(forKey: key), object.isUpdated else { continue }
            var attributes: [Int: AttributeValue?] = [:]
            var toOne: [Int: ObjectID?] = [:]
            var written = object.changedIndexes
            for index in object.quietIndexes { written.insert(index) }
            for index in written {
                switch object.runtime.kinds[index] {
                case .attribute(let attribute) where !attribute.isTransient:
                    attributes[index] = object.attributes[index]
                case .toOne(let relationship) where !relationship.isTransient:
                    toOne[index] = storedID(object.toOne[index])
                default:
                    continue
                }
            }
            if !attributes.isEmpty || !toOne.isEmpty {
                request.updates.append(SaveRequest.Update(objectID: object.objectID, expectedVersion: object.version,
                                                          attributes: attributes, toOne: toOne))
                order.updated.append(key)
            }
            appendToManyChanges(of: object, to: &request)
        }
        for key in deletedKeys {
            guard let object = self.object(forKey: key), !object.isInserted else { continue }
            request.deletes.append(SaveRequest.Delete(objectID: object.objectID, expectedVersion: object.version))
        }
        return (request, order)
    }

    /// The ID to store for a reference: nil for objects that will never reach the store.
    private func storedID(_ key: Int?) -> ObjectID? {
        guard let key, let target = self.object(forKey: key) else { return nil }
        if target.isInserted && target.isDeleted { return nil }
        return target.objectID
    }

    private func appendToManyChanges(of object: ManagedObject, to request: inout SaveRequest) {
        guard !object.toMany.isEmpty else { return }
        for index in object.runtime.toManyIndexes {
            guard let members = object.toMany[index],
                  object.isInserted ? !members.ordered.isEmpty : object.changedIndexes.contains(index),
                  let relationship = object.runtime.relationship(at: index),
                  let storage = object.runtime.storage[index] else { continue }
            let ordered = members.ordered.compactMap { storedID($0) }
            var change = SaveRequest.ToManyChange(source: object.objectID, relationship: relationship.name,
                                                  added: [], removed: [], orderedMembers: relationship.isOrdered ? ordered : nil)
            switch storage {
            case .joinTable(_, sourceIsCanonical: true):
                let committed = Set(members.committed)
                let current = Set(members.ordered)
                change.added = members.ordered.filter { !committed.contains($0) }.compactMap { storedID($0) }
                change.removed = members.committed.filter { !current.contains($0) }.compactMap { self.object(forKey: $0)?.objectID }
            case .joinTable, .inverseOfForeignKey, .foreignKey:
                guard relationship.isOrdered else { continue }
            }
            if change.added.isEmpty && change.removed.isEmpty && change.orderedMembers == nil { continue }
            request.toManyChanges.append(change)
        }
    }

    // MARK: - After the store committed

    func apply(_ result: SaveResult, _ order: RequestOrder) {
        for key in insertedKeys {
            guard let object = self.object(forKey: key), object.isDeleted else { continue }
            unregister(object)
        }
        for (key, permanent) in zip(order.inserted, result.permanentIDs) {
            guard let object = self.object(forKey: key) else { continue }
            object.objectID = permanent
            indexPermanentID(ofKey: key)
            object.isInserted = false
            commit(object, version: 1)
        }
        var newVersions: [Int: Int64] = [:]
        for (key, version) in zip(order.updated, result.updatedVersions) { newVersions[key] = version }
        for key in updatedKeys {
            guard let object = self.object(forKey: key), !object.isDeleted else { continue }
            commit(object, version: newVersions[key] ?? object.version)
        }
        for key in deletedKeys {
            guard let object = self.object(forKey: key) else { continue }
            unregister(object)
        }
        releasePending()
    }

    private func commit(_ object: ManagedObject, version: Int64) {
        object.committedAttributes = object.attributes
        object.committedToOne = object.toOne
        if !object.toMany.isEmpty {
            // (In place: the member lists drop their vacant slots, then become the committed ones.)
            for index in object.runtime.kinds.indices where object.toMany[index] != nil {
                object.toMany[index]?.compact()
                guard let members = object.toMany[index], members.committed != members.ordered else { continue }
                object.toMany[index]?.committed = members.ordered
            }
        }
        if !object.changedIndexes.isEmpty { object.changedIndexes.removeAll() }
        if !object.quietIndexes.isEmpty { object.quietIndexes.removeAll() }
        object.isPreparedForDeletion = false
        object.version = version
    }
}
