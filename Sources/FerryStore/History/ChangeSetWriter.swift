import Foundation
import FerryModel

/// Writes the canonical JSON of a change set into one byte buffer: the start of
/// the envelope (up to `"changes":[`), change by change, then the rest of the
/// envelope in place (see ``ChangeSetCodec``), so a large change set is never
/// copied. Stores use ``appendInsert(entity:uri:values:)`` to write inserts
/// without building ``ObjectChange`` values first; both paths give the same bytes.
package struct ChangeSetWriter {
    /// The change set's line so far.
    private var line: [UInt8] = []
    private var count = 0
    /// Values written so far into the insert begun by ``beginInsert(head:key:)``.
    private var insertValues = 0
    /// Whether a change needs format 2 (positions, merges).
    private var needsFormat2 = false

    /// A change set by `author` (the only envelope key that sorts before
    /// `changes`, so it is written now); `capacity` bytes are reserved for the
    /// changes, plus room for the envelope.
    package init(capacity: Int = 0, author: String?) {
        line.reserveCapacity(capacity + Self.envelopeCapacity)
        raw("{")
        if let author {
            raw("\"author\":")
            quoted(author)
            raw(",")
        }
        raw("\"changes\":[")
    }

    /// A writer for a piece of text only (no envelope).
    private init() {}

    /// Bytes reserved for the envelope: the keys, a UUID, a model hash, numbers, and a short author and context name.
    private static let envelopeCapacity = 256

    /// Whether no change was written.
    package var isEmpty: Bool { count == 0 }

    /// The bytes written so far: the beginning of the finished body (what follows is only appended).
    package func withBytesSoFar<Result>(_ body: (UnsafeBufferPointer<UInt8>) throws -> Result) rethrows -> Result {
        try line.withUnsafeBufferPointer(body)
    }

    /// Appends one change.
    package mutating func append(_ change: ObjectChange) {
        separate()
        line.append(UInt8(ascii: "{"))
        if change.needsFormat2 { needsFormat2 = true }
        if !change.added.isEmpty {
            raw("\"added\":")
            members(change.added)
            raw(",")
        }
        raw("\"entity\":")
        quoted(change.entity)
        if let survivor = change.mergedInto {
            raw(",\"into\":")
            quoted(survivor)
        }
        raw(",\"op\":\"")
        raw(change.kind.rawValue)
        raw("\"")
        if !change.positions.isEmpty {
            raw(",\"order\":")
            positions(change.positions)
        }
        if !change.removed.isEmpty {
            raw(",\"removed\":")
            members(change.removed)
        }
        if change.kind == .delete, !change.values.isEmpty {
            raw(",\"tombstone\":")
            values(change.values.keys.sorted(by: Self.byteOrder).map { ($0, change.values[$0] ?? .null) })
        }
        raw(",\"uri\":")
        quoted(change.uri)
        if change.kind != .delete, !change.values.isEmpty {
            raw(",\"values\":")
            values(change.values.keys.sorted(by: Self.byteOrder).map { ($0, change.values[$0] ?? .null) })
        }
        line.append(UInt8(ascii: "}"))
    }

    /// Appends an insert without members: `values` must be sorted by name (byte
    /// order) and hold only the non-nil values.
    package mutating func appendInsert(entity: String, uri: String, values: [(String, ChangeValue)]) {
        separate()
        raw("{\"entity\":")
        quoted(entity)
        raw(",\"op\":\"insert\",\"uri\":")
        quoted(uri)
        if !values.isEmpty {
            raw(",\"values\":")
            self.values(values)
        }
        line.append(UInt8(ascii: "}"))
    }

    // MARK: - Inserts written piece by piece
    //
    // A store writes each insert of a local save straight from its rows, with the
    // byte pieces it prepared once per entity (``insertHead(entity:uriPrefix:)``,
    // ``uriBytes(_:)``, ``key(_:)``): the same bytes as ``appendInsert(entity:uri:values:)``,
    // without building URI strings or value arrays per object. Values must come in
    // name order (byte order) and leave out nils.

    /// `{"entity":"E","op":"insert","uri":"<uriPrefix>` — an insert up to its key.
    package static func insertHead(entity: String, uriPrefix: String) -> [UInt8] {
        var writer = ChangeSetWriter()
        writer.raw("{\"entity\":")
        writer.quoted(entity)
        writer.raw(",\"op\":\"insert\",\"uri\":")
        writer.quoted(uriPrefix)
        return Array(writer.line.dropLast())
    }

    /// A URI prefix as it appears inside a JSON string (escaped, without quotes).
    package static func uriBytes(_ prefix: String) -> [UInt8] {
        var writer = ChangeSetWriter()
        writer.quoted(prefix)
        return Array(writer.line.dropFirst().dropLast())
    }

    /// `"name":` — a property name as a values key.
    package static func key(_ name: String) -> [UInt8] {
        var writer = ChangeSetWriter()
        writer.quoted(name)
        writer.line.append(UInt8(ascii: ":"))
        return writer.line
    }

    /// Begins an insert: `head` (``insertHead(entity:uriPrefix:)``) and the object's key.
    package mutating func beginInsert(head: [UInt8], key: Int64) {
        separate()
        line.append(contentsOf: head)
        digits(key)
        line.append(UInt8(ascii: "\""))
        insertValues = 0
    }

    /// Begins the insert's next value: its `key` (``key(_:)``).
    package mutating func insertValue(key: [UInt8]) {
        if insertValues == 0 { raw(",\"values\":{") } else { line.append(UInt8(ascii: ",")) }
        insertValues += 1
        line.append(contentsOf: key)
    }

    /// A reference value: a URI of `prefix` (``uriBytes(_:)``) and a key.
    package mutating func uriValue(prefix: [UInt8], key: Int64) {
        line.append(UInt8(ascii: "\""))
        line.append(contentsOf: prefix)
        digits(key)
        line.append(UInt8(ascii: "\""))
    }

    /// A reference value given as a whole URI.
    package mutating func uriValue(_ uri: String) {
        quoted(uri)
    }

    /// An attribute value.
    package mutating func attributeValue(_ value: AttributeValue) {
        switch value {
        case .integer(let number): digits(number)
        case .string(let text): quoted(text)
        case .boolean(let flag): raw(flag ? "true" : "false")
        case let other: raw(AttributeJSON.encode(other).text)
        }
    }

    /// Ends the insert begun by ``beginInsert(head:key:)``.
    package mutating func endInsert() {
        if insertValues > 0 { line.append(UInt8(ascii: "}")) }
        line.append(UInt8(ascii: "}"))
    }

    /// The whole change set's line, with `signature` (base64, made over the line's bytes before
    /// it: see ``ChangeSetSignature``) when it has one.
    package consuming func finish(origin: UUID, sequence: Int64, timestamp: HybridTimestamp, contextName: String?,
                                  modelHash: String, dependencies: [UUID: Int64], signature: String? = nil) -> String {
        writeEnvelope(origin: origin, sequence: sequence, timestamp: timestamp, contextName: contextName,
                      modelHash: modelHash, dependencies: dependencies)
        close(signature: signature.map { Array($0.utf8) })
        return String(decoding: line, as: UTF8.self)
    }

    /// The whole change set's line as its UTF-8 bytes, signed with `signer` when given, for storing
    /// without making (and validating) a `String` of a large change set first. The envelope's keys
    /// after `changes` are appended to the buffer the changes are in.
    /// - Throws: ``SigningKeyError`` when the signature cannot be made.
    /// `begun`, when given, is a signature by `signer` begun on the bytes written before (see
    /// ``ChangeSetSigner/beginSignature(over:)``).
    package consuming func finishBytes(origin: UUID, sequence: Int64, timestamp: HybridTimestamp, contextName: String?,
                                       modelHash: String, dependencies: [UUID: Int64],
                                       signer: (any ChangeSetSigner)? = nil, begun: (any PartialSignature)? = nil) throws(SigningKeyError) -> [UInt8] {
        writeEnvelope(origin: origin, sequence: sequence, timestamp: timestamp, contextName: contextName,
                      modelHash: modelHash, dependencies: dependencies)
        if let signer {
            let signature = try line.withUnsafeBufferPointer { bytes throws(SigningKeyError) in
                if let begun, begun.prefixLength <= bytes.count { return try begun.finish(bytes) }
                return try signer.rawSignature(of: bytes)
            }
            close(signature: Array(signature.base64EncodedData()))
        } else {
            close(signature: nil)
        }
        return line
    }

    /// Ends the line: the signature member (its base64 bytes) when there is one, and the closing brace.
    private mutating func close(signature: [UInt8]?) {
        if let signature {
            line.append(contentsOf: ChangeSetSignature.marker)
            line.append(contentsOf: signature)
            line.append(UInt8(ascii: "\""))
        }
        line.append(UInt8(ascii: "}"))
    }

    /// The envelope after the changes, up to the sequence number (the line without its closing brace).
    private mutating func writeEnvelope(origin: UUID, sequence: Int64, timestamp: HybridTimestamp, contextName: String?,
                                        modelHash: String, dependencies: [UUID: Int64]) {
        raw("]")
        if let contextName {
            raw(",\"context\":")
            quoted(contextName)
        }
        if !dependencies.isEmpty {
            raw(",\"deps\":")
            raw(ChangeSetCodec.encode(dependencies))
        }
        raw(",\"format\":\(needsFormat2 ? 2 : 1),\"hlc\":\(timestamp.rawValue),\"model\":")
        quoted(modelHash)
        raw(",\"origin\":\"\(origin.uuidString)\",\"seq\":\(sequence)")
    }

    // MARK: - Pieces

    private static func byteOrder(_ a: String, _ b: String) -> Bool { a.utf8.lexicographicallyPrecedes(b.utf8) }

    private mutating func separate() {
        if count > 0 { line.append(UInt8(ascii: ",")) }
        count += 1
    }

    /// A whole number in decimal, written without building a String.
    private mutating func digits(_ number: Int64) {
        if number < 0 {
            guard number != .min else { raw(String(number)); return }
            line.append(UInt8(ascii: "-"))
            digits(-number)
            return
        }
        if number < 10 {
            line.append(UInt8(ascii: "0") + UInt8(number))
            return
        }
        var value = number
        var buffer: (UInt64, UInt64, UInt64) = (0, 0, 0)  // 24 bytes: enough for 19 digits
        var length = 0
        withUnsafeMutableBytes(of: &buffer) { bytes in
            while value > 0 {
                bytes[23 - length] = UInt8(ascii: "0") + UInt8(value % 10)
                value /= 10
                length += 1
            }
            line.append(contentsOf: bytes[(24 - length)...])
        }
    }

    private mutating func raw(_ text: String) {
        line.append(contentsOf: text.utf8)
    }

    private mutating func quoted(_ text: String) {
        let utf8 = text.utf8
        if !utf8.contains(where: { $0 < 0x20 || $0 == 0x22 || $0 == 0x5C }) {
            line.append(UInt8(ascii: "\""))
            line.append(contentsOf: utf8)
            line.append(UInt8(ascii: "\""))
        } else {
            var escaped = ""
            JSONValue.appendQuoted(text, to: &escaped)
            line.append(contentsOf: escaped.utf8)
        }
    }

    private mutating func values(_ entries: [(String, ChangeValue)]) {
        line.append(UInt8(ascii: "{"))
        for (index, (key, value)) in entries.enumerated() {
            if index > 0 { line.append(UInt8(ascii: ",")) }
            quoted(key)
            line.append(UInt8(ascii: ":"))
            switch value {
            case .null: raw("null")
            case .object(let uri): quoted(uri)
            case .attribute(.integer(let number)): digits(number)
            case .attribute(.string(let text)): quoted(text)
            case .attribute(.boolean(let flag)): raw(flag ? "true" : "false")
            case .attribute(let other): raw(AttributeJSON.encode(other).text)
            }
        }
        line.append(UInt8(ascii: "}"))
    }

    private mutating func positions(_ positions: [String: [String: String]]) {
        line.append(UInt8(ascii: "{"))
        for (index, relationship) in positions.keys.sorted(by: Self.byteOrder).enumerated() {
            if index > 0 { line.append(UInt8(ascii: ",")) }
            quoted(relationship)
            raw(":{")
            let keys = positions[relationship] ?? [:]
            for (position, member) in keys.keys.sorted(by: Self.byteOrder).enumerated() {
                if position > 0 { line.append(UInt8(ascii: ",")) }
                quoted(member)
                line.append(UInt8(ascii: ":"))
                quoted(keys[member] ?? "")
            }
            line.append(UInt8(ascii: "}"))
        }
        line.append(UInt8(ascii: "}"))
    }

    private mutating func members(_ members: [String: [String]]) {
        line.append(UInt8(ascii: "{"))
        for (index, key) in members.keys.sorted(by: Self.byteOrder).enumerated() {
            if index > 0 { line.append(UInt8(ascii: ",")) }
            quoted(key)
            raw(":[")
            for (position, uri) in (members[key] ?? []).sorted(by: Self.byteOrder).enumerated() {
                if position > 0 { line.append(UInt8(ascii: ",")) }
                quoted(uri)
            }
            line.append(UInt8(ascii: "]"))
        }
        line.append(UInt8(ascii: "}"))
    }
}
