import Foundation
import FerryModel

/// Derived attributes (see ``Derivation``), computed at save as Core Data computes them:
/// after delete propagation, before validation, for every object the save inserts or
/// changes and for every object whose value reads one of them (found through the inverse
/// of the relationship the derivation reads through).
///
/// A replaying save computes them as well, from the values the replay left: every replica
/// derives the same values from the same content, so they are not replicated (nor recorded
/// in change sets). `now()` is the exception: it is the time of the local save that changed
/// the object, recorded and replicated as a plain attribute, and a replay leaves it as the
/// change set wrote it.
extension ManagedObjectContext {
    func deriveAttributes(replaying: Bool) throws(ContextError) {
        guard container.hasDerivations else { return }
        // The objects the save changes, in a fixed order (keys are assigned in registration order).
        let changed = insertedKeys + updatedKeys.sorted()
        var stale: [Int] = []
        var isStale = Set<Int>()
        func markStale(_ key: Int) {
            guard let object = self.object(forKey: key), !object.isDeleted, !object.runtime.derivations.isEmpty, isStale.insert(key).inserted else { return }
            stale.append(key)
        }
        for key in changed {
            guard let object = self.object(forKey: key), !object.isDeleted else { continue }
            markStale(key)
            for dependent in object.runtime.derivationDependents
            where object.isInserted || object.changedIndexes.contains(dependent.sourceIndex) {
                for owner in try destinations(of: object, dependent.inverseIndex) { markStale(owner.key) }
            }
        }
        let changedBySave = Set(changed)
        let now = Date()
        for key in stale {
            guard let object = self.object(forKey: key) else { continue }
            try fulfillFault(object)
            for derived in object.runtime.derivations {
                let value: AttributeValue?
                if derived.isComputedOnEveryReplica {
                    value = try derive(derived, of: object)
                } else {
                    // now(): the time of a local save that changes the object itself.
                    guard !replaying, changedBySave.contains(key) else { continue }
                    value = .date(now)
                }
                object.setAttribute(derived.index, value, in: self)
            }
        }
    }

    private func derive(_ derived: DerivedAttribute, of object: ManagedObject) throws(ContextError) -> AttributeValue? {
        /// The value at the derivation's key path: on the object, or on its to-one's destination.
        func pathValue() throws(ContextError) -> AttributeValue? {
            guard let source = derived.sourceIndex else { return nil }
            guard let relationship = derived.relationshipIndex else { return object.attributes[source] }
            guard let target = try destinations(of: object, relationship).first, !target.isDeleted else { return nil }
            try fulfillFault(target)
            return target.attributes[source]
        }
        switch derived.form {
        case .value: return try pathValue()
        case .uppercase, .lowercase, .canonical:
            guard case .string(let text)? = try pathValue() else { return nil }
            return derived.form.transform(text).map(AttributeValue.string)
        case .count:
            guard let relationship = derived.relationshipIndex else { return nil }
            let members = try destinations(of: object, relationship).filter { !$0.isDeleted }
            return DerivedSum(integer: Int64(members.count)).value(as: derived.type)
        case .sum:
            guard let relationship = derived.relationshipIndex, let source = derived.sourceIndex else { return nil }
            var sum = DerivedSum()
            for member in try destinations(of: object, relationship) where !member.isDeleted {
                try fulfillFault(member)
                sum.add(member.attributes[source])
            }
            return sum.value(as: derived.type)
        case .now:
            return .date(Date())
        }
    }
}
