import FerryModel

/// An ``OperationBatch`` checked against a model and a store, ready to apply: entities and
/// properties resolved to the container's runtimes and property indexes, attribute values
/// decoded, refs numbered (slots), URIs resolved to object IDs. Made in one pass, so a batch of
/// 100,000 inserts costs no name lookups at apply time.
struct BatchPlan: Sendable {
    /// An object an operation names: one inserted by this batch, or one the store holds.
    enum Target {
        /// The object inserted under this slot (a ref).
        case inserted(slot: Int)
        /// An existing object.
        case existing(ObjectID)
    }

    /// A property value, decoded.
    enum Value {
        case attribute(AttributeValue?)
        case toOne(Target?)
        case toMany([Target])
    }

    /// One operation.
    struct Operation {
        enum Kind {
            /// Insert an object of this entity, under this slot (nil when the insert has no ref).
            case insert(EntityRuntime, slot: Int?)
            case update(Target)
            case delete(Target)
        }

        var kind: Kind
        /// Where the operation's values are in its save's ``Save/values``.
        var values: Range<Int>
    }

    /// One save: its operations, and their values in one array (one allocation per save, not per operation).
    struct Save {
        var operations: [Operation]
        /// Values by property index, each operation's in the input's order.
        var values: [(index: Int, value: Value)]
        /// The slots of the refs its inserts define.
        var slots: Range<Int>
    }

    /// The saves, in order.
    var saves: [Save]
    /// The refs, by slot.
    var refs: [String]

    /// What the checks keep between saves.
    private let runtimes: [String: EntityRuntime]
    private var slotOfRef: [String: Int] = [:]
    private var runtimeOfSlot: [EntityRuntime] = []
    private var existing: [String: (ObjectID, EntityRuntime)] = [:]

    /// An empty plan for `container`'s model; ``add(_:in:)`` checks and adds each save.
    /// `expectedOperations` sizes the tables (a guess is fine).
    init(container: PersistentContainer, expectedOperations: Int = 0) {
        self.runtimes = container.runtimes
        self.saves = []
        self.refs = []
        slotOfRef.reserveCapacity(expectedOperations)
        refs.reserveCapacity(expectedOperations)
        runtimeOfSlot.reserveCapacity(expectedOperations)
    }

    /// Checks `batch` against `context`'s model and store.
    /// - Throws: ``InterchangeError/invalidOperation(save:operation:reason:)`` naming the first wrong operation.
    init(_ batch: OperationBatch, context: ManagedObjectContext) throws(InterchangeError) {
        self.init(container: context.container, expectedOperations: batch.saves.reduce(0) { $0 + $1.count })
        for operations in batch.saves { try add(operations, in: context) }
    }

    /// Checks the next save's operations against the model and `context`'s store, and adds them.
    /// - Throws: ``InterchangeError/invalidOperation(save:operation:reason:)`` naming the first wrong operation.
    mutating func add(_ operations: [OperationBatch.Operation], in context: ManagedObjectContext) throws(InterchangeError) {
        let save = saves.count + 1
        let firstSlot = refs.count
        // Refs first: a value may name an object inserted later in the same save.
        var runtimeOfInsert: [EntityRuntime?] = []
        runtimeOfInsert.reserveCapacity(operations.count)
        for (operationIndex, operation) in operations.enumerated() {
            guard case .insert(let name, let ref) = operation.kind else { runtimeOfInsert.append(nil); continue }
            guard let runtime = runtimes[name] else {
                throw InterchangeError.invalidOperation(save: save, operation: operationIndex + 1, reason: "the model has no entity \"\(name)\"")
            }
            guard !runtime.entity.isAbstract else {
                throw InterchangeError.invalidOperation(save: save, operation: operationIndex + 1,
                                                        reason: "entity \"\(name)\" is abstract; " +
                                                            "insert one of its subentities (\(runtime.entity.subentityNames.joined(separator: ", ")))")
            }
            runtimeOfInsert.append(runtime)
            guard let ref else { continue }
            guard slotOfRef.updateValue(refs.count, forKey: ref) == nil else {
                throw InterchangeError.invalidOperation(save: save, operation: operationIndex + 1, reason: "ref \"\(ref)\" is defined twice")
            }
            refs.append(ref)
            runtimeOfSlot.append(runtime)
        }

        func target(_ reference: OperationBatch.ObjectReference, operation: Int) throws(InterchangeError) -> (Target, EntityRuntime) {
            switch reference {
            case .ref(let ref):
                guard let slot = slotOfRef[ref] else {
                    throw InterchangeError.invalidOperation(save: save, operation: operation,
                                                            reason: "ref \"\(ref)\" is not defined by an insert in this save or an earlier one")
                }
                return (.inserted(slot: slot), runtimeOfSlot[slot])
            case .uri(let uri):
                if let (id, runtime) = existing[uri] { return (.existing(id), runtime) }
                do {
                    let object = try context.existingObject(withURI: uri)
                    existing[uri] = (object.objectID, object.runtime)
                    return (.existing(object.objectID), object.runtime)
                } catch {
                    throw InterchangeError.invalidOperation(save: save, operation: operation, reason: error.description)
                }
            }
        }

        var planned: [Operation] = []
        planned.reserveCapacity(operations.count)
        var values: [(index: Int, value: Value)] = []
        values.reserveCapacity(operations.reduce(0) { $0 + $1.values.count })
        for (operationIndex, operation) in operations.enumerated() {
            let number = operationIndex + 1
            let runtime: EntityRuntime
            let kind: Operation.Kind
            switch operation.kind {
            case .insert(_, let ref):
                guard let insertRuntime = runtimeOfInsert[operationIndex] else { continue }
                runtime = insertRuntime
                kind = .insert(runtime, slot: ref.flatMap { slotOfRef[$0] })
            case .update(let reference):
                let (object, objectRuntime) = try target(reference, operation: number)
                runtime = objectRuntime
                kind = .update(object)
            case .delete(let reference):
                kind = .delete(try target(reference, operation: number).0)
                planned.append(Operation(kind: kind, values: values.count..<values.count))
                continue
            }
            let firstValue = values.count
            for (key, json) in operation.values {
                guard let index = runtime.propertyIndex(named: key) else {
                    throw InterchangeError.invalidOperation(save: save, operation: number, reason: "entity \"\(runtime.name)\" has no property \"\(key)\"")
                }
                switch runtime.kinds[index] {
                case .attribute(let attribute):
                    switch AttributeJSON.decode(json, as: attribute.type) {
                    case .success(let value): values.append((index, .attribute(value)))
                    case .failure(let failure):
                        throw InterchangeError.invalidOperation(save: save, operation: number, reason: "\(runtime.name).\(key): \(failure.message)")
                    }
                case .toOne(let relationship), .toMany(let relationship):
                    /// The object a member names, checked against the relationship's destination.
                    func member(_ json: JSONValue) throws(InterchangeError) -> Target {
                        guard case .string(let text) = json else {
                            throw InterchangeError.invalidOperation(save: save, operation: number,
                                                                    reason: "\(runtime.name).\(key): members must be refs or URIs (strings); " +
                                                                        "got \(json.kindName)")
                        }
                        let (object, destination) = try target(.init(text), operation: number)
                        guard destination.isKind(of: relationship.destinationEntityName) else {
                            throw InterchangeError.invalidOperation(save: save, operation: number,
                                                                    reason: "\(runtime.name).\(key) takes \(relationship.destinationEntityName) objects; " +
                                                                        "\"\(text)\" is a \(destination.name)")
                        }
                        return object
                    }
                    switch (json, relationship.isToMany) {
                    case (.null, false): values.append((index, .toOne(nil)))
                    case (.null, true): values.append((index, .toMany([])))
                    case (.string, false): values.append((index, .toOne(try member(json))))
                    case (.array(let items), true):
                        var targets: [Target] = []
                        targets.reserveCapacity(items.count)
                        for item in items { targets.append(try member(item)) }
                        values.append((index, .toMany(targets)))
                    default:
                        let expected = relationship.isToMany ? "an array of refs or URIs" : "a ref, a URI or null"
                        throw InterchangeError.invalidOperation(save: save, operation: number,
                                                                reason: "\(runtime.name).\(key) takes \(expected); got \(json.kindName)")
                    }
                }
            }
            planned.append(Operation(kind: kind, values: firstValue..<values.count))
        }
        saves.append(Save(operations: planned, values: values, slots: firstSlot..<refs.count))
    }
}
