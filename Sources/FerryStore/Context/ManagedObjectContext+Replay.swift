import Foundation
import FerryModel

/// A replay's save: the changes a merge made on this context (FerrySync's `MergeExecutor`), written
/// through the store's replay write path (``ReplayWriter``), which records the change set as
/// received. It differs from ``ManagedObjectContext/save()`` in what the merge rules already
/// decided: no `willSave` hooks (the changes are another store's), no uniqueness resolution by the
/// merge policy (duplicates were merged by the replication rules), no retry on a conflict (the
/// replay starts again from the store), and validation that lets a rule broken only by combination
/// stand (``ReplayAnnotation/leftInvalid``; Deny is still honoured).
extension ManagedObjectContext {
    /// Saves this context's changes as the replay `replay` describes, through `writer`.
    /// - Throws: ``SaveError`` as ``save()`` does; a conflict is thrown, not resolved.
    package func saveReplay(_ replay: ReplayAnnotation, to writer: any ReplayWriter) throws(SaveError) {
        guard hasChanges else { return }
        try prepareForSave()
        try deriveForSave(replaying: true)
        let updatedInOrder = updatedKeys.sorted()
        var failures = validatePendingChanges(updatedInOrder)
        if !replay.leftInvalid.isEmpty { failures = failures.filter { $0.code == .relationshipDeniedDelete } }
        guard failures.isEmpty else { throw SaveError.validationFailed(failures) }
        let (request, order) = makeSaveRequest(updatedInOrder)
        let pendingEvent = pendingSaveEvent(replaying: true)
        lastResolvedConflicts = []
        let result = try Self.storeSave { try writer.saveReplay(request, recording: replay) }
        try finishSave(result, order, pendingEvent: pendingEvent, replaying: true)
    }
}
