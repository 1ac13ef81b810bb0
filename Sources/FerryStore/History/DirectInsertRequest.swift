import Foundation
import FerryModel

extension PersistentContainer {
    /// The part of a direct insert that needs nothing from the store: the
    /// request for a replayed change set's objects, built without a managed
    /// object context, with its references to objects outside the set still
    /// open; or nil when a context could make a difference. Pure, so it can be
    /// worked out on any thread ahead of the write; ``resolve(_:existing:)``
    /// finishes it once the store has said which objects exist.
    ///
    /// Most change sets a replica receives only insert objects it has never
    /// seen, pointing at objects it has. Going through a context for those
    /// costs most of the replay's time and changes nothing: no delete rule can
    /// run, no last-writer decision is needed, and when nothing can fail
    /// validation there is nothing to check. So a draft exists only when all of
    /// these hold (the caller otherwise merges through a context as usual):
    ///
    /// - every change is an insert, with no to-many memberships, of a distinct
    ///   URI, of a concrete entity;
    /// - no inserted entity has a model rule (required property, bounds,
    ///   pattern, counts), a registered subclass (its hooks could run) or a
    ///   custom validator for inserts;
    /// - every to-one value is stored on this side alone (its inverse, if any,
    ///   is a to-many), and points at an object inserted by the same set or at
    ///   an object outside it (checked by ``resolve(_:existing:)``), of the
    ///   relationship's destination entity, whose own entity has no model rule,
    ///   subclass or validator for updates (a context would mark it updated
    ///   through the inverse and validate it).
    ///
    /// An insert records every non-nil value, so an attribute it leaves out is
    /// nil, even where the model has a default (the origin set it to nil).
    ///
    /// - Parameter annotation: the replay annotation; the request carries it
    ///   with the origin URI of every inserted object.
    package func directInsertDraft(for changeSet: ChangeSet, annotation: ReplayAnnotation) -> DirectInsertDraft? {
        // Derived values are computed by a save through a context (the fast path writes rows as they came).
        guard !changeSet.changes.isEmpty, !hasDerivations else { return nil }
        var replay = annotation
        let namespace = UUID.systemRandom()
        // Every inserted URI gets its place first: a change may point at an object inserted later in the set.
        // (Its place, not its ID: the map is held at the replay's peak, and an ID is six times an Int.)
        var positions: [String: Int] = [:]
        positions.reserveCapacity(changeSet.changes.count)
        /// The temporary ID of the insert at `position`: the set's namespace and the position as its counter.
        func temporaryID(_ position: Int) -> ObjectID {
            .temporary(entityName: changeSet.changes[position].entity, namespace: namespace, counter: position)
        }
        var insertedURIs: [String] = []
        insertedURIs.reserveCapacity(changeSet.changes.count)
        // Each change's entity, checked once per entity (changes come in runs of one entity: the last one is kept at hand).
        var entityRuntimes: [String: EntityRuntime] = [:]
        var changeRuntimes: [EntityRuntime] = []
        changeRuntimes.reserveCapacity(changeSet.changes.count)
        var last: (entityName: String, runtime: EntityRuntime)?
        for (counter, change) in changeSet.changes.enumerated() {
            guard change.kind == .insert, change.added.isEmpty, change.removed.isEmpty, change.positions.isEmpty else { return nil }
            if let last, last.entityName == change.entity {
                changeRuntimes.append(last.runtime)
            } else if let known = entityRuntimes[change.entity] {
                changeRuntimes.append(known)
                last = (change.entity, known)
            } else {
                guard let runtime = runtimes[change.entity], acceptsDirectWrite(runtime, phase: .insert) else { return nil }
                entityRuntimes[change.entity] = runtime
                changeRuntimes.append(runtime)
                last = (change.entity, runtime)
            }
            guard positions.updateValue(counter, forKey: change.uri) == nil else { return nil }
            insertedURIs.append(change.uri)
        }

        var request = SaveRequest()
        request.inserts.reserveCapacity(changeSet.changes.count)
        var references: [DirectInsertDraft.Reference] = []
        var referencedURIs: [String] = []
        var referenceNumbers: [String: Int] = [:]
        // Answers that depend only on the relationship or the target's entity, each worked out once.
        var settable: [ObjectIdentifier: Bool] = [:]
        var updatable: [String: Bool] = [:]
        var constraintsByEntity: [String: [UniquenessConstraint]] = [:]
        let hasConstraints = model.hasUniquenessConstraints
        var uniqueKeys: [UniquenessConstraint: Set<[AttributeValue]>] = [:]
        for index in changeSet.changes.indices {
            let change = changeSet.changes[index], id = temporaryID(index), runtime = changeRuntimes[index]
            // An insert records every non-nil value, so what it leaves out is nil (not the default).
            var attributes = runtime.emptyAttributes
            var toOne = runtime.emptyDestinations  // (shared until a destination is set)
            for (name, value) in change.values {
                guard let index = runtime.propertyIndex(named: name) else { return nil }
                switch (runtime.kinds[index], value) {
                case (.attribute(let attribute), .null) where !attribute.isTransient:
                    attributes[index] = nil
                case (.attribute(let attribute), .attribute(let newValue)) where !attribute.isTransient:
                    attributes[index] = newValue
                case (.toOne(let relationship), .null) where !relationship.isTransient:
                    break  // (nil already; each property comes once)
                case (.toOne(let relationship), .object(let uri)):
                    let key = ObjectIdentifier(relationship)
                    let canSet = settable[key] ?? (!relationship.isTransient && hasNoToOneInverse(relationship))
                    settable[key] = canSet
                    guard canSet else { return nil }
                    guard let target = positions[uri].map(temporaryID) else {
                        // Outside the set: `resolve` finds it and checks it as below.
                        let number = referenceNumbers[uri] ?? referencedURIs.count
                        if number == referencedURIs.count {
                            referenceNumbers[uri] = number
                            referencedURIs.append(uri)
                        }
                        references.append(.init(insert: request.inserts.count, property: index, target: number,
                                                destinationEntityName: relationship.destinationEntityName))
                        continue
                    }
                    guard canReceiveToOne(target, of: relationship.destinationEntityName, updatable: &updatable) else { return nil }
                    toOne[index] = target
                default:
                    return nil
                }
            }
            request.inserts.append(SaveRequest.Insert(objectID: id, attributes: attributes, toOne: toOne))
            // Unique keys: two inserts of the set with one key merge, which takes a context.
            for constraint in hasConstraints ? constraints(of: runtime, cache: &constraintsByEntity) : [] {
                var key: [AttributeValue] = []
                for name in constraint.properties {
                    guard let index = runtime.propertyIndex(named: name), let value = attributes[index] else { break }
                    key.append(value)
                }
                guard key.count == constraint.properties.count else { continue }
                guard uniqueKeys[constraint, default: []].insert(key).inserted else { return nil }
            }
        }
        replay.originURIsInOrder = insertedURIs
        return DirectInsertDraft(request: request, replay: replay, insertedURIs: insertedURIs, referencedURIs: referencedURIs, references: references,
                                 uniqueKeys: uniqueKeys.mapValues { Array($0) })
    }

    /// The request of `draft`, its references outside the set pointed at the
    /// local objects in `existing`; nil when one is missing there, or a context
    /// could make a difference for it (see ``directInsertDraft(for:annotation:)``).
    /// - Parameter existing: the local ID of each of ``DirectInsertDraft/referencedURIs``
    ///   (in that order; the caller has checked they exist), nil where there is none.
    ///
    /// The request is finished in place (`draft` should be the only owner of its
    /// arrays, or they are copied first).
    package func resolve(_ draft: inout DirectInsertDraft, existing: [ObjectID?]) -> SaveRequest? {
        guard existing.count == draft.referencedURIs.count else { return nil }
        var updatable: [String: Bool] = [:]
        for reference in draft.references {
            guard let target = existing[reference.target],
                  canReceiveToOne(target, of: reference.destinationEntityName, updatable: &updatable) else { return nil }
            draft.request.inserts[reference.insert].toOne[reference.property] = target
        }
        return draft.request
    }

    /// The request that inserts a replayed change set's objects without a
    /// context (``directInsertDraft(for:annotation:)`` resolved against `existing`
    /// at once), or nil when a context could make a difference.
    package func directInsertRequest(for changeSet: ChangeSet, existing: [String: ObjectID],
                                     annotation: ReplayAnnotation) -> SaveRequest? {
        guard var draft = directInsertDraft(for: changeSet, annotation: annotation) else { return nil }
        return resolve(&draft, existing: draft.referencedURIs.map { existing[$0] })
    }

    private func constraints(of runtime: EntityRuntime, cache: inout [String: [UniquenessConstraint]]) -> [UniquenessConstraint] {
        if let known = cache[runtime.name] { return known }
        let found = model.uniquenessConstraints(of: runtime.entity)
        cache[runtime.name] = found
        return found
    }

    /// Whether a to-one of an inserted object can point at `target` without a
    /// context: it is of the destination entity (or a sub-entity), and its own
    /// entity takes an update without a context (the inverse marks it updated).
    private func canReceiveToOne(_ target: ObjectID, of destinationEntityName: String, updatable: inout [String: Bool]) -> Bool {
        if updatable[target.entityName] == nil {
            guard let targetRuntime = runtimes[target.entityName] else { return false }
            updatable[target.entityName] = acceptsDirectWrite(targetRuntime, phase: .update)
        }
        return updatable[target.entityName] == true
            && (target.entityName == destinationEntityName || runtimes[target.entityName]?.isKind(of: destinationEntityName) == true)
    }

    /// Whether objects of this entity can be written without a context in `phase`:
    /// nothing a context would run for them (model rules, subclass hooks,
    /// validators) exists.
    private func acceptsDirectWrite(_ runtime: EntityRuntime, phase: ValidationPhase) -> Bool {
        !runtime.entity.isAbstract && !runtime.hasModelRules && runtime.objectClass == ManagedObject.self
            && validators(for: runtime, phase: phase).isEmpty
            // A new object with a unique key may duplicate one here (``DirectInsertDraft/uniqueKeys`` are
            // checked against the store); constraints on relationships take a context.
            && (phase != .insert || model.uniquenessConstraints(of: runtime.entity).allSatisfy { constraint in
                constraint.properties.allSatisfy { runtime.entity.attribute(named: $0) != nil }
            })
    }

    /// Whether setting this to-one changes no other row: it has no inverse, or a to-many one.
    private func hasNoToOneInverse(_ relationship: RelationshipInfo) -> Bool {
        guard let inverseName = relationship.inverseName else { return true }
        // An ordered inverse keeps the member's position in the row (its order column): that takes a context.
        guard let inverse = model.entity(named: relationship.destinationEntityName)?.relationship(named: inverseName) else { return false }
        return inverse.isToMany && !inverse.isOrdered
    }
}

/// A direct insert worked out before the store is asked anything
/// (``PersistentContainer/directInsertDraft(for:annotation:)``).
package struct DirectInsertDraft: Sendable {
    /// A to-one value naming an object outside the change set.
    struct Reference: Sendable {
        /// The insert (index in the request) and the property (index in its entity) it sets.
        var insert: Int
        var property: Int
        /// The object: its place in ``referencedURIs``.
        var target: Int
        /// What the relationship points at.
        var destinationEntityName: String
    }

    /// The request, with the references below still nil.
    var request: SaveRequest
    /// What the store records of the replay beside the rows (``ReplayWriter``).
    package let replay: ReplayAnnotation
    /// The origin URIs the change set inserts, in its order.
    package let insertedURIs: [String]
    /// The origin URIs of the objects outside the set it refers to, each once, in order of first mention.
    package let referencedURIs: [String]
    var references: [Reference]
    /// The values the inserts hold of each uniqueness constraint (attributes only, none
    /// twice): the store must hold none of them for the set to go in directly.
    package let uniqueKeys: [UniquenessConstraint: [[AttributeValue]]]
}
