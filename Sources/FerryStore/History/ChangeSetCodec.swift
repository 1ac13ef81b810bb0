import Foundation
import FerryModel

/// The versioned JSON form of change sets (one line each; see `docs/PROTOCOL.md`).
///
/// Writing is canonical: keys sorted, no whitespace, empty parts left out, so a
/// change set always encodes to the same bytes. Reading checks everything
/// against the model before anything is applied: format version, UUIDs,
/// sequence numbers, entity and property names, value types and URIs.
public enum ChangeSetCodec {
    /// What reading a line gave.
    public enum Decoded: Sendable {
        /// A change set made with this model, fully checked.
        case changeSet(ChangeSet)
        /// A well-formed change set made with another model version: to be held, not applied.
        case otherModel(origin: UUID, sequence: Int64, modelHash: String, timestamp: HybridTimestamp)
    }

    // MARK: - Writing

    /// The canonical JSON line of a change set: keys in byte order, no
    /// whitespace, empty parts left out. Written straight to bytes (saves record
    /// a change set each, so this is on the hot path).
    public static func encode(_ changeSet: ChangeSet) -> String {
        writer(writing: changeSet).finish(origin: changeSet.origin, sequence: changeSet.sequence, timestamp: changeSet.timestamp,
                                          contextName: changeSet.contextName, modelHash: changeSet.modelHash,
                                          dependencies: changeSet.dependencies, signature: changeSet.signature)
    }

    /// ``encode(_:)`` signed with `signer` (in place of any signature `changeSet` carries).
    package static func encode(_ changeSet: ChangeSet, signedWith signer: any ChangeSetSigner) throws(SigningKeyError) -> String {
        String(decoding: try writer(writing: changeSet).finishBytes(origin: changeSet.origin, sequence: changeSet.sequence, timestamp: changeSet.timestamp,
                                                                    contextName: changeSet.contextName, modelHash: changeSet.modelHash,
                                                                    dependencies: changeSet.dependencies, signer: signer),
               as: UTF8.self)
    }

    /// A writer holding `changeSet`'s changes.
    private static func writer(writing changeSet: ChangeSet) -> ChangeSetWriter {
        var writer = ChangeSetWriter(author: changeSet.author)
        for change in changeSet.changes { writer.append(change) }
        return writer
    }

    /// A version vector as JSON: `{"UUID": seq, …}`.
    public static func encode(_ vector: VersionVector) -> String {
        vectorValue(vector).text
    }

    /// A version vector as a ``JSONValue`` object (sorted by store UUID), for messages that carry one.
    public static func vectorValue(_ vector: VersionVector) -> JSONValue {
        .sortedObject(Dictionary(uniqueKeysWithValues: vector.map { ($0.key.uuidString, JSONValue.integer($0.value)) }))
    }

    /// Reads a version vector (`{"UUID": seq, …}`).
    public static func decodeVector(_ text: String) throws(ChangeSetError) -> VersionVector {
        let json: JSONValue
        do { json = try JSONValue.parse(text) } catch { throw ChangeSetError.malformed("the version vector is not JSON: \(error)", cause: error) }
        guard let members = json.objectMembers else { throw ChangeSetError.malformed("a version vector is a JSON object {\"STORE-UUID\": SEQ, …}") }
        return try vector(members.map { key, value in (key, value.integerValue) })
    }

    /// A version vector from its entries (store UUID text, sequence number; nil where the JSON
    /// held no whole number), each checked: a store UUID, a whole number ≥ 0.
    public static func vector(_ entries: some Sequence<(String, Int64?)>) throws(ChangeSetError) -> VersionVector {
        var vector: VersionVector = [:]
        for (key, sequence) in entries {
            guard let store = UUID(parsing: key) else { throw ChangeSetError.malformed("'\(key)' in the version vector is not a store UUID") }
            guard let sequence, sequence >= 0 else {
                throw ChangeSetError.malformed("the version vector's entry for \(key) must be a whole number ≥ 0")
            }
            vector[store] = sequence
        }
        return vector
    }

    // MARK: - Reading

    /// Reads and checks one change set against `model`.
    /// - Throws: ``ChangeSetError`` naming the field and the problem.
    public static func decode(_ text: String, model: ManagedObjectModel) throws(ChangeSetError) -> Decoded {
        try decode(text, model: model, versionHash: nil)
    }

    /// ``decode(_:model:)`` with the model's version hash worked out by the caller, once
    /// for many lines (computing it hashes every entity); nil computes it here, and only
    /// for a line that gets as far as naming its model.
    package static func decode(_ text: String, model: ManagedObjectModel, versionHash: String?) throws(ChangeSetError) -> Decoded {
        // Lines as Ferry writes them take the canonical reader (no JSON tree); it answers nil
        // for anything else, which the general reader below then decodes or refuses with the reason.
        if let decoded = decodeCanonical(text, model: model, versionHash: versionHash) { return decoded }
        return try decodeTree(text, model: model, versionHash: versionHash)
    }

    /// The general reader: parses the line into a JSON tree, then checks it field by field.
    package static func decodeTree(_ text: String, model: ManagedObjectModel, versionHash: String?) throws(ChangeSetError) -> Decoded {
        let json: JSONValue
        do { json = try JSONValue.parse(text) } catch { throw ChangeSetError.malformed("not JSON: \(error)", cause: error) }
        guard json.objectMembers != nil else { throw ChangeSetError.malformed("a change set is a JSON object") }
        guard case .integer(let format)? = json["format"] else { throw ChangeSetError.malformed("'format' is missing or not a number") }
        guard ChangeSet.readableFormats.contains(Int(clamping: format)) else { throw ChangeSetError.unsupportedFormat(Int(clamping: format)) }
        let origin = try uuid(json["origin"], "origin")
        guard case .integer(let sequence)? = json["seq"], sequence >= 1 else { throw ChangeSetError.malformed("'seq' must be a whole number ≥ 1") }
        guard case .integer(let clock)? = json["hlc"], clock >= 0 else { throw ChangeSetError.malformed("'hlc' must be a whole number ≥ 0") }
        guard let modelHash = json["model"]?.stringValue, !modelHash.isEmpty else {
            throw ChangeSetError.malformed("'model' (the model version hash) is missing")
        }
        guard modelHash == (versionHash ?? model.versionHash) else {
            return .otherModel(origin: origin, sequence: sequence, modelHash: modelHash, timestamp: HybridTimestamp(rawValue: clock))
        }
        let author = try optionalString(json["author"], "author")
        let signature = try optionalString(json["sig"], "sig")
        let contextName = try optionalString(json["context"], "context")
        var dependencies: [UUID: Int64] = [:]
        if let deps = json["deps"] {
            guard let members = deps.objectMembers else { throw ChangeSetError.malformed("'deps' must be an object of store UUIDs to sequence numbers") }
            for (key, value) in members {
                guard let store = ObjectURIComponents.uuid(key), case .integer(let number) = value, number >= 1 else {
                    throw ChangeSetError.malformed("'deps' entry '\(key)' must map a store UUID to a sequence number ≥ 1")
                }
                dependencies[store] = number
            }
        }
        guard case .array(let items)? = json["changes"] else { throw ChangeSetError.malformed("'changes' must be an array") }
        var changes: [ObjectChange] = []
        changes.reserveCapacity(items.count)
        var lookups = ModelLookups(model: model)
        for (index, item) in items.enumerated() {
            let change = try decodeChange(item, at: index, lookups: &lookups)
            if change.needsFormat2 && format < 2 {
                let what = change.kind == .merge ? "a merge"
                    : change.kind == .delete ? "a delete's memberships ('added')" : "order (positions in ordered relationships)"
                throw ChangeSetError.malformed("changes[\(index)]: \(what) needs format 2; this change set says format \(format)")
            }
            changes.append(change)
        }
        return .changeSet(ChangeSet(origin: origin, sequence: sequence, timestamp: HybridTimestamp(rawValue: clock), author: author,
                                    contextName: contextName, modelHash: modelHash, dependencies: dependencies, changes: changes,
                                    signature: signature))
    }

    /// The model's answers a change set needs again and again (its changes name the same
    /// few entities and properties thousands of times), each looked up once per change set.
    struct ModelLookups {
        let model: ManagedObjectModel
        private var entities: [String: EntityLookups] = [:]
        /// Per expected entity: whether a URI's entity is acceptable, exactly and as a family member.
        private var exact: [String: [String: Bool]] = [:]
        private var family: [String: [String: Bool]] = [:]

        init(model: ManagedObjectModel) {
            self.model = model
        }

        /// What a property key of an entity is, for decoding.
        enum PropertyKind {
            case attribute(AttributeType)
            /// A recorded to-one, by destination entity name.
            case toOne(String)
            /// A recorded to-many (kept on this side), by destination entity name.
            case toMany(String)
            /// Not a recorded property of the entity.
            case unknown
        }

        final class EntityLookups {
            let entity: EntityDescription
            var properties: [String: PropertyKind] = [:]
            /// How many values the last change of this entity had (room to reserve for the next).
            var lastValueCount = 0
            init(entity: EntityDescription) { self.entity = entity }
        }

        mutating func entity(named name: String) -> EntityLookups? {
            if let known = entities[name] { return known }
            guard let entity = model.entity(named: name) else { return nil }
            let lookups = EntityLookups(entity: entity)
            entities[name] = lookups
            return lookups
        }

        func property(_ key: String, of lookups: EntityLookups) -> PropertyKind {
            if let known = lookups.properties[key] { return known }
            let kind: PropertyKind
            switch lookups.entity.property(named: key) {
            case .attribute(let attribute)? where attribute.isReplicated:  // (not a derived value every replica computes)
                kind = .attribute(attribute.type)
            case .relationship(let relationship)? where model.isRecorded(relationship, in: lookups.entity)
                && model.entity(named: relationship.destinationEntityName) != nil:
                kind = relationship.isToMany ? .toMany(relationship.destinationEntityName) : .toOne(relationship.destinationEntityName)
            default:
                kind = .unknown
            }
            lookups.properties[key] = kind
            return kind
        }

        /// Whether a URI naming entity `named` may stand where a `expected` (or, with `family`, one of its subentities) is.
        mutating func accepts(_ named: String, as expected: String, family isFamily: Bool) -> Bool {
            if let known = (isFamily ? family : exact)[expected]?[named] { return known }
            let answer = model.entity(named: named).map { isFamily ? $0.isKind(of: expected) : $0.name == expected } ?? false
            if isFamily { family[expected, default: [:]][named] = answer } else { exact[expected, default: [:]][named] = answer }
            return answer
        }
    }

    /// Where in a change set something is, spelled out only when an error needs it
    /// (a change set has thousands of values; formatting each place would cost more than decoding).
    struct Place {
        let index: Int
        var path: [String] = []

        func appending(_ part: String) -> Place { Place(index: index, path: path + [part]) }
        var text: String { (["changes[\(index)]"] + path).joined(separator: ".") }
    }

    private static func decodeChange(_ json: JSONValue, at index: Int, lookups: inout ModelLookups) throws(ChangeSetError) -> ObjectChange {
        let place = Place(index: index)
        guard json.objectMembers != nil else { throw ChangeSetError.malformed("\(place.text) must be an object") }
        guard let op = json["op"]?.stringValue, let kind = ObjectChange.Kind(rawValue: op) else {
            throw ChangeSetError.malformed("\(place.text).op must be \"insert\", \"update\", \"delete\", \"restore\" or \"merge\"")
        }
        guard let entityName = json["entity"]?.stringValue, let entity = lookups.entity(named: entityName) else {
            throw ChangeSetError.unknownEntity(place: place.text, entity: json["entity"]?.stringValue ?? "(missing)")
        }
        guard let uri = json["uri"]?.stringValue else { throw ChangeSetError.malformed("\(place.text).uri is missing") }
        try checkURI(uri, entity: entityName, family: false, lookups: &lookups, place: place.appending("uri").text)
        var change = ObjectChange(kind: kind, uri: uri, entity: entityName)
        if kind == .merge {
            // A merge names the survivor, of the same entity family, and nothing else.
            guard let survivor = json["into"]?.stringValue else { throw ChangeSetError.malformed("\(place.text).into (the object merged into) is missing") }
            try checkURI(survivor, entity: entity.entity.rootName, family: true, lookups: &lookups, place: place.appending("into").text)
            guard survivor != uri else { throw ChangeSetError.malformed("\(place.text): an object cannot be merged into itself") }
            for field in ["values", "tombstone", "added", "removed", "order"] where json[field] != nil {
                throw ChangeSetError.malformed("\(place.text): a merge carries no '\(field)'")
            }
            change.mergedInto = survivor
            return change
        }
        if json["into"] != nil { throw ChangeSetError.malformed("\(place.text).into belongs to merges only") }
        let valuesField = kind == .delete ? "tombstone" : "values"
        if let values = json[valuesField] {
            guard let members = values.objectMembers else { throw ChangeSetError.malformed("\(place.text).\(valuesField) must be an object") }
            change.values.reserveCapacity(members.count)
            for (key, value) in members {
                change.values[key] = try decodeValue(value, key: key, entity: entity, lookups: &lookups, place: place, field: valuesField)
            }
        }
        if let added = json["added"] {
            change.added = try decodeMembers(added, field: "added", entity: entity, lookups: &lookups, place: place,
                                             eitherSide: kind == .restore || kind == .delete)
        }
        if let removed = json["removed"] {
            change.removed = try decodeMembers(removed, field: "removed", entity: entity, lookups: &lookups, place: place)
        }
        if let order = json["order"] {
            guard kind != .delete else { throw ChangeSetError.malformed("\(place.text).order: a delete carries no positions") }
            change.positions = try decodePositions(order, entity: entity, lookups: &lookups, place: place)
        }
        return change
    }

    /// `{"relationship": {"member URI": "position key", …}, …}` for ordered to-many relationships of the entity.
    private static func decodePositions(_ json: JSONValue, entity: ModelLookups.EntityLookups, lookups: inout ModelLookups,
                                        place: Place) throws(ChangeSetError) -> [String: [String: String]] {
        guard let members = json.objectMembers else { throw ChangeSetError.malformed("\(place.text).order must be an object") }
        var result: [String: [String: String]] = [:]
        for (key, keys) in members {
            guard let relationship = entity.entity.relationship(named: key), relationship.isToMany, relationship.isOrdered,
                  !relationship.isTransient else {
                throw ChangeSetError.unknownProperty(place: "\(place.text).order", entity: entity.entity.name, property: key)
            }
            guard let entries = keys.objectMembers else {
                throw ChangeSetError.malformed("\(place.text).order.\(key) must map member URIs to position keys")
            }
            var positions: [String: String] = [:]
            for (member, value) in entries {
                try checkURI(member, entity: relationship.destinationEntityName, family: true, lookups: &lookups,
                             place: place.appending("order").appending(key).text)
                guard let text = value.stringValue, OrderedPositions.isValid(text) else {
                    throw ChangeSetError.malformed("\(place.text).order.\(key): " +
                                                   "the position of \(member) must be 1…\(OrderedPositions.maximumKeyLength) base-62 digits, not ending in 0")
                }
                positions[member] = text
            }
            result[key] = positions
        }
        return result
    }

    /// Members by relationship. A restore also carries the other side of its many-to-many
    /// relationships (the rows a delete removed), and a delete its memberships on both sides,
    /// so they take any join-table relationship.
    private static func decodeMembers(_ json: JSONValue, field: String, entity: ModelLookups.EntityLookups, lookups: inout ModelLookups,
                                      place: Place, eitherSide: Bool = false) throws(ChangeSetError) -> [String: [String]] {
        guard let members = json.objectMembers else { throw ChangeSetError.malformed("\(place.text).\(field) must be an object") }
        var result: [String: [String]] = [:]
        for (key, list) in members {
            let destination: String
            if case .toMany(let recorded) = lookups.property(key, of: entity) {
                destination = recorded
            } else if eitherSide, let relationship = entity.entity.relationship(named: key),
                      lookups.model.joinTableRelationships(of: entity.entity).contains(where: { $0.name == key }) {
                destination = relationship.destinationEntityName
            } else {
                throw ChangeSetError.unknownProperty(place: "\(place.text).\(field)", entity: entity.entity.name, property: key)
            }
            guard case .array(let elements) = list else { throw ChangeSetError.malformed("\(place.text).\(field).\(key) must be an array of URIs") }
            var uris: [String] = []
            for element in elements {
                guard let member = element.stringValue else { throw ChangeSetError.malformed("\(place.text).\(field).\(key) must hold URI strings") }
                try checkURI(member, entity: destination, family: true, lookups: &lookups, place: place.appending(field).appending(key).text)
                uris.append(member)
            }
            result[key] = uris
        }
        return result
    }

    private static func decodeValue(_ json: JSONValue, key: String, entity: ModelLookups.EntityLookups, lookups: inout ModelLookups,
                                    place: Place, field: String) throws(ChangeSetError) -> ChangeValue {
        switch lookups.property(key, of: entity) {
        case .attribute(let type):
            switch AttributeJSON.decode(json, as: type) {
            case .success(let value): return value.map(ChangeValue.attribute) ?? .null
            case .failure(let failure): throw ChangeSetError.wrongType(place: place.appending(field).appending(key).text, message: failure.message)
            }
        case .toOne(let destination):
            if case .null = json { return .null }
            guard let uri = json.stringValue else {
                throw ChangeSetError.wrongType(place: place.appending(field).appending(key).text,
                                               message: "a to-one relationship takes an object URI or null; got \(json.kindName)")
            }
            try checkURI(uri, entity: destination, family: true, lookups: &lookups, place: place.appending(field).appending(key).text)
            return .object(uri)
        case .toMany, .unknown:
            throw ChangeSetError.unknownProperty(place: place.appending(field).appending(key).text, entity: entity.entity.name, property: key)
        }
    }

    /// A permanent object URI of `entity` (or, with `family`, of one of its subentities).
    /// `place` is only spelled out when the URI is refused.
    static func checkURI(_ uri: String, entity expected: String, family: Bool, lookups: inout ModelLookups,
                                 place: @autoclosure () -> String) throws(ChangeSetError) {
        switch ObjectURIComponents.parse(uri) {
        case .failure(let error):
            throw ChangeSetError.badURI(place: place(), message: error.description)
        case .success(let parts):
            guard parts.store != nil else { throw ChangeSetError.badURI(place: place(), message: "'\(uri)' is a temporary ID") }
            guard lookups.accepts(parts.entityName, as: expected, family: family) else {
                throw ChangeSetError.badURI(place: place(), message: "'\(uri)' does not name a \(expected)")
            }
        }
    }

    private static func uuid(_ json: JSONValue?, _ field: String) throws(ChangeSetError) -> UUID {
        guard let text = json?.stringValue, let value = ObjectURIComponents.uuid(text) else {
            throw ChangeSetError.malformed("'\(field)' must be a store UUID")
        }
        return value
    }

    private static func optionalString(_ json: JSONValue?, _ field: String) throws(ChangeSetError) -> String? {
        switch json {
        case nil, .null?: return nil
        case .string(let text)?: return text
        default: throw ChangeSetError.malformed("'\(field)' must be a string")
        }
    }
}

/// Why a change set was refused before anything was applied.
public enum ChangeSetError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Not a change set: bad JSON, a missing or mistyped field. `cause` is the JSON parser's error,
    /// when it was that.
    case malformed(String, cause: (any Error)? = nil)
    /// Written in a format version this library does not read.
    case unsupportedFormat(Int)
    /// An entity the model does not have.
    case unknownEntity(place: String, entity: String)
    /// A property the entity does not have (or one that is never recorded).
    case unknownProperty(place: String, entity: String, property: String)
    /// A value of the wrong type for its property.
    case wrongType(place: String, message: String)
    /// A malformed, temporary or mistyped object URI.
    case badURI(place: String, message: String)

    public var description: String {
        switch self {
        case .malformed(let message, _): "malformed change set: \(message)"
        case .unsupportedFormat(let version):
            "change set format \(version) is not supported " +
                "(this Ferry reads formats \(ChangeSet.readableFormats.lowerBound)…\(ChangeSet.readableFormats.upperBound)); " +
                "upgrade Ferry on this peer to read it"
        case .unknownEntity(let place, let entity): "\(place): the model has no entity '\(entity)'"
        case .unknownProperty(let place, let entity, let property): "\(place): entity '\(entity)' has no recorded property '\(property)'"
        case .wrongType(let place, let message): "\(place): \(message)"
        case .badURI(let place, let message): "\(place): \(message)"
        }
    }
}

extension ChangeSetError {
    /// Errors are equal when they say the same (causes are not compared).
    public static func == (lhs: ChangeSetError, rhs: ChangeSetError) -> Bool {
        lhs.description == rhs.description
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(description)
    }
}

extension ChangeSetError: FerryError {
    /// The kinds of ``ChangeSetError``: its cases.
    public enum Code: String, Hashable, Sendable {
        /// ``ChangeSetError/malformed(_:)``
        case malformed
        /// ``ChangeSetError/unsupportedFormat(_:)``
        case unsupportedFormat
        /// ``ChangeSetError/unknownEntity(place:entity:)``
        case unknownEntity
        /// ``ChangeSetError/unknownProperty(place:entity:property:)``
        case unknownProperty
        /// ``ChangeSetError/wrongType(place:message:)``
        case wrongType
        /// ``ChangeSetError/badURI(place:message:)``
        case badURI
    }

    public var code: Code {
        switch self {
        case .malformed: .malformed
        case .unsupportedFormat: .unsupportedFormat
        case .unknownEntity: .unknownEntity
        case .unknownProperty: .unknownProperty
        case .wrongType: .wrongType
        case .badURI: .badURI
        }
    }

    /// The JSON parser's error, for a change set that is not JSON.
    public var cause: (any Error)? {
        if case .malformed(_, let cause) = self { return cause }
        return nil
    }
}
