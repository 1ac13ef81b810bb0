import Foundation
import FerryModel

/// The identity of one object: temporary until its first save, then permanent.
///
/// A permanent ID has the URI form `x-coredata://<STORE-UUID>/<Entity>/p<N>`,
/// where N is the row's primary key; a temporary one has
/// `x-coredata:///<Entity>/t<UUID>`. IDs are values: compare and hash them freely,
/// and send them between tasks.
public struct ObjectID: Hashable, Sendable, CustomStringConvertible {
    enum Kind: Hashable, Sendable {
        /// A context's UUID and a counter, written `t<UUID><counter>` as Core Data does.
        case temporary(UUID, Int)
        case permanent(store: UUID, primaryKey: Int64)
    }

    /// The concrete entity of the object.
    public let entityName: String
    let kind: Kind

    init(entityName: String, kind: Kind) {
        self.entityName = entityName
        self.kind = kind
    }

    /// A temporary ID: unique per context (`namespace`) and insert (`counter`).
    static func temporary(entityName: String, namespace: UUID, counter: Int) -> ObjectID {
        ObjectID(entityName: entityName, kind: .temporary(namespace, counter))
    }

    public static func == (lhs: ObjectID, rhs: ObjectID) -> Bool {
        lhs.kind == rhs.kind && lhs.entityName == rhs.entityName
    }

    /// Hashes only the row number or counter: cheap, and equal IDs still hash equally.
    public func hash(into hasher: inout Hasher) {
        switch kind {
        case .temporary(_, let counter): hasher.combine(counter)
        case .permanent(_, let key): hasher.combine(key)
        }
    }

    /// A permanent ID in the store `store` for row `primaryKey`.
    /// Stores call this; applications get IDs from objects or URIs.
    public static func permanent(entityName: String, store: UUID, primaryKey: Int64) -> ObjectID {
        ObjectID(entityName: entityName, kind: .permanent(store: store, primaryKey: primaryKey))
    }

    /// Whether the object has not been saved yet (Core Data's `isTemporaryID`).
    public var isTemporaryID: Bool {
        if case .temporary = kind { return true }
        return false
    }

    /// The store's UUID for a permanent ID, nil for a temporary one.
    public var storeIdentifier: UUID? {
        if case .permanent(let store, _) = kind { return store }
        return nil
    }

    /// A temporary ID's context (namespace) and counter; nil for a permanent one.
    package var temporaryCounter: (namespace: UUID, counter: Int)? {
        if case .temporary(let namespace, let counter) = kind { return (namespace, counter) }
        return nil
    }

    /// The row's primary key (`Z_PK`) for a permanent ID, nil for a temporary one.
    public var primaryKey: Int64? {
        if case .permanent(_, let key) = kind { return key }
        return nil
    }

    /// The URI form, e.g. `x-coredata://96EBBFDE-…/Person/p2`.
    public var uriString: String {
        switch kind {
        case .temporary(let uuid, let counter): "x-coredata:///\(entityName)/t\(uuid.uuidString)\(counter)"
        case .permanent(let store, let key): Self.permanentURI(store: store, entityName: entityName, primaryKey: key)
        }
    }

    /// `x-coredata://<STORE>/<Entity>/p<N>`, written into one buffer: this runs once per object
    /// a put reports or a change set names, and interpolation with `uuidString` cost 0.5 µs.
    static func permanentURI(store: UUID, entityName: String, primaryKey: Int64) -> String {
        String(unsafeUninitializedCapacity: longestPermanentURI(entityName: entityName)) { buffer in
            var position = 0
            writePermanentURI(store: store, entityName: entityName, primaryKey: primaryKey) { byte in
                buffer[position] = byte
                position += 1
            }
            return position
        }
    }

    /// Appends the URI form's UTF-8 bytes to `bytes` (without making a `String`).
    package func appendURI(to bytes: inout [UInt8]) {
        guard case .permanent(let store, let key) = kind else {
            bytes.append(contentsOf: uriString.utf8)
            return
        }
        // Room for the longest form first, then the bytes written in place and the rest cut off.
        let start = bytes.count
        bytes.append(contentsOf: repeatElement(0, count: Self.longestPermanentURI(entityName: entityName)))
        let end = bytes.withUnsafeMutableBufferPointer { buffer in
            var position = start
            Self.writePermanentURI(store: store, entityName: entityName, primaryKey: key) { byte in
                buffer[position] = byte
                position += 1
            }
            return position
        }
        bytes.removeLast(bytes.count - end)
    }

    /// The most bytes a permanent URI of `entityName` takes: scheme, store UUID, the entity between
    /// slashes, `p` and a key of up to 20 characters.
    private static func longestPermanentURI(entityName: String) -> Int {
        "x-coredata://".utf8.count + 36 + 1 + entityName.utf8.count + 2 + 20
    }

    private static func writePermanentURI(store: UUID, entityName: String, primaryKey: Int64, _ put: (UInt8) -> Void) {
        for byte in "x-coredata://".utf8 { put(byte) }
        let hex: StaticString = "0123456789ABCDEF"
        withUnsafeBytes(of: store.uuid) { uuid in
            for (index, byte) in uuid.enumerated() {
                if index == 4 || index == 6 || index == 8 || index == 10 { put(UInt8(ascii: "-")) }
                put(hex.utf8Start[Int(byte >> 4)])
                put(hex.utf8Start[Int(byte & 0x0F)])
            }
        }
        put(UInt8(ascii: "/"))
        for byte in entityName.utf8 { put(byte) }
        put(UInt8(ascii: "/"))
        put(UInt8(ascii: "p"))
        // The key's digits, most significant first (a primary key is never below zero; a sign is written if one is).
        if primaryKey < 0 { put(UInt8(ascii: "-")) }
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)  // 24 bytes: enough for 20 digits
        withUnsafeMutableBytes(of: &digits) { digits in
            var magnitude = primaryKey.magnitude
            var count = 0
            repeat {
                digits[count] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                magnitude /= 10
                count += 1
            } while magnitude > 0
            for index in stride(from: count - 1, through: 0, by: -1) { put(digits[index]) }
        }
    }

    /// The URI form as a URL.
    public var uriRepresentation: URL {
        // Entity names are identifiers and UUIDs are hex, so the string is always a valid URL.
        URL(string: uriString) ?? URL(fileURLWithPath: "/")
    }

    public var description: String { uriString }
}

/// The parts of an object URI, before they are checked against a store
/// (a temporary ID has no store and no primary key).
package struct ObjectURIComponents: Equatable {
    package var store: UUID?
    package var entityName: String
    package var primaryKey: Int64?

    /// Splits `x-coredata://<UUID>/<Entity>/p<N>` (or the temporary form).
    /// Works on the string's UTF-8 bytes in place: replay parses several URIs per object.
    package static func parse(_ text: String) -> Result<ObjectURIComponents, ObjectURIError> {
        var contiguous = text
        return contiguous.withUTF8 { parse(bytes: $0, text: text) }
    }

    /// `uri` with its entity renamed by `rename` (nil: kept); unchanged when it is not a
    /// permanent object URI. How URIs follow an entity rename between model versions.
    package static func renamingEntity(of uri: String, _ rename: (String) -> String?) -> String {
        guard case .success(let parts) = parse(uri), let store = parts.store, let key = parts.primaryKey,
              let renamed = rename(parts.entityName), renamed != parts.entityName else { return uri }
        return ObjectID.permanentURI(store: store, entityName: renamed, primaryKey: key)
    }

    private static let scheme = Array("x-coredata://".utf8)

    private static func parse(bytes: UnsafeBufferPointer<UInt8>, text: String) -> Result<ObjectURIComponents, ObjectURIError> {
        let scheme = Self.scheme
        guard bytes.count >= scheme.count, bytes[0..<scheme.count].elementsEqual(scheme) else {
            return .failure(.malformed(text, "it must start with x-coredata://"))
        }
        let slash = UInt8(ascii: "/")
        var firstSlash = -1
        var secondSlash = -1
        for index in scheme.count..<bytes.count where bytes[index] == slash {
            if firstSlash < 0 {
                firstSlash = index
            } else if secondSlash < 0 {
                secondSlash = index
            } else {
                return .failure(.malformed(text, "expected x-coredata://<STORE-UUID>/<Entity>/p<N>"))
            }
        }
        guard secondSlash >= 0 else {
            return .failure(.malformed(text, "expected x-coredata://<STORE-UUID>/<Entity>/p<N>"))
        }
        let host = UnsafeBufferPointer(rebasing: bytes[scheme.count..<firstSlash])
        let entityBytes = UnsafeBufferPointer(rebasing: bytes[(firstSlash + 1)..<secondSlash])
        let reference = UnsafeBufferPointer(rebasing: bytes[(secondSlash + 1)...])
        guard !entityBytes.isEmpty else { return .failure(.malformed(text, "the entity name is empty")) }
        let entity = String(decoding: entityBytes, as: UTF8.self)
        if host.isEmpty {
            guard reference.first == UInt8(ascii: "t"), reference.count > 37,
                  uuid(bytes: UnsafeBufferPointer(rebasing: reference[1..<37])) != nil else {
                return .failure(.malformed(text, "a URI without a store UUID must be a temporary ID t<UUID><N>"))
            }
            return .success(ObjectURIComponents(store: nil, entityName: entity, primaryKey: nil))
        }
        guard let store = uuid(bytes: host) else {
            return .failure(.malformed(text, "'\(String(decoding: host, as: UTF8.self))' is not a store UUID"))
        }
        var key: Int64 = 0
        guard reference.first == UInt8(ascii: "p"), reference.count > 1, reference.count <= 19 else {
            return .failure(.malformed(text, "the last part must be p<N> with N a positive row number"))
        }
        for byte in reference.dropFirst() {
            guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else {
                return .failure(.malformed(text, "the last part must be p<N> with N a positive row number"))
            }
            key = key * 10 + Int64(byte - UInt8(ascii: "0"))
        }
        guard key > 0 else { return .failure(.malformed(text, "the last part must be p<N> with N a positive row number")) }
        return .success(ObjectURIComponents(store: store, entityName: entity, primaryKey: key))
    }

    /// Parses the 36-character UUID form (8-4-4-4-12 hex digits, either case).
    /// Foundation's `UUID(uuidString:)` goes through `sscanf` on Linux, which
    /// dominated URI parsing during replay.
    package static func uuid(_ text: String) -> UUID? {
        var contiguous = text
        return contiguous.withUTF8 { uuid(bytes: $0) }
    }

    private static func uuid(bytes utf8: UnsafeBufferPointer<UInt8>) -> UUID? {
        guard utf8.count == 36 else { return nil }
        var raw: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        let valid = withUnsafeMutableBytes(of: &raw) { bytes -> Bool in
            var byteIndex = 0
            var position = 0
            while position < 36 {
                if position == 8 || position == 13 || position == 18 || position == 23 {
                    guard utf8[position] == UInt8(ascii: "-") else { return false }
                    position += 1
                    continue
                }
                guard let high = hexValue(utf8[position]), let low = hexValue(utf8[position + 1]) else { return false }
                bytes[byteIndex] = high << 4 | low
                byteIndex += 1
                position += 2
            }
            return true
        }
        return valid ? UUID(uuid: raw) : nil
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}

/// Why an object URI could not be turned into an ``ObjectID``.
public enum ObjectURIError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The text is not an object URI.
    case malformed(String, String)
    /// The URI names another store.
    case foreignStore(String, expected: UUID)
    /// The URI names an entity the model does not have.
    case unknownEntity(String, entity: String)
    /// The URI is a temporary ID, which names nothing outside its context.
    case temporary(String)

    public var description: String {
        switch self {
        case .malformed(let uri, let reason):
            "'\(uri)' is not an object URI: \(reason)"
        case .foreignStore(let uri, let expected):
            "'\(uri)' belongs to another store; this store's UUID is \(expected.uuidString)"
        case .unknownEntity(let uri, let entity):
            "'\(uri)' names entity '\(entity)', which this model does not have"
        case .temporary(let uri):
            "'\(uri)' is a temporary ID of an unsaved object; only permanent URIs can be resolved"
        }
    }
}

extension ObjectURIError: FerryError {
    /// The kinds of ``ObjectURIError``: its cases.
    public enum Code: String, Hashable, Sendable {
        /// ``ObjectURIError/malformed(_:_:)``
        case malformed
        /// ``ObjectURIError/foreignStore(_:expected:)``
        case foreignStore
        /// ``ObjectURIError/unknownEntity(_:entity:)``
        case unknownEntity
        /// ``ObjectURIError/temporary(_:)``
        case temporary
    }

    public var code: Code {
        switch self {
        case .malformed: .malformed
        case .foreignStore: .foreignStore
        case .unknownEntity: .unknownEntity
        case .temporary: .temporary
        }
    }
}
