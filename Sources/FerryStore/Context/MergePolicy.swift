/// What a save does when another writer changed the objects it writes since they were read
/// (optimistic-locking conflicts: see `ManagedObjectContext+MergeConflicts.swift` and
/// `docs/STORE.md`, "Merge policies"), and when an object it writes would share the values of a
/// uniqueness constraint with another object (Core Data's merge policies, `NSMergePolicyType`).
///
/// For uniqueness constraints:
/// In every policy but ``error``, the object that was there first survives: the stored
/// object (it keeps its URI, the one its peers know), or, between two objects of the same
/// save, the one inserted first. The newcomer is merged into it as the policy says, every
/// reference to the newcomer is moved to the survivor, and the newcomer is not saved
/// (an updated newcomer is deleted). See `docs/STORE.md`, "Uniqueness constraints".
public enum MergePolicy: String, Sendable, Hashable, CaseIterable {
    /// The save fails with ``SaveError/constraintConflict(_:)`` naming the constraint and both
    /// objects; nothing is written (`NSErrorMergePolicy`, the default).
    case error
    /// The stored object keeps its values; the newcomer's values fill only what it lacks
    /// (nil attributes and to-ones); to-many members are united (`NSMergeByPropertyStoreTrumpMergePolicy`).
    case mergeByPropertyStoreTrump = "store-trump"
    /// The newcomer's values win for every property it set; to-many members are united
    /// (`NSMergeByPropertyObjectTrumpMergePolicy`: an upsert).
    case mergeByPropertyObjectTrump = "object-trump"
    /// The newcomer replaces the stored object's state entirely: every attribute and to-one,
    /// nil included, and its to-many members (`NSOverwriteMergePolicy`).
    case overwrite
    /// The newcomer's changes are discarded: an inserted newcomer is not saved (references to it
    /// go to the stored object), an updated one returns to its saved values (`NSRollbackMergePolicy`).
    case rollback

    /// Core Data's `NSMergePolicyType` value.
    public var coreDataType: Int {
        switch self {
        case .error: 0
        case .mergeByPropertyStoreTrump: 1
        case .mergeByPropertyObjectTrump: 2
        case .overwrite: 3
        case .rollback: 4
        }
    }
}
