import Foundation
import FerryModel
import FerryStore

/// Replay's fast path for the commonest change set: objects this store has
/// never seen, pointing at objects it has. They go straight to the store as
/// one request (``PersistentContainer/directInsertDraft(for:annotation:)``
/// says exactly when), skipping the managed object context; the store records
/// the change set as received, as it does for a replay through a context.
///
/// It comes in two steps: ``prepare(_:body:retry:container:)`` works out
/// everything that needs nothing from the store (any thread, ahead of time;
/// see ``DirectInsertPipeline``), and ``apply(_:discard:)`` asks the store which
/// objects exist, finishes the request and saves it.
///
/// The outcome is the same as merging through a context would give: no
/// last-writer decision is needed for new objects, no delete rule runs on an
/// insert, and the request is built only when nothing could fail validation.
/// `DirectInsertReplayTests` checks the two paths leave identical stores.
struct DirectInsertReplay {
    /// What the fast path asks of the store: rows, origin URIs and unique keys, and its replay write path.
    let store: any PersistentStore & ReplicaObjects & ReplayWriter
    let container: PersistentContainer

    /// The fast path's draft for `changeSet`, or nil when it cannot take it
    /// whatever the store holds. Pure: reads nothing but the container.
    static func prepare(_ changeSet: ChangeSet, body: String, retry: Bool, container: PersistentContainer) -> DirectInsertDraft? {
        // An insert names an object of the change set's origin; anything else is left to the context path.
        let originPrefix = "x-coredata://\(changeSet.origin.uuidString)/"
        guard changeSet.changes.allSatisfy({ $0.uri.hasPrefix(originPrefix) }) else { return nil }
        var annotation = ReplayAnnotation(changeSet: changeSet, body: body)
        annotation.isRetry = retry
        return container.directInsertDraft(for: changeSet, annotation: annotation)
    }

    /// Applies `changeSet` on the fast path; false (nothing written) when it does not qualify.
    func applyIfEligible(_ changeSet: ChangeSet, body: String, retry: Bool) throws -> Bool {
        guard let prepared = Self.prepare(changeSet, body: body, retry: retry, container: container) else { return false }
        return try apply(prepared)
    }

    /// Applies a prepared change set if the store allows it now: none of its
    /// objects exists or is buried here, and every object it points at exists
    /// (and was not merged into another).
    /// False (nothing written) otherwise.
    /// (`draft` is consumed, so that the request it holds is finished in place;
    /// `discard` then gets it, to free it elsewhere.)
    func apply(_ draft: consuming DirectInsertDraft, discard: ((DirectInsertDraft) -> Void)? = nil) throws -> Bool {
        // A unique key held here already: the two objects merge, through a context.
        for (constraint, keys) in draft.uniqueKeys where try store.holdsAny(of: keys, for: constraint) { return false }
        let found = try store.lookUpForReplay(originURIs: draft.insertedURIs + draft.referencedURIs)
        // The inserted objects must be new here; the referenced ones must exist (a merged
        // duplicate's URI stands for its survivor: the context path follows it).
        guard found.buried.isEmpty, found.aliased.isEmpty,
              found.mapped.isEmpty || !draft.insertedURIs.contains(where: { found.mapped[$0] != nil }) else { return false }
        // The local ID of each referenced object, in the draft's order.
        var existing: [ObjectID?] = []
        existing.reserveCapacity(draft.referencedURIs.count)
        var own: [(number: Int, id: ObjectID)] = []
        for uri in draft.referencedURIs {
            if let id = found.mapped[uri] {
                existing.append(id)  // mapped and not buried: the row exists
            } else if let id = found.own[uri] {
                own.append((existing.count, id))
                existing.append(nil)
            } else {
                return false  // unknown: the context path quarantines it with the reason
            }
        }
        if !own.isEmpty {
            let rows = try store.rows(for: own.map(\.id))
            for (number, id) in own {
                guard rows[id] != nil else { return false }
                existing[number] = id
            }
        }
        do {
            guard let request = container.resolve(&draft, existing: existing) else { return false }
            _ = try store.saveReplay(request, recording: draft.replay)
        }
        discard?(draft)
        return true
    }
}
