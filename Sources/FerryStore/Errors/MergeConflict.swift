/// An object a save could not write as it stood because another context or process changed
/// or deleted it since this context read it (Core Data's `NSMergeConflict`): what the object
/// holds now, what it was read as, and what the store holds.
///
/// Under ``MergePolicy/error`` a save with conflicts fails with ``SaveError/mergeConflict(_:)``
/// listing them; under the other policies they are resolved and the save goes on
/// (``ManagedObjectContext/lastResolvedConflicts`` lists them).
public struct MergeConflict: Sendable, Hashable, CustomStringConvertible {
    /// The object.
    public var objectID: ObjectID
    /// The version (`Z_OPT`) the context read.
    public var oldVersion: Int64
    /// The version in the store now; nil when another writer deleted the object.
    public var newVersion: Int64?
    /// The object's values in the context (attributes and to-ones, by name; to-ones as URIs).
    public var objectSnapshot: [String: ChangeValue]
    /// The values the context read (Core Data's `cachedSnapshot`).
    public var cachedSnapshot: [String: ChangeValue]
    /// The values in the store now; nil when the object was deleted there.
    public var persistedSnapshot: [String: ChangeValue]?

    public init(objectID: ObjectID, oldVersion: Int64, newVersion: Int64?, objectSnapshot: [String: ChangeValue],
                cachedSnapshot: [String: ChangeValue], persistedSnapshot: [String: ChangeValue]?) {
        self.objectID = objectID
        self.oldVersion = oldVersion
        self.newVersion = newVersion
        self.objectSnapshot = objectSnapshot
        self.cachedSnapshot = cachedSnapshot
        self.persistedSnapshot = persistedSnapshot
    }

    /// The properties the other writer changed (those whose stored value differs from the one read).
    public var changedInStore: Set<String> {
        guard let persistedSnapshot else { return [] }
        return Set(persistedSnapshot.keys.filter { persistedSnapshot[$0] != cachedSnapshot[$0] })
    }

    public var description: String {
        guard let newVersion else {
            return "\(objectID.uriString) was deleted by another writer after this context read it (version \(oldVersion))"
        }
        let keys = changedInStore.sorted()
        return "\(objectID.uriString) changed from version \(oldVersion) to \(newVersion) by another writer"
            + (keys.isEmpty ? "" : " (\(keys.joined(separator: ", ")))")
    }
}
