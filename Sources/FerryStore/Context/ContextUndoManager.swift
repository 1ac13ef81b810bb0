import FerryModel

/// Undo and redo for one context (Core Data's `NSManagedObjectContext.undoManager`). A context has
/// none until one is set (as on iOS and on a Core Data server): recording costs a little on every
/// change, so only contexts that offer undo pay for it.
///
/// ```swift
/// context.undoManager = ContextUndoManager(levelsOfUndo: 20)
/// person.name = "Bob"
/// try context.processPendingChanges()      // ends the group: one event
/// context.undo()                           // name is back; redo() sets it again
/// ```
///
/// **Groups.** With ``groupsByEvent`` (the default), the changes between two
/// ``ManagedObjectContext/processPendingChanges()`` calls (a server's "event"; Core Data's run
/// loop turn) form one group, which ``ManagedObjectContext/undo()`` reverts as one. An explicit
/// ``beginUndoGrouping()`` … ``endUndoGrouping()`` (nestable) makes one group of everything between,
/// events or not. Without ``groupsByEvent``, changes outside explicit groups are not recorded.
///
/// **What is recorded**: attribute values, to-one and to-many relationships (each side, so the
/// inverses come back too), inserts and deletes, with what delete rules changed. Merges of
/// other writers' changes, refreshes and primitive accessors are not, as in Core Data.
///
/// **Where it ends**: ``ManagedObjectContext/save()``, ``ManagedObjectContext/rollback()`` and
/// ``ManagedObjectContext/reset()`` remove every action. (Core Data keeps actions across a save;
/// Ferry's undo covers unsaved changes only, since undoing a saved delete would need the row back.)
///
/// Like its context, the manager belongs to one isolation domain.
public final class ContextUndoManager {
    /// How many groups ``ManagedObjectContext/undo()`` can go back; older ones are dropped. 0 is no limit.
    public var levelsOfUndo: Int {
        didSet { trim() }
    }
    /// Whether each event (``ManagedObjectContext/processPendingChanges()``) ends a group.
    public var groupsByEvent = true
    /// How deep explicit groups are nested now.
    public private(set) var groupingLevel = 0

    var undoGroups: [[UndoStep]] = []
    var redoGroups: [[UndoStep]] = []
    /// The group being recorded.
    private var open: [UndoStep] = []
    /// Where steps go: the open group, or (while undoing or redoing) the group that reverts it.
    private var collecting: [UndoStep]?

    /// Creates a manager keeping `levelsOfUndo` groups (0: no limit).
    public init(levelsOfUndo: Int = 0) {
        self.levelsOfUndo = max(levelsOfUndo, 0)
    }

    /// Whether there is a group to undo (the open one included).
    public var canUndo: Bool { !undoGroups.isEmpty || !open.isEmpty }
    /// Whether there is an undone group to redo.
    public var canRedo: Bool { !redoGroups.isEmpty }

    /// Opens an explicit group; groups nest, and the outermost one's ``endUndoGrouping()`` closes it.
    public func beginUndoGrouping() {
        if groupingLevel == 0 { closeOpenGroup() }
        groupingLevel += 1
    }

    /// Closes the innermost explicit group (nothing when none is open).
    public func endUndoGrouping() {
        guard groupingLevel > 0 else { return }
        groupingLevel -= 1
        if groupingLevel == 0 { closeOpenGroup() }
    }

    /// Forgets every group, to undo and to redo.
    public func removeAllActions() {
        undoGroups.removeAll()
        redoGroups.removeAll()
        open.removeAll()
        groupingLevel = 0
    }

    // MARK: - Recording

    func record(_ step: UndoStep) {
        if collecting != nil {
            collecting?.append(step)
            return
        }
        guard groupsByEvent || groupingLevel > 0 else { return }
        open.append(step)
        if !redoGroups.isEmpty { redoGroups.removeAll() }
    }

    /// Ends the event's group (not an explicit one).
    func eventDidEnd() {
        if groupsByEvent && groupingLevel == 0 { closeOpenGroup() }
    }

    /// Closes every open group, before an undo.
    func closeAllGroups() {
        groupingLevel = 0
        closeOpenGroup()
    }

    private func closeOpenGroup() {
        guard !open.isEmpty else { return }
        undoGroups.append(open)
        open = []
        trim()
    }

    private func trim() {
        if levelsOfUndo > 0, undoGroups.count > levelsOfUndo { undoGroups.removeFirst(undoGroups.count - levelsOfUndo) }
    }

    /// The registry keys the recorded steps name (objects they point relationships back at).
    var namedKeys: Set<Int> {
        var keys = Set<Int>()
        for step in (undoGroups + redoGroups).joined() + open {
            switch step {
            case .toOne(let object, _, let key):
                keys.insert(object.key)
                if let key { keys.insert(key) }
            case .toMany(let object, _, let members):
                keys.insert(object.key)
                keys.formUnion(members)
            case .toManyLinked(let object, _, let key):
                keys.insert(object.key)
                keys.insert(key)
            case .attribute(let object, _, _), .insert(let object), .insertTakenBack(let object), .delete(let object), .undelete(let object):
                keys.insert(object.key)
            }
        }
        return keys
    }

    /// Runs `revert` with steps recorded into a new group, and returns it.
    func collect(_ revert: () -> Void) -> [UndoStep] {
        collecting = []
        revert()
        defer { collecting = nil }
        return collecting ?? []
    }
}

@available(*, unavailable, message: "an undo manager belongs to its context's isolation domain")
extension ContextUndoManager: Sendable {}

/// One recorded change, holding what reverts it.
enum UndoStep {
    /// An attribute had this value.
    case attribute(ManagedObject, index: Int, AttributeValue?)
    /// A to-one pointed at the object at this registry key (nil: at nothing).
    case toOne(ManagedObject, index: Int, Int?)
    /// A to-many held these members, in order.
    case toMany(ManagedObject, index: Int, [Int])
    /// A to-many gained the object at this registry key (reverted by removing it): what a link
    /// records, in constant space, however large the relationship.
    case toManyLinked(ManagedObject, index: Int, Int)
    /// The object was inserted (reverted by taking the insert back).
    case insert(ManagedObject)
    /// An insert was taken back (reverted by inserting again).
    case insertTakenBack(ManagedObject)
    /// The object was deleted (reverted by undeleting it).
    case delete(ManagedObject)
    /// A delete was undone (reverted by deleting again).
    case undelete(ManagedObject)
}

extension ManagedObjectContext {
    /// Reverts the last group of changes (closing the open one first); its revert can be redone.
    /// Nothing happens without an ``undoManager`` or a group to undo.
    public func undo() {
        guard let manager = undoManager else { return }
        manager.closeAllGroups()
        guard let group = manager.undoGroups.popLast() else { return }
        let redo = manager.collect { for step in group.reversed() { revert(step) } }
        if !redo.isEmpty { manager.redoGroups.append(redo) }
    }

    /// Applies again the last group ``undo()`` reverted.
    public func redo() {
        guard let manager = undoManager, let group = manager.redoGroups.popLast() else { return }
        let undo = manager.collect { for step in group.reversed() { revert(step) } }
        if !undo.isEmpty { manager.undoGroups.append(undo) }
    }

    func recordUndo(_ step: @autoclosure () -> UndoStep) {
        undoManager?.record(step())
    }

    /// A property an undo brought back to its saved value no longer counts as changed.
    private func settle(_ object: ManagedObject, _ index: Int, backAtCommitted: Bool) {
        if backAtCommitted { object.changedIndexes.remove(index) }
    }

    /// Reverts one step, recording the step that reverts the revert.
    private func revert(_ step: UndoStep) {
        switch step {
        case .attribute(let object, let index, let value):
            guard object.managedObjectContext === self else { return }
            object.setAttribute(index, value, in: self)
            settle(object, index, backAtCommitted: object.attributes[index] == object.committedAttributes[index])
        case .toOne(let object, let index, let key):
            guard object.managedObjectContext === self, object.toOne[index] != key else { return }
            recordUndo(.toOne(object, index: index, object.toOne[index]))
            object.toOne[index] = key
            markChanged(object, index)
            settle(object, index, backAtCommitted: key == object.committedToOne[index])
        case .toManyLinked(let object, let index, let key):
            guard object.managedObjectContext === self, let members = object.toMany[index], members.contains(key) else { return }
            recordUndo(.toMany(object, index: index, members.ordered))
            _ = object.toMany[index]?.remove(key)
            markChanged(object, index)
            settle(object, index, backAtCommitted: object.toMany[index]?.ordered == members.committed)
        case .toMany(let object, let index, let ordered):
            guard object.managedObjectContext === self, let members = object.toMany[index] else { return }
            recordUndo(.toMany(object, index: index, members.ordered))
            object.toMany[index] = RelationshipMembers(ordered, committed: members.committed)
            markChanged(object, index)
            settle(object, index, backAtCommitted: ordered == members.committed)
        case .insert(let object):
            guard object.managedObjectContext === self, !object.isDeleted else { return }
            object.isDeleted = true
            noteEdit(object)
            recordUndo(.insertTakenBack(object))
        case .insertTakenBack(let object):
            guard object.managedObjectContext === self, object.isDeleted else { return }
            object.isDeleted = false
            noteEdit(object)
            recordUndo(.insert(object))
        case .delete(let object):
            guard object.managedObjectContext === self, object.isDeleted else { return }
            object.isDeleted = false
            object.isPreparedForDeletion = false
            deletedKeys.removeAll { $0 == object.key }
            registry.pin(object.key)
            noteEdit(object)
            recordUndo(.undelete(object))
        case .undelete(let object):
            guard object.managedObjectContext === self else { return }
            delete(object)  // (records the delete)
        }
    }
}
