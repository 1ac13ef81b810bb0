import Foundation

/// What can be read of a change set without its model: who made it, its place in its origin's
/// history, its clock and what it depends on. A relay (`ferry relay`), which stores and forwards
/// change sets of any model, reads this much of every line and keeps the line itself as it came.
public struct ChangeSetEnvelope: Sendable, Hashable {
    /// The store where the save happened.
    public var origin: UUID
    /// The change set's place in its origin's history (≥ 1).
    public var sequence: Int64
    /// Its hybrid-logical-clock timestamp.
    public var timestamp: HybridTimestamp
    /// The version hash of the model it was made with.
    public var modelHash: String
    /// For other origins, the last change set the origin had applied when it saved.
    public var dependencies: VersionVector
    /// How many object changes it carries.
    public var changeCount: Int

    /// Reads the envelope of one change-set line: the same checks of these members as a store's
    /// reader makes (format, origin, `seq ≥ 1`, `hlc ≥ 0`, model, `deps`, `changes` an array of
    /// objects), nothing about the changes' contents, which need the model.
    /// - Throws: ``ChangeSetError`` naming the member that is wrong.
    public init(line: String) throws(ChangeSetError) {
        // The changes are counted as they are parsed, not held: a relay reads the envelope of every
        // change set it takes, some of hundreds of megabytes.
        let json: JSONValue
        let changes: JSONParser.CountedArray?
        do { (json, changes) = try JSONValue.parseCountingChanges(line) } catch { throw ChangeSetError.malformed("not JSON: \(error)", cause: error) }
        guard json.objectMembers != nil else { throw ChangeSetError.malformed("a change set is a JSON object") }
        guard case .integer(let format)? = json["format"] else { throw ChangeSetError.malformed("'format' is missing or not a number") }
        guard ChangeSet.readableFormats.contains(Int(clamping: format)) else { throw ChangeSetError.unsupportedFormat(Int(clamping: format)) }
        guard let originText = json["origin"]?.stringValue, let origin = ObjectURIComponents.uuid(originText) else {
            throw ChangeSetError.malformed("'origin' must be a store UUID")
        }
        guard case .integer(let sequence)? = json["seq"], sequence >= 1 else { throw ChangeSetError.malformed("'seq' must be a whole number ≥ 1") }
        guard case .integer(let clock)? = json["hlc"], clock >= 0 else { throw ChangeSetError.malformed("'hlc' must be a whole number ≥ 0") }
        guard let modelHash = json["model"]?.stringValue, !modelHash.isEmpty else {
            throw ChangeSetError.malformed("'model' (the model version hash) is missing")
        }
        if let signature = json["sig"] {
            guard signature.stringValue != nil else { throw ChangeSetError.malformed("'sig' must be a string") }
        }
        var dependencies: VersionVector = [:]
        if let deps = json["deps"] {
            guard let members = deps.objectMembers else { throw ChangeSetError.malformed("'deps' must be an object of store UUIDs to sequence numbers") }
            for (key, value) in members {
                guard let store = ObjectURIComponents.uuid(key), case .integer(let number) = value, number >= 1 else {
                    throw ChangeSetError.malformed("'deps' entry '\(key)' must map a store UUID to a sequence number ≥ 1")
                }
                dependencies[store] = number
            }
        }
        guard let changes else { throw ChangeSetError.malformed("'changes' must be an array") }
        if let index = changes.firstNonObject { throw ChangeSetError.malformed("changes[\(index)] must be an object") }
        self.init(origin: origin, sequence: sequence, timestamp: HybridTimestamp(rawValue: clock), modelHash: modelHash,
                  dependencies: dependencies, changeCount: changes.count)
    }

    /// An envelope of these parts.
    public init(origin: UUID, sequence: Int64, timestamp: HybridTimestamp, modelHash: String, dependencies: VersionVector, changeCount: Int) {
        self.origin = origin
        self.sequence = sequence
        self.timestamp = timestamp
        self.modelHash = modelHash
        self.dependencies = dependencies
        self.changeCount = changeCount
    }
}
