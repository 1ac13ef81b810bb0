import Foundation
import FerryModel

extension ChangeSetCodec {
    /// Decodes a line written exactly as ``ChangeSetWriter`` writes it, straight
    /// from its bytes; nil for anything else (whitespace, escapes, other key
    /// orders or keys, whole numbers past Int64, memberships, another model,
    /// any error), which ``decodeTree(_:model:versionHash:)`` then reads.
    ///
    /// Building a JSON tree first cost more than half of decoding a replayed
    /// change set. This reader never throws and answers only what the general
    /// reader would answer for the same line: every check is the same (it calls
    /// the same model lookups, URI check and attribute decoding), and it accepts
    /// keys only in strictly increasing ASCII order, so a duplicate key or an
    /// order the general reader would sort never reaches it. `CanonicalChangeSetReaderTests`
    /// and the fuzz test compare the two on canonical and mutated lines.
    package static func decodeCanonical(_ text: String, model: ManagedObjectModel, versionHash: String?) -> Decoded? {
        var text = text
        return text.withUTF8 { bytes -> Decoded? in
            guard let base = bytes.baseAddress else { return nil }
            var reader = CanonicalReader(base: base, count: bytes.count, lookups: ModelLookups(model: model))
            return reader.changeSet(versionHash: versionHash)
        }
    }
}

/// A cursor over one canonical change-set line (see ``ChangeSetCodec/decodeCanonical(_:model:versionHash:)``).
private struct CanonicalReader {
    let base: UnsafePointer<UInt8>
    let count: Int
    var lookups: ChangeSetCodec.ModelLookups
    var position = 0

    init(base: UnsafePointer<UInt8>, count: Int, lookups: ChangeSetCodec.ModelLookups) {
        self.base = base
        self.count = count
        self.lookups = lookups
    }

    mutating func changeSet(versionHash: String?) -> ChangeSetCodec.Decoded? {
        guard take("{") else { return nil }
        var author: String?
        if take("\"author\":") {
            guard let text = string(), take(",") else { return nil }
            author = text
        }
        guard take("\"changes\":[") else { return nil }
        var changes: [ObjectChange] = []
        if !take("]") {
            repeat {
                guard let change = change() else { return nil }
                changes.append(change)
            } while take(",")
            guard take("]") else { return nil }
        }
        var contextName: String?
        if take(",\"context\":") {
            guard let text = string() else { return nil }
            contextName = text
        }
        var dependencies: [UUID: Int64] = [:]
        if take(",\"deps\":") {
            guard let deps = self.dependencies() else { return nil }
            dependencies = deps
        }
        guard take(",\"format\":"), integer() == 1,
              take(",\"hlc\":"), let clock = integer(), clock >= 0,
              take(",\"model\":"), let modelHash = string(), !modelHash.isEmpty,
              take(",\"origin\":"), let originText = string(), let origin = ObjectURIComponents.uuid(originText),
              take(",\"seq\":"), let sequence = integer(), sequence >= 1 else { return nil }
        var signature: String?
        if take(",\"sig\":") {
            guard let text = string() else { return nil }
            signature = text
        }
        guard take("}"), position == count,
              modelHash == (versionHash ?? lookups.model.versionHash) else { return nil }
        return .changeSet(ChangeSet(origin: origin, sequence: sequence, timestamp: HybridTimestamp(rawValue: clock), author: author,
                                    contextName: contextName, modelHash: modelHash, dependencies: dependencies, changes: changes,
                                    signature: signature))
    }

    // MARK: - Parts

    /// `{"entity":…,"op":…,["tombstone":{…},]"uri":…[,"values":{…}]}`, with no memberships.
    private mutating func change() -> ObjectChange? {
        guard take("{\"entity\":"), let entityName = string(), let entity = lookups.entity(named: entityName),
              take(",\"op\":"), let op = string(), let kind = ObjectChange.Kind(rawValue: op) else { return nil }
        var values: [String: ChangeValue]?
        if kind == .delete, take(",\"tombstone\":") {
            guard let tombstone = self.values(of: entity) else { return nil }
            values = tombstone
        }
        guard take(",\"uri\":"), let uri = string(), accepts(uri, as: entityName, family: false) else { return nil }
        if kind != .delete, take(",\"values\":") {
            guard let inserted = self.values(of: entity) else { return nil }
            values = inserted
        }
        guard take("}") else { return nil }
        var change = ObjectChange(kind: kind, uri: uri, entity: entityName)
        if let values { change.values = values }
        return change
    }

    /// `{"name":value,…}`: attributes and recorded to-ones of `entity`.
    private mutating func values(of entity: ChangeSetCodec.ModelLookups.EntityLookups) -> [String: ChangeValue]? {
        guard take("{") else { return nil }
        var values: [String: ChangeValue] = [:]
        if take("}") { return values }
        values.reserveCapacity(entity.lastValueCount)
        defer { entity.lastValueCount = values.count }
        var previous: String?
        repeat {
            guard let key = asciiKey(after: previous), take(":") else { return nil }
            previous = key
            switch lookups.property(key, of: entity) {
            case .attribute(let type):
                guard let json = scalar(), case .success(let value) = AttributeJSON.decode(json, as: type) else { return nil }
                values[key] = value.map(ChangeValue.attribute) ?? .null
            case .toOne(let destination):
                if take("null") {
                    values[key] = .null
                } else {
                    guard let uri = string(), accepts(uri, as: destination, family: true) else { return nil }
                    values[key] = .object(uri)
                }
            case .toMany, .unknown:
                return nil
            }
        } while take(",")
        guard take("}") else { return nil }
        return values
    }

    /// `{"STORE-UUID":N,…}` with N ≥ 1.
    private mutating func dependencies() -> [UUID: Int64]? {
        guard take("{") else { return nil }
        var result: [UUID: Int64] = [:]
        if take("}") { return result }
        var previous: String?
        repeat {
            guard let key = asciiKey(after: previous), take(":"), let store = ObjectURIComponents.uuid(key),
                  let number = integer(), number >= 1 else { return nil }
            previous = key
            result[store] = number
        } while take(",")
        guard take("}") else { return nil }
        return result
    }

    /// A JSON scalar, read as the general reader reads it: null, true, false, a
    /// number (`.integer` when whole and within Int64, else `.number`), or a string without escapes.
    private mutating func scalar() -> JSONValue? {
        guard position < count else { return nil }
        switch base[position] {
        case UInt8(ascii: "n"): return take("null") ? .null : nil
        case UInt8(ascii: "t"): return take("true") ? .bool(true) : nil
        case UInt8(ascii: "f"): return take("false") ? .bool(false) : nil
        case UInt8(ascii: "\""): return string().map(JSONValue.string)
        default: return integer().map(JSONValue.integer) ?? fraction()
        }
    }

    /// A number with a fraction or an exponent (JSON's grammar), as `Double` reads its text, if finite.
    private mutating func fraction() -> JSONValue? {
        var index = position
        func digits() -> Int {
            let start = index
            while index < count, base[index] >= UInt8(ascii: "0"), base[index] <= UInt8(ascii: "9") { index += 1 }
            return index - start
        }
        if index < count, base[index] == UInt8(ascii: "-") { index += 1 }
        let integerStart = index
        let integerDigits = digits()
        guard integerDigits > 0, integerDigits == 1 || base[integerStart] != UInt8(ascii: "0") else { return nil }
        var isWhole = true
        if index < count, base[index] == UInt8(ascii: ".") {
            index += 1
            guard digits() > 0 else { return nil }
            isWhole = false
        }
        if index < count, base[index] == UInt8(ascii: "e") || base[index] == UInt8(ascii: "E") {
            index += 1
            if index < count, base[index] == UInt8(ascii: "+") || base[index] == UInt8(ascii: "-") { index += 1 }
            guard digits() > 0 else { return nil }
            isWhole = false
        }
        // (A whole number past Int64 is left to the general reader.)
        guard !isWhole, let value = Double(String(decoding: UnsafeBufferPointer(start: base + position, count: index - position), as: UTF8.self)),
              value.isFinite else { return nil }
        position = index
        return .number(value)
    }

    /// Whether `uri` is a permanent URI of `entity` (or, with `family`, of one of its
    /// subentities), as ``ChangeSetCodec/checkURI(_:entity:family:lookups:place:)`` says.
    ///
    /// A change set names thousands of objects of a few stores and entities, so the
    /// answer for a URI's `x-coredata://STORE/Entity/` part is kept (for the last one
    /// seen per `family`), and a URI with the same part only needs its `p<N>` checked,
    /// as the full check does: `p`, then 1 to 18 digits, not all zeros.
    private mutating func accepts(_ uri: String, as entity: String, family: Bool) -> Bool {
        var uri = uri
        return uri.withUTF8 { bytes -> Bool in
            guard let start = bytes.baseAddress, let slash = bytes.lastIndex(of: UInt8(ascii: "/")) else { return false }
            let prefixLength = slash + 1
            let known = family ? knownFamilyPrefix : knownExactPrefix
            if let known, known.entity == entity, known.bytes.count == prefixLength,
               known.bytes.withUnsafeBufferPointer({ known in known.baseAddress.map { memcmp($0, start, prefixLength) == 0 } ?? false }) {
                return Self.isRowReference(UnsafeBufferPointer(rebasing: bytes[prefixLength...]))
            }
            let uriText = String(decoding: bytes, as: UTF8.self)
            guard (try? ChangeSetCodec.checkURI(uriText, entity: entity, family: family, lookups: &lookups, place: "")) != nil else { return false }
            let accepted = (bytes: Array(bytes[..<prefixLength]), entity: entity)
            if family { knownFamilyPrefix = accepted } else { knownExactPrefix = accepted }
            return true
        }
    }

    /// The `x-coredata://STORE/Entity/` part of the last URI accepted as an `entity` (exactly, or as one of its family).
    private var knownExactPrefix: (bytes: [UInt8], entity: String)?
    private var knownFamilyPrefix: (bytes: [UInt8], entity: String)?

    /// `p<N>` with N of 1 to 18 digits, not zero (leading zeros allowed, as `ObjectURIComponents.parse` allows them).
    private static func isRowReference(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        guard bytes.count >= 2, bytes.count <= 19, bytes[0] == UInt8(ascii: "p") else { return false }
        var nonZero = false
        for byte in bytes.dropFirst() {
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return false }
            if byte != UInt8(ascii: "0") { nonZero = true }
        }
        return nonZero
    }

    // MARK: - Tokens

    /// Consumes `literal` if the text continues with it.
    private mutating func take(_ literal: StaticString) -> Bool {
        let length = literal.utf8CodeUnitCount
        guard count - position >= length, memcmp(base + position, literal.utf8Start, length) == 0 else { return false }
        position += length
        return true
    }

    /// A string without escapes or control characters (nil otherwise: the general reader unescapes).
    private mutating func string() -> String? {
        guard let range = stringBytes() else { return nil }
        return String(decoding: UnsafeBufferPointer(start: base + range.lowerBound, count: range.count), as: UTF8.self)
    }

    /// An object key of ASCII characters, after `previous` in byte order (so no duplicates,
    /// and the order the general reader keeps: for ASCII, byte order is its string order).
    private mutating func asciiKey(after previous: String?) -> String? {
        guard let range = stringBytes() else { return nil }
        let bytes = UnsafeBufferPointer(start: base + range.lowerBound, count: range.count)
        guard !bytes.contains(where: { $0 >= 0x80 }) else { return nil }
        let key = String(decoding: bytes, as: UTF8.self)
        if let previous, !previous.utf8.lexicographicallyPrecedes(key.utf8) { return nil }
        return key
    }

    private mutating func stringBytes() -> Range<Int>? {
        guard position < count, base[position] == UInt8(ascii: "\"") else { return nil }
        let start = position + 1
        var index = start
        while index < count {
            let byte = base[index]
            if byte == UInt8(ascii: "\"") {
                position = index + 1
                return start..<index
            }
            if byte == UInt8(ascii: "\\") || byte < 0x20 { return nil }
            index += 1
        }
        return nil
    }

    /// A whole number in JSON's form (no leading zeros) that fits Int64, not followed by a fraction or exponent.
    private mutating func integer() -> Int64? {
        var index = position
        let negative = index < count && base[index] == UInt8(ascii: "-")
        if negative { index += 1 }
        let digitsStart = index
        var magnitude: UInt64 = 0
        while index < count, base[index] >= UInt8(ascii: "0"), base[index] <= UInt8(ascii: "9") {
            let (times10, overflow1) = magnitude.multipliedReportingOverflow(by: 10)
            let (sum, overflow2) = times10.addingReportingOverflow(UInt64(base[index] - UInt8(ascii: "0")))
            guard !overflow1, !overflow2 else { return nil }
            magnitude = sum
            index += 1
        }
        let digits = index - digitsStart
        guard digits > 0, digits == 1 || base[digitsStart] != UInt8(ascii: "0") else { return nil }
        if index < count, base[index] == UInt8(ascii: ".") || base[index] == UInt8(ascii: "e") || base[index] == UInt8(ascii: "E") { return nil }
        let value: Int64
        if negative {
            guard magnitude <= UInt64(Int64.max) + 1 else { return nil }
            value = magnitude == UInt64(Int64.max) + 1 ? .min : -Int64(magnitude)
        } else {
            guard magnitude <= UInt64(Int64.max) else { return nil }
            value = Int64(magnitude)
        }
        position = index
        return value
    }
}
