import Foundation
import FerryModel
import FerryStore

/// A delete that would clear a required to-one (docs/SYNC.md, "Required references"): an object
/// here refers to one that a replayed change set deletes, and the deleted side's Nullify rule
/// clears the reference. A local save doing the same would fail validation, as a Deny rule would
/// refuse it; so, as for Deny, the delete is refused here and a restore of the object recorded.
/// (A replayed reference to an object deleted here is the planner's: it brings the object back.)
extension MergeExecutor {
    /// The origin URI of the object deleted by this change set whose delete left `id`'s required
    /// to-one `failure.key` nil; nil when the failure is anything else.
    func deleteClearingRequiredReference(_ failure: ValidationError, of id: ObjectID) throws -> String? {
        guard failure.code == .missingMandatoryProperty, let key = failure.key,
              let entity = store.model.entity(named: id.entityName),
              let relationship = entity.relationship(named: key), !relationship.isToMany, !relationship.isOptional,
              store.model.inverse(of: relationship)?.deleteRule == .nullify,
              let index = entity.propertyIndex(named: key),
              let stored = try store.rows(for: [id])[id],  // as it was before this change set
              let target = stored.toOne[index], annotation.deletes.contains(target) else { return nil }
        return originURI(of: target)
    }
}
