import Foundation
import FerryModel
import FerryStore

/// Applies change sets from other stores to a SQLite store, so that stores
/// that have applied the same change sets hold the same content whatever
/// order they arrived in. The rules are in `docs/SYNC.md`:
///
/// - idempotent: a change set taken in before is a duplicate;
/// - each origin's change sets apply in sequence order, and only after the
///   change sets of other origins they depend on; the others wait (held in the store);
/// - last writer wins per (object, property), by (timestamp, origin);
/// - deletes win over updates, and tombstones keep deleted objects deleted;
/// - delete rules run on replay against the local graph, and a reference to an
///   object already deleted here is repaired by the deleted side's rule;
///   what that changes is recorded as a new change set of this store;
/// - a change set that would leave the store invalid is quarantined (kept,
///   listed, retryable), never dropped.
///
/// Each change set is applied in its own short transaction.
public struct ReplayEngine: Sendable {
    /// The store change sets are applied to.
    public let store: any ReplicaStore
    private let container: PersistentContainer
    /// Reads change sets of the store's earlier model versions in its own (its versions are fixed at open).
    private let translator: VersionTranslator
    /// Whether change sets that only insert new objects skip the context
    /// (``DirectInsertReplay``); tests turn it off to compare the two paths.
    package var usesDirectInserts = true

    /// Which origins' change sets are taken, checked before anything is applied (docs/SYNC.md,
    /// "Signed change sets").
    public let trust: OriginTrust

    /// An engine for `store`, checking change sets with `trust`; without one, with the keys the
    /// store holds (``OriginTrust/Policy/storeKeysOnly``: origins it holds no key of are taken as they are).
    public init(store: any ReplicaStore, trust: OriginTrust? = nil) throws {
        self.store = store
        self.container = try PersistentContainer(store: store)
        self.translator = VersionTranslator(model: store.model, earlierModels: store.earlierModels)
        self.trust = try trust ?? OriginTrust(store: store)
    }

    /// An engine that merges through `container` (so the validators registered
    /// on it apply on replay too), whose store must be a ``ReplicaStore``.
    public init(container: PersistentContainer, trust: OriginTrust? = nil) throws {
        guard let store = container.store as? any ReplicaStore else { throw ReplayError.notReplicaStore }
        self.store = store
        self.container = container
        self.translator = VersionTranslator(model: store.model, earlierModels: store.earlierModels)
        self.trust = try trust ?? OriginTrust(store: store)
    }

    /// Applies change sets given as JSON lines (empty lines are skipped). Every
    /// line is checked first; one bad line rejects the whole batch.
    ///
    /// Called from a task that is cancelled (a daemon stopping), it stops between
    /// change sets: those applied stay applied, and the rest are neither applied nor
    /// held — the report does not count them, the store's vector does not cover
    /// them, and their sender, which still has them, sends them again.
    /// - Throws: ``ReplayError/malformed(line:_:)`` before anything is applied.
    public func apply(lines: [String]) throws -> ApplyReport {
        try apply(check(lines: lines))
    }

    /// Change-set lines checked and decoded against a store's model, to be
    /// applied by ``apply(_:)-(CheckedBatch)``.
    struct CheckedBatch: Sendable {
        /// The non-empty lines, decoded, each with its text.
        let entries: [(decoded: ChangeSetCodec.Decoded, line: String)]
    }

    /// Checks and decodes `lines` against the store's model (see ``apply(lines:)``):
    /// what an apply does before it writes anything. It needs nothing but the
    /// model, so it may run on any thread, ahead of the apply.
    /// - Throws: ``ReplayError/malformed(line:_:)`` for the first bad line.
    func check(lines: [String]) throws(ReplayError) -> CheckedBatch {
        CheckedBatch(entries: try LineDecoding.decode(lines, model: store.model, versionHash: store.modelVersionHash, verifier: trust.verifier))
    }

    /// Applies a checked batch (as ``apply(lines:)`` does once it has checked every line).
    func apply(_ batch: CheckedBatch) throws -> ApplyReport {
        var decoded: [(changeSet: ChangeSet, body: String)] = []
        var otherModel: [OtherModelLine] = []
        for (outcome, line) in batch.entries {
            switch outcome {
            case .changeSet(let changeSet): decoded.append((changeSet, line))
            case .otherModel(let origin, let sequence, let hash, _):
                // Made with an earlier version this store knows: read in this one, recorded as it came.
                switch translator.translate(line, madeWith: hash) {
                case .translated(let changeSet): decoded.append((changeSet, line))
                case .refused(let why): otherModel.append((origin, sequence, hash, line, why))
                case .unknownVersion: otherModel.append((origin, sequence, hash, line, nil))
                }
            }
        }
        return try apply(decoded, otherModel: otherModel)
    }

    /// Applies decoded change sets (their canonical text is recorded).
    /// - Throws: ``ReplayError/untrusted(line:_:)`` (line = position in `changeSets`, from 1) before
    ///   anything is applied, for a change set its origin did not sign.
    public func apply(_ changeSets: [ChangeSet]) throws -> ApplyReport {
        let verifier = trust.verifier
        let lines = changeSets.map { ($0, ChangeSetCodec.encode($0)) }
        for (index, (changeSet, line)) in lines.enumerated() {
            if let refusal = verifier.check(line, origin: changeSet.origin, sequence: changeSet.sequence, timestamp: changeSet.timestamp) {
                throw ReplayError.untrusted(line: index + 1, refusal)
            }
        }
        return try apply(lines, otherModel: [])
    }

    /// The first change set of `horizon` (origin, sequence) that `changeSet` does not know of: neither
    /// its own origin's earlier change sets nor its dependencies cover it.
    static func unknown(_ horizon: VersionVector, to changeSet: ChangeSet) -> (UUID, Int64)? {
        for (origin, needed) in horizon.sorted(by: { $0.key.uuidString < $1.key.uuidString }) {
            let known = origin == changeSet.origin ? changeSet.sequence : changeSet.dependencies[origin, default: 0]
            if known < needed { return (origin, needed) }
        }
        return nil
    }

    /// A line made with a model version this store cannot read now, and why when it knows the version.
    private typealias OtherModelLine = (origin: UUID, sequence: Int64, hash: String, body: String, reason: String?)

    private struct Key: Hashable, Comparable {
        var origin: String
        var sequence: Int64
        static func < (lhs: Key, rhs: Key) -> Bool { (lhs.origin, lhs.sequence) < (rhs.origin, rhs.sequence) }
    }

    private func apply(_ batch: [(changeSet: ChangeSet, body: String)],
                       otherModel: [OtherModelLine]) throws -> ApplyReport {
        var report = ApplyReport()
        let start = try store.replayStart()
        var vector = start.vector
        // Past the tombstone horizon: a change set this store lacks that does not know everything made
        // before the horizon could bring back an object whose delete is forgotten. Nothing is applied.
        if let horizonTime = start.horizonTime, !start.horizon.isEmpty {
            for entry in batch where entry.changeSet.sequence > vector[entry.changeSet.origin, default: 0] {
                if let (origin, needed) = Self.unknown(start.horizon, to: entry.changeSet) {
                    throw HistoryError.pastHorizon(origin: origin, needed: needed, horizon: horizonTime)
                }
            }
        }
        let versionHash = store.modelVersionHash
        for held in otherModel {
            if held.sequence <= vector[held.origin, default: 0] {
                report.duplicate += 1
            } else {
                let why = held.reason.map { "; it cannot be read in this store's version: \($0)" }
                    ?? "; the store does not know that version (a later one: it applies once this store is upgraded)"
                try store.hold(HeldChangeSet(origin: held.origin, sequence: held.sequence,
                                             reason: Backlog.modelReasonPrefix + "\(held.hash); this store has model \(versionHash)" + why, body: held.body))
                report.waiting += 1
            }
        }
        var queue: [Key: (changeSet: ChangeSet, body: String, held: Bool)] = [:]
        for held in start.held {
            let changeSet: ChangeSet
            switch try? ChangeSetCodec.decode(held.body, model: store.model, versionHash: versionHash) {
            case .changeSet(let current)?:
                changeSet = current
            case .otherModel(_, _, let hash, _)?:
                // Held before this store knew its version (it was upgraded since): read it in this one now.
                guard case .translated(let translated) = translator.translate(held.body, madeWith: hash) else { continue }
                changeSet = translated
            case nil:
                continue
            }
            queue[Key(origin: held.origin.uuidString, sequence: held.sequence)] = (changeSet, held.body, true)
        }
        for entry in batch {
            let key = Key(origin: entry.changeSet.origin.uuidString, sequence: entry.changeSet.sequence)
            if let existing = queue[key], !existing.held {
                report.duplicate += 1
                continue
            }
            if queue[key] != nil { report.duplicate += 1 }
            queue[key] = (entry.changeSet, entry.body, queue[key]?.held ?? false)
        }
        // The fast path's requests are prepared on another thread, ahead of the writes (in the first pass's order).
        let order = queue.keys.sorted()
        let positions = Dictionary(uniqueKeysWithValues: order.enumerated().map { ($1, $0) })
        let pipeline = usesDirectInserts && order.count > 1
            ? DirectInsertPipeline(order.compactMap { key in queue[key].map { ($0.changeSet, $0.body) } }, container: container)
            : nil
        defer { pipeline?.finish() }
        var progress = true
        var interrupted = false
        while progress, !interrupted {
            progress = false
            for key in queue.keys.sorted() {
                if Task.isCancelled {
                    interrupted = true
                    break
                }
                guard let entry = queue[key] else { continue }
                let changeSet = entry.changeSet
                let have = vector[changeSet.origin, default: 0]
                if changeSet.sequence <= have {
                    if !entry.held { report.duplicate += 1 }
                    if entry.held { try store.release(origin: changeSet.origin, sequence: changeSet.sequence) }
                    queue[key] = nil
                    progress = true
                    continue
                }
                /// Keeps the change set back (held once, with why) and takes it out of this apply.
                func holdBack(_ reason: String) throws {
                    if !entry.held {
                        try store.hold(HeldChangeSet(origin: changeSet.origin, sequence: changeSet.sequence, reason: reason, body: entry.body))
                        report.waiting += 1
                    }
                    queue[key] = nil
                }
                // This store's own change sets come only from its own saves: one from a peer is held, not applied.
                if changeSet.origin == store.identifier {
                    try holdBack(Self.ownOriginReason)
                    continue
                }
                // A new origin past the bound waits, held with why.
                if vector[changeSet.origin] == nil, vector.count >= maximumOrigins {
                    try holdBack(Self.originsReason(maximumOrigins))
                    continue
                }
                guard changeSet.sequence == have + 1,
                      changeSet.dependencies.allSatisfy({ $0.key == store.identifier || vector[$0.key, default: 0] >= $0.value }) else { continue }
                // A clock too far ahead of this store's waits (held, with why) rather than move this store's clock there.
                if changeSet.timestamp > HybridTimestamp.latestAccepted(at: now()) {
                    try holdBack(Self.aheadReason(changeSet.timestamp))
                    continue
                }
                let prepared = pipeline.flatMap { pipeline in positions[key].map { (pipeline, $0) } }
                switch try replay(changeSet, body: entry.body, pipeline: prepared) {
                case .applied: report.applied += 1
                case .quarantined: report.quarantined += 1
                }
                vector[changeSet.origin] = changeSet.sequence
                if entry.held { try store.release(origin: changeSet.origin, sequence: changeSet.sequence) }
                queue[key] = nil
                progress = true
            }
        }
        for entry in queue.values where !entry.held && !interrupted {
            let changeSet = entry.changeSet
            let have = vector[changeSet.origin, default: 0]
            var missing = changeSet.sequence > have + 1 ? ["\(changeSet.origin.uuidString) \(have + 1)…\(changeSet.sequence - 1)"] : []
            missing += changeSet.dependencies.filter { vector[$0.key, default: 0] < $0.value }.map { "\($0.key.uuidString) up to \($0.value)" }
            try store.hold(HeldChangeSet(origin: changeSet.origin, sequence: changeSet.sequence,
                                         reason: "waiting for change sets \(missing.sorted().joined(separator: ", "))", body: entry.body))
            report.waiting += 1
        }
        report.vector = try store.historyState().vector
        return report
    }

    /// Most origins this store takes change sets from (`sync.max_origins`): a change set of a
    /// new origin past them is held, with the reason, until an operator removes bogus origins
    /// (`ferry origins remove`) or raises the bound. Forged origins are permanent and replicate,
    /// and every vector carries them.
    public var maximumOrigins = 10_000

    /// The time ahead-of-clock checks are made at (tests move it).
    package var now: @Sendable () -> Date = { Date() }

    static let ownOriginReason = "it is under this store's own origin, past what this store wrote; a store takes none of its own change sets from peers " +
        "(a forged change set, or a store restored from a backup older than what its peers hold: see docs/SYNC.md)"

    static func originsReason(_ bound: Int) -> String {
        "it is from a new origin, and this store already takes change sets from \(bound) origins (sync.max_origins); " +
            "list them with `ferry origins list`, remove bogus ones with `ferry origins remove`, or raise the bound"
    }

    static func aheadReason(_ timestamp: HybridTimestamp) -> String {
        "its clock (\(timestamp)) is more than \(Int(HybridTimestamp.maximumSkew)) s ahead of this store's; " +
            "it waits until this store's clock catches up (a peer's clock far ahead, or a forged change set: check the origin's clock, or remove the origin)"
    }

    /// The change sets held back (waiting for a predecessor, or made with another model), with why.
    public func heldChangeSets() throws -> [HeldChangeSet] {
        try store.heldChangeSets()
    }

    /// Applies the quarantined change sets again, in the order they arrived
    /// (after the cause was fixed, e.g. a validation rule relaxed or a missing
    /// object restored); those that still fail stay quarantined with their new reason.
    public func retryQuarantined() throws -> ApplyReport {
        var report = ApplyReport()
        for entry in try store.quarantinedChangeSets() {
            guard case .changeSet(let changeSet) = try ChangeSetCodec.decode(entry.body, model: store.model, versionHash: store.modelVersionHash) else {
                continue
            }
            switch try replay(changeSet, body: entry.body, retry: true) {
            case .applied: report.applied += 1
            case .quarantined: report.quarantined += 1
            }
        }
        report.vector = try store.historyState().vector
        return report
    }

    enum Outcome { case applied, quarantined }

    /// Applies one change set whose predecessors are all here; `pipeline` has
    /// its fast-path draft prepared (at that index), if any was started.
    private func replay(_ changeSet: ChangeSet, body: String, retry: Bool = false,
                        pipeline: (DirectInsertPipeline, index: Int)? = nil) throws -> Outcome {
        if usesDirectInserts {
            let draft = if let pipeline { pipeline.0.take(pipeline.index) }
                        else { DirectInsertReplay.prepare(changeSet, body: body, retry: retry, container: container) }
            if let draft, try DirectInsertReplay(store: store, container: container).apply(draft, discard: pipeline?.0.discard) {
                return .applied
            }
        }
        var refused = Set<String>(), revived = Set<String>()
        var leftInvalid: [ValidationError] = []
        var repairedMinimums = false
        for _ in 0..<8 {
            let context = container.newContext()
            var merge = MergeExecutor(store: store, context: context, changeSet: changeSet, body: body, refusedDeletes: refused, revived: revived,
                                      replacedRelationships: translator.replacedRelationships)
            merge.annotation.leftInvalid = leftInvalid
            do {
                try merge.applyChanges()
                if !context.hasChanges, !merge.annotation.restored.isEmpty || !merge.annotation.merges.isEmpty || !merge.annotation.repairs.isEmpty
                    || !merge.annotation.carried.isEmpty {
                    // No row changes, but a restore (a delete Deny refused here), a count repair (a member the change
                    // set added and the repair removed) or a merge (a duplicate created and merged at once) must be
                    // recorded: the store records the replay as any other.
                    var annotation = merge.annotation
                    annotation.isRetry = retry
                    _ = try store.saveReplay(SaveRequest(), recording: annotation)
                    return .applied
                }
                if !context.hasChanges {
                    try store.recordReceived(changeSet, body: body, as: ReceivedRecord(
                        writes: merge.annotation.writes, tombstones: merge.annotation.tombstonesOnly,
                        repairDeletes: merge.annotation.repairDeletes, isRetry: retry))
                    return .applied
                }
                var annotation = merge.annotation
                annotation.isRetry = retry
                try context.saveReplay(annotation, to: store)
                return .applied
            } catch SaveError.conflict {
                continue
            } catch SaveError.validationFailed(let failures) {
                // A delete refused against the local graph, by Deny or because it clears a required to-one:
                // keep the object, and restore it everywhere.
                let denied = try failures.compactMap { failure -> String? in
                    guard let id = try? container.managedObjectID(forURIString: failure.objectURI) else { return nil }
                    if failure.code == .relationshipDeniedDelete {
                        return merge.annotation.deletes.contains(id) ? merge.originURI(of: id) : nil
                    }
                    return try merge.deleteClearingRequiredReference(failure, of: id)
                }
                if denied.count == failures.count, !denied.isEmpty, !Set(denied).isSubset(of: refused) {
                    refused.formUnion(denied)
                    continue
                }
                // Members deleted concurrently left a to-many below its minimum: the newest-deleted come back.
                if !repairedMinimums, failures.contains(where: { $0.code == .relationshipLacksMinimumCount }) {
                    repairedMinimums = true
                    let repair = try merge.membersToBringBack(for: failures)
                    if !repair.isEmpty {
                        refused.formUnion(repair.refuse)
                        revived.formUnion(repair.revive)
                        continue
                    }
                }
                // Valid on its own, invalid only with what it met here: applied all the same, so that
                // no replica's state depends on the order change sets arrived in (docs/SYNC.md, "Validation").
                let own = failures.filter { merge.isOwnFailure($0) }
                if own.isEmpty, leftInvalid.isEmpty, !failures.contains(where: { $0.code == .relationshipDeniedDelete }) {
                    // Named by origin URI, the name every replica lists it under (not this context's
                    // temporary URI of an object the change set inserts).
                    leftInvalid = failures.map { failure in
                        let id = try? container.managedObjectID(forURIString: failure.objectURI)
                        let name = merge.originURI(ofObjectURI: failure.objectURI)
                            ?? id.flatMap { id in id.isTemporaryID ? nil : try? store.originURI(of: id) } ?? failure.objectURI
                        return ValidationError(code: failure.code, entityName: failure.entityName, objectURI: name,
                                               key: failure.key, message: failure.message)
                    }
                    continue
                }
                let reason = "the store would be invalid: " + failures.map(\.description).joined(separator: "; ")
                try store.recordReceived(changeSet, body: body, as: ReceivedRecord(quarantineReason: reason, isRetry: retry))
                return .quarantined
            } catch let problem as MergeProblem {
                try store.recordReceived(changeSet, body: body, as: ReceivedRecord(quarantineReason: problem.description, isRetry: retry))
                return .quarantined
            }
        }
        throw ReplayError.busy(origin: changeSet.origin, sequence: changeSet.sequence)
    }
}
