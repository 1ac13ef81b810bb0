import Foundation
import FerryModel
import FerryStore
import FerrySQLite

/// Replay's fast path for the commonest change set: objects this store has
/// never seen, pointing at objects it has. They go straight to the store as
/// one request (``PersistentContainer/directInsertRequest(for:existing:annotation:)``
/// says exactly when), skipping the managed object context; the store records
/// the change set as received, as it does for a replay through a context.
///
/// The outcome is the same as merging through a context would give: no
/// last-writer decision is needed for new objects, no delete rule runs on an
/// insert, and the request is built only when nothing could fail validation.
/// `DirectInsertReplayTests` checks the two paths leave identical stores.
struct DirectInsertReplay {
    let store: SQLiteStore
    let container: PersistentContainer

    /// Applies `changeSet` on the fast path; false (nothing written) when it does not qualify.
    func applyIfEligible(_ changeSet: ChangeSet, body: String, retry: Bool) throws -> Bool {
        var inserted = Set<String>()
        inserted.reserveCapacity(changeSet.changes.count)
        var referenced = Set<String>()
        for change in changeSet.changes {
            guard change.kind == .insert, change.added.isEmpty, change.removed.isEmpty,
                  inserted.insert(change.uri).inserted else { return false }
            for value in change.values.values { if case .object(let uri) = value { referenced.insert(uri) } }
        }
        referenced.subtract(inserted)

        // The inserted objects must be new here; the referenced ones must exist.
        let found = try store.lookUp(originURIs: Array(inserted) + referenced)
        // (An insert names an object of the change set's origin; anything else is left to the context path.)
        let originPrefix = "x-coredata://\(changeSet.origin.uuidString)/"
        guard found.buried.isEmpty,
              !inserted.contains(where: { !$0.hasPrefix(originPrefix) || (!found.mapped.isEmpty && found.mapped[$0] != nil) }) else { return false }
        var existing: [String: ObjectID] = [:]
        var own: [(uri: String, id: ObjectID)] = []
        for uri in referenced {
            if let id = found.mapped[uri] {
                existing[uri] = id  // mapped and not buried: the row exists
            } else if let id = store.ownObjectID(forURI: uri) {
                own.append((uri, id))
            } else {
                return false  // unknown: the context path quarantines it with the reason
            }
        }
        if !own.isEmpty {
            let rows = try store.rows(for: own.map(\.id))
            for (uri, id) in own {
                guard rows[id] != nil else { return false }
                existing[uri] = id
            }
        }

        var annotation = ReplayAnnotation(changeSet: changeSet, body: body)
        annotation.isRetry = retry
        guard let request = container.directInsertRequest(for: changeSet, existing: existing, annotation: annotation) else { return false }
        _ = try store.save(request)
        return true
    }
}

