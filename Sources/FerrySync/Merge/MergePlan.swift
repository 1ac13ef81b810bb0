import FerryModel
import FerryStore

/// What replaying one change set does here, decided before anything is written:
/// the outcome of docs/SYNC.md's merge rules for this change set against what
/// the store knows (``MergeFacts``). ``MergePlanner`` makes it; ``MergeExecutor``
/// carries it out on a context, and the store records it with the save.
///
/// Objects are named by origin URI throughout: a plan needs no store to be made or read.
struct MergePlan: Equatable {
    /// One write of the plan, in the order it is carried out.
    enum Step: Equatable {
        /// A new object under `uri` (an insert never seen here). Attributes with a default that
        /// `keeping` does not name are set to nil: the origin left them out, so they were nil there.
        case create(uri: String, entity: String, keeping: Set<String>)
        /// A new row for a URI deleted here (a restore newer than its delete, or an object a
        /// Deny rule brings back); its tombstone goes. Defaults are cleared as for ``create``.
        case resurrect(uri: String, entity: String, keeping: Set<String>)
        /// A property value that wins (`.object` names the referred object by origin URI;
        /// a reference repaired to nothing is `.null`).
        case set(uri: String, property: String, value: ChangeValue)
        /// A to-many member that wins its (object, relationship, member) clock.
        case add(uri: String, relationship: String, member: String)
        /// A to-many member removed, winning its clock.
        case remove(uri: String, relationship: String, member: String)
        /// A delete: one the change set made, or a referrer deleted by a Cascade rule because it
        /// points at an object deleted here. Delete rules then run against the local graph.
        case delete(uri: String)
        /// Two duplicates the change set merged: the loser's values that win and everything that
        /// points at it move to the survivor, and its URI becomes an alias of the survivor's.
        case merge(loser: String, survivor: String)
    }

    /// The writes, in order.
    var steps: [Step] = []
    /// The properties (membership facts as `relationship + " " + member`, existence as
    /// ``ReplayAnnotation/existenceKey``) whose clocks take the change set's clock, by object.
    var clocks: [String: Set<String>] = [:]
    /// Positions in ordered relationships that win their (object, relationship, member) clock:
    /// owner URI → relationship → member URI → position key. The executor orders the owner's
    /// members by them (with the positions the store keeps for the others).
    var positions: [String: [String: [String: String]]] = [:]
    /// The objects the change set itself deleted here (tombstoned with its clock).
    var deletes: Set<String> = []
    /// Deleted objects this store never had: a tombstone each, nothing else.
    var tombstonesOnly: [DeletedObject] = []
    /// Objects recorded as restored in a new change set of this store: a delete a Deny rule
    /// refused here, or a deleted object brought back for a Deny reference.
    var restored: Set<String> = []

    /// The URIs of the objects the plan brings into being (new and resurrected), in order.
    var createdURIs: [String] {
        steps.compactMap { step in
            switch step {
            case .create(let uri, _, _), .resurrect(let uri, _, _): uri
            default: nil
            }
        }
    }
}

/// Why a change set cannot be merged as it is (it is quarantined with this reason).
enum MergeProblem: FerryError, Equatable, CustomStringConvertible {
    /// A change names an object this store has never received (a change set it depends on is missing or was purged).
    case unknownObject(String, place: String)

    /// The kinds of ``MergeProblem``, one per case.
    enum Code: String, Hashable, Sendable {
        /// A change names an object this store has never received (``MergeProblem/unknownObject(_:place:)``).
        case unknownObject
    }

    /// The kind of fault.
    var code: Code {
        switch self {
        case .unknownObject: .unknownObject
        }
    }

    var description: String {
        switch self {
        case .unknownObject(let uri, let place):
            "\(place) refers to \(uri), which this store has never received"
        }
    }
}
