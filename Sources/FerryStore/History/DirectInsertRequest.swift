import Foundation
import FerryModel

extension PersistentContainer {
    /// A store request that inserts a replayed change set's objects without a
    /// managed object context, or nil when a context could make a difference.
    ///
    /// Most change sets a replica receives only insert objects it has never
    /// seen, pointing at objects it has. Going through a context for those
    /// costs most of the replay's time and changes nothing: no delete rule can
    /// run, no last-writer decision is needed, and when nothing can fail
    /// validation there is nothing to check. So this answers a request only when
    /// all of these hold, and nil otherwise (the caller then merges through a
    /// context as usual):
    ///
    /// - every change is an insert, with no to-many memberships, of a distinct
    ///   URI, of a concrete entity;
    /// - no inserted entity has a model rule (required property, bounds,
    ///   pattern, counts), a registered subclass (its hooks could run) or a
    ///   custom validator for inserts;
    /// - every to-one value is stored on this side alone (its inverse, if any,
    ///   is a to-many), and points at an object inserted by the same set or at
    ///   one of `existing`, of the relationship's destination entity, whose own
    ///   entity has no model rule, subclass or validator for updates (a context
    ///   would mark it updated through the inverse and validate it).
    ///
    /// An insert records every non-nil value, so an attribute it leaves out is
    /// nil, even where the model has a default (the origin set it to nil).
    ///
    /// - Parameters:
    ///   - changeSet: the change set; the caller has checked that none of its
    ///     inserted URIs exists or is buried here.
    ///   - existing: the local ID of every object the set refers to without
    ///     inserting it (the caller has checked they exist).
    ///   - annotation: the replay annotation; the returned request carries it
    ///     with the origin URI of every inserted object.
    package func directInsertRequest(for changeSet: ChangeSet, existing: [String: ObjectID],
                                     annotation: ReplayAnnotation) -> SaveRequest? {
        guard !changeSet.changes.isEmpty else { return nil }
        var replay = annotation
        let namespace = UUID()
        // Every inserted URI gets its temporary ID first: a change may point at an object inserted later in the set.
        var temporaryIDs: [String: ObjectID] = [:]
        temporaryIDs.reserveCapacity(changeSet.changes.count)
        var ids: [ObjectID] = []
        ids.reserveCapacity(changeSet.changes.count)
        var entityRuntimes: [String: EntityRuntime] = [:]
        for (counter, change) in changeSet.changes.enumerated() {
            guard change.kind == .insert, change.added.isEmpty, change.removed.isEmpty else { return nil }
            if entityRuntimes[change.entity] == nil {
                guard let runtime = runtimes[change.entity], acceptsDirectWrite(runtime, phase: .insert) else { return nil }
                entityRuntimes[change.entity] = runtime
            }
            let id = ObjectID.temporary(entityName: change.entity, namespace: namespace, counter: counter)
            guard temporaryIDs.updateValue(id, forKey: change.uri) == nil else { return nil }
            ids.append(id)
        }

        var request = SaveRequest()
        request.inserts.reserveCapacity(changeSet.changes.count)
        replay.originURIs.reserveCapacity(changeSet.changes.count)
        // Answers that depend only on the relationship or the target's entity, each worked out once.
        var settable: [ObjectIdentifier: Bool] = [:]
        var updatable: [String: Bool] = [:]
        for (change, id) in zip(changeSet.changes, ids) {
            guard let runtime = entityRuntimes[change.entity] else { return nil }
            replay.originURIs[id] = change.uri
            // An insert records every non-nil value, so what it leaves out is nil (not the default).
            var attributes = runtime.emptyAttributes
            var toOne = [ObjectID?](repeating: nil, count: runtime.kinds.count)
            for (name, value) in change.values {
                guard let index = runtime.propertyIndex(named: name) else { return nil }
                switch (runtime.kinds[index], value) {
                case (.attribute(let attribute), .null) where !attribute.isTransient:
                    attributes[index] = nil
                case (.attribute(let attribute), .attribute(let newValue)) where !attribute.isTransient:
                    attributes[index] = newValue
                case (.toOne(let relationship), .null) where !relationship.isTransient:
                    toOne[index] = nil
                case (.toOne(let relationship), .object(let uri)):
                    let key = ObjectIdentifier(relationship)
                    let canSet = settable[key] ?? (!relationship.isTransient && hasNoToOneInverse(relationship))
                    settable[key] = canSet
                    guard canSet, let target = temporaryIDs[uri] ?? existing[uri] else { return nil }
                    if updatable[target.entityName] == nil {
                        guard let targetRuntime = runtimes[target.entityName] else { return nil }
                        updatable[target.entityName] = acceptsDirectWrite(targetRuntime, phase: .update)
                    }
                    guard updatable[target.entityName] == true,
                          target.entityName == relationship.destinationEntityName
                            || runtimes[target.entityName]?.isKind(of: relationship.destinationEntityName) == true else { return nil }
                    toOne[index] = target
                default:
                    return nil
                }
            }
            request.inserts.append(SaveRequest.Insert(objectID: id, attributes: attributes, toOne: toOne))
        }
        request.replay = replay
        return request
    }

    /// Whether objects of this entity can be written without a context in `phase`:
    /// nothing a context would run for them (model rules, subclass hooks,
    /// validators) exists.
    private func acceptsDirectWrite(_ runtime: EntityRuntime, phase: ValidationPhase) -> Bool {
        !runtime.entity.isAbstract && !runtime.hasModelRules && runtime.objectClass == ManagedObject.self
            && validators(for: runtime, phase: phase).isEmpty
    }

    /// Whether setting this to-one changes no other row: it has no inverse, or a to-many one.
    private func hasNoToOneInverse(_ relationship: RelationshipInfo) -> Bool {
        guard let inverseName = relationship.inverseName else { return true }
        return model.entity(named: relationship.destinationEntityName)?.relationship(named: inverseName)?.isToMany ?? false
    }
}
