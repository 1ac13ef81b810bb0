import Foundation
import FerryModel

/// Applies an ``OperationBatch`` to a container, one context save per batch save.
///
/// The whole batch is checked first — entities, keys, value types, refs
/// (defined in the same or an earlier save), URIs (of this store, and
/// existing) — so a bad batch applies nothing. Then the saves run in order;
/// the first save that fails (validation, Deny, conflict) writes nothing and
/// stops the batch, and the saves before it stay committed.
public struct BatchApplier {
    /// The container to write to.
    public let container: PersistentContainer

    /// Creates an applier.
    /// What a save that duplicates a unique key does.
    public let mergePolicy: MergePolicy

    /// An applier writing to `container`'s store, its saves made under `mergePolicy`.
    public init(container: PersistentContainer, mergePolicy: MergePolicy = .error) {
        self.container = container
        self.mergePolicy = mergePolicy
    }

    /// What happened.
    public struct Outcome {
        /// The objects inserted with a ref by the saves that committed: each ref and the object's
        /// permanent ID, in the input's order.
        public var insertedObjects: [(ref: String, objectID: ObjectID)]
        /// How many saves committed.
        public var committedSaves: Int
        /// The failing save (1-based) and why, when one failed.
        public var failure: (save: Int, error: SaveError, refsByObjectURI: [String: String])?

        /// ``insertedObjects`` as a dictionary: permanent URI by ref.
        public var refs: [String: String] {
            Dictionary(insertedObjects.map { ($0.ref, $0.objectID.uriString) }, uniquingKeysWith: { first, _ in first })
        }
    }

    /// Checks the batch and applies it; `progress` hears how many saves committed, of how many, after each.
    /// - Throws: ``InterchangeError`` when the batch is invalid (nothing applied).
    public func apply(_ batch: OperationBatch, progress: ((_ committed: Int, _ total: Int) -> Void)? = nil) throws(InterchangeError) -> Outcome {
        let context = makeContext()
        return run(try BatchPlan(batch, context: context), in: context, progress: progress)
    }

    /// Parses `text` (what ``OperationBatch/parse(_:)`` reads), checks it and applies it, as
    /// `apply(try OperationBatch.parse(text))` does but faster on a long input: the text is
    /// parsed on a thread of its own while this one checks each save as it arrives. Nothing is
    /// written before the whole text is parsed and checked, and the error reported for a bad
    /// text is the same (a parse error wherever it is comes before a wrong operation).
    /// - Throws: ``InterchangeError`` when the text is invalid (nothing applied).
    public func apply(text: String, progress: ((_ committed: Int, _ total: Int) -> Void)? = nil) throws(InterchangeError) -> Outcome {
        let context = makeContext()
        let handoff = SaveHandoff()
        DedicatedThreads.start(named: "ferry-parse") {
            var text = text
            handoff.finish(text.withUTF8 { bytes in
                Result { () throws(InterchangeError) in
                    try OperationBatch.parse(utf8: bytes) { operations in handoff.put(operations) }
                }
            })
            // The parsed values are freed on the thread that made them, once all are checked: freed on
            // the checking thread they took the malloc arena's lock from under this one (a run in
            // three took 40 % more CPU), and here it happens beside the saves.
            handoff.releaseWhenTaken()
            handoff.disposeWhenGiven()
        }
        // (W1's rows as JSON lines take about 110 bytes per operation.)
        var plan = BatchPlan(container: container, expectedOperations: text.utf8.count / 100)
        var invalid: InterchangeError?
        while let operations = handoff.take() {
            guard invalid == nil else { continue }  // (read on: a parse error further on is reported first)
            do { try plan.add(operations, in: context) } catch { invalid = error }
        }
        let outcome: Result<Outcome, InterchangeError>
        if case .failure(let error) = handoff.parseResult {
            outcome = .failure(error)
        } else if let invalid {
            outcome = .failure(invalid)
        } else {
            outcome = .success(run(plan, in: context, progress: progress))
        }
        handoff.dispose(consume plan)
        return try outcome.get()
    }

    private func makeContext() -> ManagedObjectContext {
        let context = container.newContext()
        context.mergePolicy = mergePolicy
        context.transactionAuthor = "ferry put"
        return context
    }

    /// Applies a checked plan, one context save per save, stopping at the first that fails.
    private func run(_ plan: BatchPlan, in context: ManagedObjectContext, progress: ((_ committed: Int, _ total: Int) -> Void)?) -> Outcome {
        var objects = [ManagedObject?](repeating: nil, count: plan.refs.count)
        var outcome = Outcome(insertedObjects: [], committedSaves: 0, failure: nil)
        outcome.insertedObjects.reserveCapacity(plan.refs.count)
        for (saveIndex, save) in plan.saves.enumerated() {
            let saveNumber = saveIndex + 1
            /// The refs of this save's objects, by their (temporary) URI, for error reports.
            func refNames() -> [String: String] {
                var names: [String: String] = [:]
                for slot in save.slots {
                    if let object = objects[slot] { names[object.objectID.uriString] = plan.refs[slot] }
                }
                return names
            }
            do {
                // Create every object first, so that values may refer to refs inserted later in the same save.
                var created: [ManagedObject] = []
                created.reserveCapacity(save.operations.count)
                for operation in save.operations {
                    guard case .insert(let runtime, let slot) = operation.kind else { continue }
                    let object = try context.insert(runtime: runtime)
                    created.append(object)
                    if let slot { objects[slot] = object }
                }
                var insertIndex = 0
                for operation in save.operations {
                    switch operation.kind {
                    case .insert:
                        try set(save.values[operation.values], on: created[insertIndex], objects, context)
                        insertIndex += 1
                    case .update(let target):
                        try set(save.values[operation.values], on: resolve(target, objects, context), objects, context)
                    case .delete(let target):
                        context.delete(try resolve(target, objects, context))
                    }
                }
            } catch {
                // The plan makes this unreachable for well-formed input; report it like a save failure.
                let names = refNames()
                context.rollback()
                outcome.failure = (saveNumber, .storeFailed(StoreFailure(error)), names)
                return outcome
            }
            do {
                try context.save()
            } catch {
                let names = refNames()
                context.rollback()
                outcome.failure = (saveNumber, error, names)
                return outcome
            }
            for slot in save.slots {
                if let object = objects[slot] { outcome.insertedObjects.append((plan.refs[slot], object.objectID)) }
            }
            outcome.committedSaves = saveNumber
            progress?(saveNumber, plan.saves.count)
        }
        return outcome
    }

    // MARK: - Applying

    private struct UnknownObject: FerryError {
        /// One kind: a ref whose insert did not happen.
        enum Code: String, Hashable, Sendable {
            /// The ref's insert was not made.
            case unknownObject
        }

        let slot: Int
        var code: Code { .unknownObject }
        var description: String { "the object of ref slot \(slot) was not inserted" }
    }

    private func resolve(_ target: BatchPlan.Target, _ objects: [ManagedObject?], _ context: ManagedObjectContext) throws -> ManagedObject {
        switch target {
        case .inserted(let slot):
            guard let object = objects[slot] else { throw UnknownObject(slot: slot) }
            return object
        case .existing(let id):
            return try context.existingObject(with: id)
        }
    }

    private func set(_ values: ArraySlice<(index: Int, value: BatchPlan.Value)>, on object: ManagedObject, _ objects: [ManagedObject?],
                     _ context: ManagedObjectContext) throws {
        for (index, value) in values {
            switch value {
            case .attribute(let attribute):
                try context.fulfillFault(object)
                object.setAttribute(index, attribute, in: context)
            case .toOne(let target):
                try context.setToOne(object, index, to: target.map { try resolve($0, objects, context) })
            case .toMany(let targets):
                try context.replaceToMany(object, index, with: targets.map { try resolve($0, objects, context) })
            }
        }
    }
}

/// The saves a parsing thread hands to the checking one, in order, and how the parse ended.
private final class SaveHandoff: @unchecked Sendable {
    // (@unchecked: every stored property is read and written only while `condition` is locked.)
    private let condition = NSCondition()
    private var waiting: [[OperationBatch.Operation]] = []
    private var next = 0
    private var allTaken = false
    private var disposal: BatchPlan?
    private var disposalGiven = false
    private var result: Result<Void, InterchangeError>?

    /// Hands over one save's operations (the parsing thread).
    func put(_ operations: [OperationBatch.Operation]) {
        condition.lock()
        waiting.append(operations)
        condition.signal()
        condition.unlock()
    }

    /// Ends the handoff with the parse's result (the parsing thread).
    func finish(_ result: Result<Void, InterchangeError>) {
        condition.lock()
        self.result = result
        condition.signal()
        condition.unlock()
    }

    /// The next save's operations, waiting for them; nil once the parse has ended and all were taken.
    func take() -> [OperationBatch.Operation]? {
        condition.lock()
        defer { condition.unlock() }
        while next == waiting.count, result == nil { condition.wait() }
        guard next < waiting.count else {
            allTaken = true
            condition.broadcast()
            return nil
        }
        defer { next += 1 }
        return waiting[next]
    }

    /// Waits until every save was taken, then lets go of them (the parsing thread).
    func releaseWhenTaken() {
        condition.lock()
        while !allTaken { condition.wait() }
        let taken = waiting
        waiting = []
        condition.unlock()
        _ = consume taken  // (the last reference: freed here, outside the lock)
    }

    /// Gives the plan, once applied, to the parsing thread to free (the checking thread).
    func dispose(_ plan: consuming BatchPlan) {
        condition.lock()
        disposal = plan
        disposalGiven = true
        condition.broadcast()
        condition.unlock()
    }

    /// Waits for the plan and frees it (the parsing thread): a plan of 100,000 operations took the
    /// checking thread 20 ms to free, after its last save.
    func disposeWhenGiven() {
        condition.lock()
        while !disposalGiven { condition.wait() }
        let plan = disposal.take()
        condition.unlock()
        _ = consume plan
    }

    /// How the parse ended (after ``take()`` returned nil).
    var parseResult: Result<Void, InterchangeError>? {
        condition.lock()
        defer { condition.unlock() }
        return result
    }
}
