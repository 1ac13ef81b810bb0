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
    public static func parse(_ text: String) throws(InterchangeError) -> OperationBatch {
        // JSON lines: cut at newline bytes (not characters: a line of a large save runs to
        // megabytes), each line trimmed of ASCII blanks.
        let lines = text.utf8.split(separator: 0x0A, omittingEmptySubsequences: false).map { line -> Substring in
            let isBlank: (UInt8) -> Bool = { $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }
            guard let first = line.firstIndex(where: { !isBlank($0) }), let last = line.lastIndex(where: { !isBlank($0) }) else { return "" }
            return Substring(line[first...last])
        }
        /// The whole text as one save: one JSON array of operation objects, perhaps over several lines.
        func oneSave() throws(InterchangeError) -> OperationBatch? {
            guard let whole = try? JSONValue.parse(text), case .array(let items) = whole,
                  items.allSatisfy({ if case .object = $0 { return true } else { return false } }) else { return nil }
            return OperationBatch(saves: [try operations(items, line: nil)])
        }
        if lines.count(where: { !$0.isEmpty }) <= 1, let batch = try oneSave() { return batch }
        var saves: [[Operation]] = []
        for (offset, trimmed) in lines.enumerated() {
            if trimmed.isEmpty { continue }
            let value: JSONValue
            do {
                value = try JSONValue.parse(String(trimmed), line: offset + 1)
            } catch {
                // A first line that is no JSON value by itself: one array spread over several lines.
                if saves.isEmpty, let batch = try oneSave() { return batch }
                throw error
            }
            guard case .array(let items) = value else {
                throw InterchangeError.malformedBatch(line: offset + 1, reason: "each line must be a JSON array of operations; got \(value.kindName)")
            }
            saves.append(try operations(items, line: offset + 1))
        }
        guard !saves.isEmpty else {
            throw InterchangeError.malformedBatch(line: nil, reason: "the input holds no operations; give a JSON array of operations or JSON lines of such arrays")
        }
        return OperationBatch(saves: saves)
    }

    private static func operations(_ items: [JSONValue], line: Int?) throws(InterchangeError) -> [Operation] {
        var result: [Operation] = []
        for (index, item) in items.enumerated() {
            let place = "operation \(index + 1)"
            guard case .object = item else {
                throw InterchangeError.malformedBatch(line: line, reason: "\(place) must be an object; got \(item.kindName)")
            }
            let values: [(String, JSONValue)]
            switch item["values"] {
            case nil: values = []
            case .object(let members)?: values = members
            case let other?: throw InterchangeError.malformedBatch(line: line, reason: "\(place): \"values\" must be an object; got \(other.kindName)")
            }
            let known: Set<String> = ["op", "entity", "ref", "object", "values"]
            if let unknown = item.objectMembers?.first(where: { !known.contains($0.0) }) {
                throw InterchangeError.malformedBatch(line: line, reason: "\(place): unknown field \"\(unknown.0)\" (fields are op, entity, ref, object, values)")
            }
            switch item["op"]?.stringValue {
            case "insert":
                guard let entity = item["entity"]?.stringValue else {
                    throw InterchangeError.malformedBatch(line: line, reason: "\(place): an insert needs \"entity\" (a string)")
                }
                var ref: String?
                if let refValue = item["ref"] {
                    guard let text = refValue.stringValue, !text.isEmpty, !text.hasPrefix("x-coredata:") else {
                        throw InterchangeError.malformedBatch(line: line, reason: "\(place): \"ref\" must be a non-empty string that is not a URI")
                    }
                    ref = text
                }
                result.append(Operation(kind: .insert(entity: entity, ref: ref), values: values))
            case "update", "delete":
                guard let object = item["object"]?.stringValue, !object.isEmpty else {
                    throw InterchangeError.malformedBatch(line: line, reason: "\(place): an \(item["op"]?.stringValue ?? "") needs \"object\" (a ref or a URI)")
                }
                let reference = ObjectReference(object)
                if item["op"]?.stringValue == "delete" {
                    guard values.isEmpty else {
                        throw InterchangeError.malformedBatch(line: line, reason: "\(place): a delete takes no values")
                    }
                    result.append(Operation(kind: .delete(reference), values: []))
                } else {
                    result.append(Operation(kind: .update(reference), values: values))
                }
            default:
                throw InterchangeError.malformedBatch(line: line, reason: "\(place): \"op\" must be \"insert\", \"update\" or \"delete\"")
            }
        }
        return result
    }
}
