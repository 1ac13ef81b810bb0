import FerryModel

/// One validation failure found at save: which object, which key, what rule.
///
/// ``code`` uses Core Data's numbers (`NSValidationMissingMandatoryPropertyError`
/// = 1570, …) so that logs line up with Core Data's documentation.
public struct ValidationError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The rule that failed. Raw values are Core Data's error codes.
    public enum Code: Int, Sendable, Hashable, CaseIterable {
        /// A custom validator rejected the object.
        case custom = 1550
        /// A non-optional attribute or relationship is nil or empty.
        case missingMandatoryProperty = 1570
        /// A to-many relationship has fewer objects than its minimum.
        case relationshipLacksMinimumCount = 1580
        /// A to-many relationship has more objects than its maximum.
        case relationshipExceedsMaximumCount = 1590
        /// A Deny rule blocks the delete.
        case relationshipDeniedDelete = 1600
        /// A number is above its maximum.
        case numberTooLarge = 1610
        /// A number is below its minimum.
        case numberTooSmall = 1620
        /// A date is after its maximum.
        case dateTooLate = 1630
        /// A date is before its minimum.
        case dateTooSoon = 1640
        /// A string is longer than its maximum length.
        case stringTooLong = 1660
        /// A string is shorter than its minimum length.
        case stringTooShort = 1670
        /// A string does not match its regular expression.
        case stringPatternMatching = 1680

        /// A short machine-readable name, e.g. `missingMandatoryProperty`.
        public var name: String { String(describing: self) }
    }

    /// The rule that failed.
    public let code: Code
    /// The entity of the object.
    public let entityName: String
    /// The object's URI (temporary for unsaved objects).
    public let objectURI: String
    /// The attribute or relationship, nil for object-level failures.
    public let key: String?
    /// What is wrong, in words a user can act on.
    public let message: String

    /// Creates a failure; custom validators throw these (or any error, which
    /// Ferry wraps as `.custom`).
    public init(code: Code, entityName: String, objectURI: String, key: String?, message: String) {
        self.code = code
        self.entityName = entityName
        self.objectURI = objectURI
        self.key = key
        self.message = message
    }

    public var description: String {
        let subject = key.map { "\(entityName).\($0)" } ?? entityName
        return "\(subject) of \(objectURI): \(message)"
    }
}

/// Why a save wrote nothing.
///
/// After any of these the context still holds its pending changes: fix them
/// and save again, or call `rollback()`.
public enum SaveError: Error, Sendable, CustomStringConvertible {
    /// One or more objects break the model's rules; every failure of the save is listed.
    case validationFailed([ValidationError])
    /// Another context or process changed or deleted these objects since they were
    /// read (optimistic locking). Refetch or `rollback()`, then apply the change again.
    case conflict(objectURIs: [String])
    /// Under ``MergePolicy/error``: another context or process changed or deleted these objects
    /// since this context read them; each ``MergeConflict`` holds the object's values, the values
    /// read and the store's (Core Data's `NSManagedObjectMergeError` with its conflict list).
    /// Nothing was written. Merge (``ManagedObjectContext/refresh(_:mergeChanges:)``), choose
    /// another ``ManagedObjectContext/mergePolicy``, or roll back.
    case mergeConflict([MergeConflict])
    /// Objects of the save would share the values of a uniqueness constraint, and the
    /// context's ``ManagedObjectContext/mergePolicy`` is ``MergePolicy/error``. Change one of
    /// them, or save with another merge policy.
    case constraintConflict([ConstraintConflict])
    /// The store failed to write (disk full, read-only file, …).
    case storeFailed(StoreFailure)

    /// Core Data's error code: the single failure's code, 1560 for several,
    /// 133020 for a conflict, 133021 for a uniqueness constraint conflict, 134030 for a store failure.
    public var code: Int {
        switch self {
        case .validationFailed(let errors): errors.count == 1 ? errors[0].code.rawValue : 1560
        case .conflict, .mergeConflict: 133020
        case .constraintConflict: 133021
        case .storeFailed: 134030
        }
    }

    /// The URIs of the objects another writer changed, for ``conflict(objectURIs:)`` and ``mergeConflict(_:)``.
    public var conflictedObjectURIs: [String] {
        switch self {
        case .conflict(let uris): uris
        case .mergeConflict(let conflicts): conflicts.map(\.objectID.uriString)
        default: []
        }
    }

    /// The validation failures, empty for other errors.
    public var validationErrors: [ValidationError] {
        if case .validationFailed(let errors) = self { return errors }
        return []
    }

    /// Whether trying the same save again later can succeed without changes.
    public var isRetryable: Bool {
        switch self {
        case .validationFailed: false
        case .conflict, .mergeConflict: false
        case .constraintConflict: false
        case .storeFailed(let failure): failure.isRetryable
        }
    }

    public var description: String {
        switch self {
        case .validationFailed(let errors) where errors.count == 1:
            "validation failed: \(errors[0])"
        case .validationFailed(let errors):
            "validation failed with \(errors.count) errors:\n" + errors.map { "  - \($0)" }.joined(separator: "\n")
        case .conflict(let uris):
            "save conflict: \(uris.joined(separator: ", ")) changed in the store since this context read them; refetch and apply the change again"
        case .mergeConflict(let conflicts):
            "save conflict under the error merge policy: " + conflicts.map(\.description).joined(separator: "; ")
                + "; merge the changes (refresh the objects), save with another merge policy, or roll back"
        case .constraintConflict(let conflicts):
            "save refused under the error merge policy: " + conflicts.map(\.description).joined(separator: "; ")
                + "; change the values, or save with another merge policy"
        case .storeFailed(let reason):
            "the store could not write: \(reason)"
        }
    }
}

/// Why a store could not be opened or used.
public enum StoreError: Error, Sendable, CustomStringConvertible {
    /// The file cannot be opened as a Ferry store; `cause` is the error met, when there was one.
    case cannotOpen(path: String, reason: String, cause: (any Error)? = nil)
    /// The store cannot be opened for writing because of where it lives: a
    /// read-only or full file system, missing permissions, a lock held too long.
    /// Nothing is wrong with the store or the configuration; it opens once the
    /// cause is fixed (the daemon keeps trying). `cause` is the error met, when there was one.
    case unavailable(path: String, reason: String, cause: (any Error)? = nil)
    /// The store was made with another model and cannot be migrated automatically.
    case incompatibleModel(path: String, differences: [String])
    /// A query or write failed inside the store.
    case storeFailure(StoreFailure)
    /// The store file was created by a newer Ferry.
    case unsupportedFormatVersion(path: String, found: Int, supported: Int)
    /// The store signs its change sets and this process cannot (no key, or a key rotated out):
    /// nothing is saved (docs/SYNC.md, "Signed change sets").
    case cannotSign(path: String, reason: String)

    public var description: String {
        switch self {
        case .cannotOpen(let path, let reason, _):
            "cannot open store \(path): \(reason)"
        case .unavailable(let path, let reason, _):
            "cannot open store \(path): \(reason)"
        case .incompatibleModel(let path, let differences):
            "the model is incompatible with store \(path) (Core Data error 134100); "
                + "only additive changes (new entities, new optional attributes or relationships) migrate automatically. Differences:\n"
                + differences.map { "  - \($0)" }.joined(separator: "\n")
        case .storeFailure(let reason):
            "store failure: \(reason)"
        case .cannotSign(let path, let reason):
            "nothing was saved in store \(path): \(reason)"
        case .unsupportedFormatVersion(let path, let found, let supported):
            "store \(path) has format version \(found); this Ferry reads up to version \(supported). Upgrade Ferry."
        }
    }
}

extension ValidationError: FerryError {
    /// The case's name (``Code/name``): the code itself is Core Data's number.
    public var codeName: String { code.name }
}

extension SaveError: FerryError {
    /// The case's name, beside Core Data's number in ``code``.
    public var codeName: String {
        switch self {
        case .validationFailed: "validationFailed"
        case .conflict: "conflict"
        case .mergeConflict: "mergeConflict"
        case .constraintConflict: "constraintConflict"
        case .storeFailed: "storeFailed"
        }
    }

    /// The store's failure; the validation failures are in ``validationErrors``.
    public var cause: (any Error)? {
        if case .storeFailed(let failure) = self { return failure }
        return nil
    }
}

extension StoreError: FerryError {
    /// The kinds of ``StoreError``: its cases.
    public enum Code: String, Hashable, Sendable {
        /// ``StoreError/cannotOpen(path:reason:cause:)``
        case cannotOpen
        /// ``StoreError/unavailable(path:reason:cause:)``
        case unavailable
        /// ``StoreError/incompatibleModel(path:differences:)``
        case incompatibleModel
        /// ``StoreError/storeFailure(_:)``
        case storeFailure
        /// ``StoreError/unsupportedFormatVersion(path:found:supported:)``
        case unsupportedFormatVersion
        /// ``StoreError/cannotSign(path:reason:)``
        case cannotSign
    }

    public var code: Code {
        switch self {
        case .cannotOpen: .cannotOpen
        case .unavailable: .unavailable
        case .incompatibleModel: .incompatibleModel
        case .storeFailure: .storeFailure
        case .unsupportedFormatVersion: .unsupportedFormatVersion
        case .cannotSign: .cannotSign
        }
    }

    public var cause: (any Error)? {
        switch self {
        case .cannotOpen(_, _, let cause), .unavailable(_, _, let cause): cause
        case .storeFailure(let failure): failure
        default: nil
        }
    }

    /// An unavailable store opens once its surroundings are fixed (the daemon keeps trying); a
    /// store failure may pass; the rest needs someone to act.
    public var isRetryable: Bool {
        switch self {
        case .unavailable: true
        case .storeFailure(let failure): failure.isRetryable
        default: false
        }
    }
}
