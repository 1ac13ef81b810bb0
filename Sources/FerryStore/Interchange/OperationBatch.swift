import Foundation
import FerryModel

/// A list of saves, each a list of insert/update/delete operations, in the
/// JSON form `ferry put` reads:
///
/// ```json
/// [{"op":"insert","entity":"Person","ref":"john","values":{"name":"John"}},
///  {"op":"insert","entity":"Person","ref":"jane","values":{"name":"Jane","manager":"john"}}]
/// ```
///
/// A file holds one JSON array (one save) or JSON lines, each an array (one
/// save per line). `ref`s name inserted objects for later operations of the
/// same file; `object` takes a ref or a permanent URI.
public struct OperationBatch: Sendable {
    /// One operation.
    public struct Operation: Sendable {
        /// What the operation does.
        public enum Kind: Sendable {
            case insert(entity: String, ref: String?)
            case update(ObjectReference)
            case delete(ObjectReference)
        }

        /// What the operation does.
        public var kind: Kind
        /// Property values to set, by key.
        public var values: [(String, JSONValue)]
    }

    /// A ref from this batch or a permanent URI.
    public enum ObjectReference: Sendable, Hashable {
        case ref(String)
        case uri(String)

        init(_ text: String) {
            self = text.hasPrefix("x-coredata:") ? .uri(text) : .ref(text)
        }
    }

    /// The saves, in order.
    public var saves: [[Operation]]

    /// Parses a batch. Nothing is checked against a model yet; see ``BatchApplier``.
    ///
    /// The text is JSON lines: each value an array of operations (one save), starting on a line
    /// of its own; one array may run over several lines (a pretty-printed single save).
    public static func parse(_ text: String) throws(InterchangeError) -> OperationBatch {
        var text = text
        return try text.withUTF8 { bytes in
            Result { () throws(InterchangeError) in try parse(utf8: bytes) }
        }.get()
    }

    /// Parses the text's bytes in one pass, with no copy per line.
    private static func parse(utf8 bytes: UnsafeBufferPointer<UInt8>) throws(InterchangeError) -> OperationBatch {
        var saves: [[Operation]] = []
        try parse(utf8: bytes) { operations throws(InterchangeError) in saves.append(operations) }
        return OperationBatch(saves: saves)
    }

    /// Parses the text's bytes in one pass, handing each save's operations to `save` as soon as
    /// they are read (``BatchApplier/apply(text:progress:)`` checks them while the rest is parsed).
    static func parse(utf8 bytes: UnsafeBufferPointer<UInt8>, each save: ([Operation]) throws(InterchangeError) -> Void) throws(InterchangeError) {
        var lines = JSONParser.Lines(bytes)
        var count = 0
        while true {
            let next: (value: JSONValue, start: Int)?
            do {
                next = try lines.next()
            } catch {
                let place = lines.place(of: error.position)
                throw InterchangeError.malformedJSON(line: place.line, reason: "\(error.reason) at offset \(place.column)")
            }
            guard let (value, start) = next else { break }
            guard case .array(let items) = value else {
                throw InterchangeError.malformedBatch(line: lines.place(of: start).line,
                                                      reason: "each line must be a JSON array of operations; got \(value.kindName)")
            }
            try save(try operations(items, line: { lines.place(of: start).line }))
            count += 1
        }
        guard count > 0 else {
            throw InterchangeError.malformedBatch(line: nil,
                                                  reason: "the input holds no operations; give a JSON array of operations or JSON lines of such arrays")
        }
    }

    /// The operations of one save; `line` (computed only for a message) is where its array starts.
    private static func operations(_ items: [JSONValue], line: () -> Int) throws(InterchangeError) -> [Operation] {
        var result: [Operation] = []
        result.reserveCapacity(items.count)
        for (index, item) in items.enumerated() {
            func malformed(_ reason: String) -> InterchangeError {
                .malformedBatch(line: line(), reason: "operation \(index + 1)\(reason)")
            }
            guard case .object(let members) = item else { throw malformed(" must be an object; got \(item.kindName)") }
            // One pass over the members (the parser sorted them and refused duplicates).
            var op: JSONValue?
            var entity: JSONValue?
            var ref: JSONValue?
            var object: JSONValue?
            var values: [(String, JSONValue)] = []
            for (key, value) in members {
                switch key {
                case "op": op = value
                case "entity": entity = value
                case "ref": ref = value
                case "object": object = value
                case "values":
                    guard case .object(let valueMembers) = value else { throw malformed(": \"values\" must be an object; got \(value.kindName)") }
                    values = valueMembers
                default:
                    throw malformed(": unknown field \"\(key)\" (fields are op, entity, ref, object, values)")
                }
            }
            switch op?.stringValue {
            case "insert":
                guard let entity = entity?.stringValue else { throw malformed(": an insert needs \"entity\" (a string)") }
                var refText: String?
                if let ref {
                    guard let text = ref.stringValue, !text.isEmpty, !text.hasPrefix("x-coredata:") else {
                        throw malformed(": \"ref\" must be a non-empty string that is not a URI")
                    }
                    refText = text
                }
                result.append(Operation(kind: .insert(entity: entity, ref: refText), values: values))
            case let name? where name == "update" || name == "delete":
                guard let object = object?.stringValue, !object.isEmpty else {
                    throw malformed(": an \(name) needs \"object\" (a ref or a URI)")
                }
                let reference = ObjectReference(object)
                if name == "delete" {
                    guard values.isEmpty else { throw malformed(": a delete takes no values") }
                    result.append(Operation(kind: .delete(reference), values: []))
                } else {
                    result.append(Operation(kind: .update(reference), values: values))
                }
            default:
                throw malformed(": \"op\" must be \"insert\", \"update\" or \"delete\"")
            }
        }
        return result
    }
}
