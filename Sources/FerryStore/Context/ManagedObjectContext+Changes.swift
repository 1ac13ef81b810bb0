import Foundation
import FerryModel

/// What a context publishes and how it takes in what others changed: its own
/// ``ObjectChangeEvent``s (objects-did-change, did-save), merging events of other contexts,
/// processes and replays, and refreshing objects from the store.
extension ManagedObjectContext {
    /// This context's identity in events (``ObjectChangeEvent/isFrom(_:)``).
    public var identity: ContextIdentity { ContextIdentity(id: temporaryNamespace, name: name) }

    /// This context's events from now on: ``ObjectChangeEvent/Kind/objectsDidChange`` at each
    /// ``processPendingChanges()`` (every save calls it first), refresh and merge, and
    /// ``ObjectChangeEvent/Kind/didSave`` after each save. Other contexts', processes' and replays'
    /// changes come from ``PersistentContainer/changes()``.
    ///
    /// The stream may be read from another task (events are values); it buffers until read and
    /// ends when the iterating task is cancelled or the context goes away.
    public func changes() -> AsyncStream<ObjectChangeEvent> {
        events.subscribe()
    }

    /// Whether changes saved by other contexts of the container, by other processes and by the
    /// daemon's replays are merged into this context by themselves (Core Data's
    /// `automaticallyMergesChangesFromParent`). Off by default.
    ///
    /// A context belongs to one isolation domain, so a merge cannot interrupt it: events wait in an
    /// inbox and are merged (as ``mergeChanges(from:)`` does) at the context's next fetch, count,
    /// ``existingObject(with:)``, ``save()`` or ``processPendingChanges()``.
    public var automaticallyMergesChangesFromStore: Bool {
        get { inbox != nil }
        set {
            guard newValue != (inbox != nil) else { return }
            if newValue {
                let inbox = ChangeInbox(owner: identity)
                container.startChangeFeed()
                inboxKey = container.broadcaster.add(inbox)
                self.inbox = inbox
            } else {
                if let inboxKey { container.broadcaster.remove(inbox: inboxKey) }
                inbox = nil
                inboxKey = nil
            }
        }
    }

    /// Merges what waits in the inbox of an automatically merging context.
    func mergeWaitingChanges() {
        guard let inbox, !inbox.isEmpty else { return }
        for event in inbox.take() { mergeChanges(from: event) }
    }

    // MARK: - Merging

    /// Brings another context's save, another process's commit or a replay into this context
    /// (Core Data's `mergeChanges(fromContextDidSave:)`):
    /// - an updated object this context holds without changes of its own is turned into a fault,
    ///   so its next access reads the new values; one with unsaved changes gets the new committed
    ///   values under its own changes (``refresh(_:mergeChanges:)`` with `true`), so its next save
    ///   neither conflicts nor undoes the other writer's other properties;
    /// - a deleted object this context holds without changes is unregistered (its
    ///   ``ManagedObject/isDeleted`` is true and its context nil); one with unsaved changes stays,
    ///   and its save reports the conflict to the ``mergePolicy``;
    /// - loaded to-many relationships that the change touched are read again on next access.
    ///
    /// Events of this context itself, and ``ObjectChangeEvent/Kind/objectsDidChange`` events, change nothing.
    /// Publishes ``ObjectChangeEvent/Kind/objectsDidChange`` with what was refreshed and deleted.
    public func mergeChanges(from event: ObjectChangeEvent) {
        guard event.kind != .objectsDidChange, !event.isFrom(self) else { return }
        var notice = ObjectChangeEvent(kind: .objectsDidChange, source: .context(identity))
        for (id, keys) in event.updated {
            guard let object = registeredObject(for: id), !object.isInserted, !object.isDeleted else { continue }
            invalidateInverses(of: object, keys: keys)
            if object.isFault { continue }
            refresh(object, mergeChanges: true, notifying: false)
            notice.refreshed.insert(id)
        }
        var deleted = event.deleted.compactMap { registeredObject(for: $0) }
        if !event.deletedWithoutID.isEmpty {
            deleted += registeredObjectsGone(ofEntities: event.deletedWithoutID)
        }
        for object in deleted where !object.isInserted {
            invalidateInverses(of: object, keys: Set(object.entity.relationships.map(\.name)))
            guard !object.hasChanges else { continue }
            notice.deleted.insert(object.objectID)
            object.isDeleted = true
            unregister(object)
        }
        publishObjectsDidChange(notice)
    }

    /// Objects registered here, of these entities (or their subentities), saved and not
    /// scheduled for deletion, whose rows are gone from the store.
    private func registeredObjectsGone(ofEntities names: Set<String>) -> [ManagedObject] {
        let candidates = registeredObjects.filter { object in
            !object.objectID.isTemporaryID && names.contains { object.runtime.isKind(of: $0) || object.entity.rootName == model.entity(named: $0)?.rootName }
        }
        guard !candidates.isEmpty, let rows = try? store.rows(for: candidates.map(\.objectID)) else { return [] }
        return candidates.filter { rows[$0.objectID] == nil }
    }

    /// Drops loaded to-many members that a change to `object`'s relationships `keys` made stale, on the
    /// object and on the destinations of its changed to-ones (their inverse to-many).
    private func invalidateInverses(of object: ManagedObject, keys: Set<String>) {
        for key in keys {
            guard let index = object.runtime.propertyIndex(named: key) else { continue }
            switch object.runtime.kinds[index] {
            case .toMany:
                if !object.changedIndexes.contains(index) { object.toMany[index] = nil }
            case .toOne:
                guard let inverse = object.runtime.inverseIndex[index] else { continue }
                for targetKey in [object.committedToOne[index], object.toOne[index]] {
                    guard let targetKey, let target = self.object(forKey: targetKey), !target.changedIndexes.contains(inverse) else { continue }
                    if target.runtime.relationship(at: inverse)?.isToMany == true { target.toMany[inverse] = nil }
                }
            case .attribute:
                continue
            }
        }
    }

    // MARK: - Refreshing

    /// Updates an object from the store (Core Data's `refresh(_:mergeChanges:)`).
    ///
    /// With `mergeChanges` false, or for an object without changes, the object turns back into a
    /// fault: its unsaved changes are discarded, its values are read again on next access, and
    /// ``ManagedObject/didTurnIntoFault()`` is called. With `mergeChanges` true, an object with
    /// changes reads the store's current values and keeps its own changes on top of them.
    /// Inserted and deleted objects are left as they are.
    public func refresh(_ object: ManagedObject, mergeChanges: Bool) {
        refresh(object, mergeChanges: mergeChanges, notifying: true)
    }

    /// Refreshes every registered object as ``refresh(_:mergeChanges:)`` with `true` does: those
    /// without changes become faults, those with changes read the store's values under their own.
    public func refreshAllObjects() {
        var notice = ObjectChangeEvent(kind: .objectsDidChange, source: .context(identity))
        for object in registeredObjects where !object.isInserted && !object.isDeleted {
            if object.isFault { continue }
            refresh(object, mergeChanges: true, notifying: false)
            notice.refreshed.insert(object.objectID)
        }
        publishObjectsDidChange(notice)
    }

    private func refresh(_ object: ManagedObject, mergeChanges: Bool, notifying: Bool) {
        guard object.managedObjectContext === self, !object.isInserted, !object.isDeleted else { return }
        if mergeChanges && !object.changedIndexes.isEmpty {
            mergeStoreValues(into: object)
        } else {
            turnIntoFault(object)
        }
        if notifying {
            publishObjectsDidChange(ObjectChangeEvent(kind: .objectsDidChange, source: .context(identity), refreshed: [object.objectID]))
        }
    }

    /// Turns a saved object back into a fault, discarding its unsaved changes.
    func turnIntoFault(_ object: ManagedObject) {
        guard !object.isFault else { return }
        if !object.changedIndexes.isEmpty {
            object.changedIndexes.removeAll()
            updatedKeys.remove(object.key)
            if !retainsRegisteredObjects { _ = registry.unpin(object.key) }
        }
        object.attributes = object.runtime.emptyAttributes
        object.toOne = object.runtime.emptyToOne
        object.committedAttributes = object.attributes
        object.committedToOne = object.toOne
        object.toMany.removeAll()
        object.unloadedToManyIsEmpty = false
        object.quietIndexes.removeAll()
        object.version = 0
        object.isFault = true
        object.didTurnIntoFault()
    }

    /// Reads an object's current row and lays its unsaved changes over it. A row that is gone leaves the object as it is.
    private func mergeStoreValues(into object: ManagedObject) {
        guard let row = (try? store.rows(for: [object.objectID]))?[object.objectID] else { return }
        let changed = object.changedIndexes
        let attributes = object.attributes
        let toOne = object.toOne
        let toMany = object.toMany
        fill(object, from: row)
        object.toMany = toMany.filter { changed.contains($0.key) }
        for index in changed {
            switch object.runtime.kinds[index] {
            case .attribute: object.attributes[index] = attributes[index]
            case .toOne: object.toOne[index] = toOne[index]
            case .toMany: continue
            }
        }
    }

    // MARK: - Publishing

    /// Publishes what changed in memory since the last objects-did-change event.
    func publishPendingObjectsDidChange() {
        guard events.hasSubscribers else {
            notified = NotifiedChanges(inserted: insertedKeys.count, deleted: deletedKeys.count)
            return
        }
        var notice = ObjectChangeEvent(kind: .objectsDidChange, source: .context(identity))
        for key in insertedKeys.dropFirst(notified.inserted) {
            guard let object = self.object(forKey: key), !object.isDeleted else { continue }
            notice.inserted.insert(object.objectID)
        }
        for key in deletedKeys.dropFirst(notified.deleted) {
            guard let object = self.object(forKey: key) else { continue }
            notice.deleted.insert(object.objectID)
        }
        for key in updatedKeys {
            guard let object = self.object(forKey: key), object.isUpdated, notified.updated[key] != object.changedIndexes else { continue }
            notice.updated[object.objectID] = object.changedKeys
            notified.updated[key] = object.changedIndexes
        }
        notified.inserted = insertedKeys.count
        notified.deleted = deletedKeys.count
        publishObjectsDidChange(notice)
    }

    func publishObjectsDidChange(_ event: ObjectChangeEvent) {
        guard !event.isEmpty else { return }
        events.publish(event)
    }

    /// What a save is about to write, for its did-save event: nil when nobody listens.
    func pendingSaveEvent(replaying: Bool) -> ObjectChangeEvent? {
        guard events.hasSubscribers || (!replaying && parent == nil && container.broadcaster.hasSubscribers) else { return nil }
        var event = ObjectChangeEvent(kind: .didSave, source: .context(identity))
        for key in updatedKeys {
            guard let object = self.object(forKey: key), object.isUpdated else { continue }
            event.updated[object.objectID] = object.changedKeys
        }
        for key in deletedKeys {
            guard let object = self.object(forKey: key), !object.isInserted else { continue }
            event.deleted.insert(object.objectID)
        }
        return event
    }

    /// Publishes a save's did-save event, with the permanent IDs of the objects it inserted.
    func publishDidSave(_ pending: ObjectChangeEvent?, inserted: [ObjectID], recordedSequence: Int64?, replaying: Bool) {
        notified = NotifiedChanges()
        guard var event = pending else { return }
        event.inserted = Set(inserted)
        if let recordedSequence { event.changeSet = ChangeSetMark(origin: store.identifier, sequence: recordedSequence) }
        guard !event.isEmpty else { return }
        events.publish(event)
        // Other contexts hear of saves that reached the store, not of a child's save into its parent.
        if !replaying && parent == nil { container.broadcaster.publish(event) }
    }
}

/// How far a context's objects-did-change events have told its pending changes.
struct NotifiedChanges {
    var inserted = 0
    var deleted = 0
    var updated: [Int: PropertyIndexSet] = [:]
}
