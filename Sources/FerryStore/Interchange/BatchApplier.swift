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
        /// Permanent URIs of the objects inserted with a ref, by ref, for the saves that committed.
        public var refs: [String: String]
        /// How many saves committed.
        public var committedSaves: Int
        /// The failing save (1-based) and why, when one failed.
        public var failure: (save: Int, error: SaveError, refsByObjectURI: [String: String])?
    }

    /// Checks the batch and applies it; `progress` hears the number of saves committed after each.
    /// - Throws: ``InterchangeError`` when the batch is invalid (nothing applied).
    public func apply(_ batch: OperationBatch, progress: ((Int) -> Void)? = nil) throws(InterchangeError) -> Outcome {
        let context = container.newContext()
        context.mergePolicy = mergePolicy
        context.transactionAuthor = "ferry put"
        try check(batch, context: context)
        let operationCount = batch.saves.reduce(0) { $0 + $1.count }
        var objects: [String: ManagedObject] = [:]
        objects.reserveCapacity(operationCount)
        var outcome = Outcome(refs: [:], committedSaves: 0, failure: nil)
        outcome.refs.reserveCapacity(operationCount)
        for (saveIndex, operations) in batch.saves.enumerated() {
            let saveNumber = saveIndex + 1
            var refsInSave: [(String, ManagedObject)] = []
            /// The refs of this save's objects, by their (temporary) URI, for error reports.
            func refNames() -> [String: String] {
                Dictionary(refsInSave.map { ($0.1.objectID.uriString, $0.0) }, uniquingKeysWith: { first, _ in first })
            }
            do {
                // Create every object first, so that values may refer to refs inserted later in the same save.
                var created: [ManagedObject] = []
                for operation in operations {
                    guard case .insert(let entity, let ref) = operation.kind else { continue }
                    let object = try context.insert(entityName: entity)
                    created.append(object)
                    if let ref { objects[ref] = object; refsInSave.append((ref, object)) }
                }
                var insertIndex = 0
                for operation in operations {
                    switch operation.kind {
                    case .insert:
                        try set(operation.values, on: created[insertIndex], objects: objects, context: context)
                        insertIndex += 1
                    case .update(let reference):
                        try set(operation.values, on: resolve(reference, objects, context), objects: objects, context: context)
                    case .delete(let reference):
                        context.delete(try resolve(reference, objects, context))
                    }
                }
            } catch {
                // The check pass makes this unreachable for well-formed input; report it like a save failure.
                let names = refNames()
                context.rollback()
                outcome.failure = (saveNumber, .storeFailed("\(error)"), names)
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
            for (ref, object) in refsInSave { outcome.refs[ref] = object.objectID.uriString }
            outcome.committedSaves = saveNumber
            progress?(saveNumber)
        }
        return outcome
    }

    // MARK: - Checking

    /// Checks every operation against the model and the store.
    private func check(_ batch: OperationBatch, context: ManagedObjectContext) throws(InterchangeError) {
        let model = container.model
        var entityOfRef: [String: String] = [:]
        var checkedURIs: [String: String] = [:]
        func entityName(of reference: OperationBatch.ObjectReference, save: Int, operation: Int) throws(InterchangeError) -> String {
            switch reference {
            case .ref(let ref):
                guard let entity = entityOfRef[ref] else {
                    throw InterchangeError.invalidOperation(save: save, operation: operation, reason: "ref \"\(ref)\" is not defined by an insert in this save or an earlier one")
                }
                return entity
            case .uri(let uri):
                if let entity = checkedURIs[uri] { return entity }
                do {
                    let object = try context.existingObject(withURI: uri)
                    checkedURIs[uri] = object.entity.name
                    return object.entity.name
                } catch {
                    throw InterchangeError.invalidOperation(save: save, operation: operation, reason: error.description)
                }
            }
        }
        for (saveIndex, operations) in batch.saves.enumerated() {
            let save = saveIndex + 1
            for operation in operations {
                if case .insert(let entity, let ref) = operation.kind, let ref {
                    guard entityOfRef[ref] == nil else {
                        throw InterchangeError.invalidOperation(save: save, operation: 0, reason: "ref \"\(ref)\" is defined twice")
                    }
                    entityOfRef[ref] = entity
                }
            }
            for (operationIndex, operation) in operations.enumerated() {
                let number = operationIndex + 1
                let entity: EntityDescription
                switch operation.kind {
                case .insert(let name, _):
                    guard let found = model.entity(named: name) else {
                        throw InterchangeError.invalidOperation(save: save, operation: number, reason: "the model has no entity \"\(name)\"")
                    }
                    guard !found.isAbstract else {
                        throw InterchangeError.invalidOperation(save: save, operation: number, reason: "entity \"\(name)\" is abstract; insert one of its subentities (\(found.subentityNames.joined(separator: ", ")))")
                    }
                    entity = found
                case .update(let reference), .delete(let reference):
                    let name = try entityName(of: reference, save: save, operation: number)
                    guard let found = model.entity(named: name) else { continue }
                    entity = found
                }
                for (key, value) in operation.values {
                    guard let property = entity.property(named: key) else {
                        throw InterchangeError.invalidOperation(save: save, operation: number, reason: "entity \"\(entity.name)\" has no property \"\(key)\"")
                    }
                    switch property {
                    case .attribute(let attribute):
                        if case .failure(let failure) = AttributeJSON.decode(value, as: attribute.type) {
                            throw InterchangeError.invalidOperation(save: save, operation: number, reason: "\(entity.name).\(key): \(failure.message)")
                        }
                    case .relationship(let relationship):
                        let targets: [JSONValue]
                        switch (value, relationship.isToMany) {
                        case (.null, _): targets = []
                        case (.string, false): targets = [value]
                        case (.array(let items), true): targets = items
                        default:
                            let expected = relationship.isToMany ? "an array of refs or URIs" : "a ref, a URI or null"
                            throw InterchangeError.invalidOperation(save: save, operation: number, reason: "\(entity.name).\(key) takes \(expected); got \(value.kindName)")
                        }
                        for target in targets {
                            guard let text = target.stringValue else {
                                throw InterchangeError.invalidOperation(save: save, operation: number, reason: "\(entity.name).\(key): members must be refs or URIs (strings); got \(target.kindName)")
                            }
                            let targetEntity = try entityName(of: .init(text), save: save, operation: number)
                            guard let destination = model.entity(named: targetEntity), destination.isKind(of: relationship.destinationEntityName) else {
                                throw InterchangeError.invalidOperation(save: save, operation: number, reason: "\(entity.name).\(key) takes \(relationship.destinationEntityName) objects; \"\(text)\" is a \(targetEntity)")
                            }
                        }
                    }
                }
            }
        }
    }

    // MARK: - Applying

    private func resolve(_ reference: OperationBatch.ObjectReference, _ objects: [String: ManagedObject],
                         _ context: ManagedObjectContext) throws -> ManagedObject {
        switch reference {
        case .ref(let ref):
            guard let object = objects[ref] else { throw InterchangeError.invalidOperation(save: 0, operation: 0, reason: "unknown ref \(ref)") }
            return object
        case .uri(let uri):
            return try context.existingObject(withURI: uri)
        }
    }

    private func set(_ values: [(String, JSONValue)], on object: ManagedObject, objects: [String: ManagedObject],
                     context: ManagedObjectContext) throws {
        for (key, json) in values {
            guard let property = object.entity.property(named: key) else { continue }
            switch property {
            case .attribute(let attribute):
                let value = try AttributeJSON.decode(json, as: attribute.type).get()
                try object.setAttributeValue(value, forKey: key)
            case .relationship(let relationship):
                if relationship.isToMany {
                    let items: [JSONValue]
                    if case .array(let array) = json { items = array } else { items = [] }
                    let targets = try items.compactMap(\.stringValue).map { try resolve(.init($0), objects, context) }
                    try object.setValue(targets, forKey: key)
                } else {
                    let target = try json.stringValue.map { try resolve(.init($0), objects, context) }
                    try object.setValue(target, forKey: key)
                }
            }
        }
    }
}
