/// The objects a context has registered, by key (the context-local handle objects use to
/// point at each other).
///
/// As in Core Data, an object with pending changes (inserted, updated, deleted) is held
/// strongly — *pinned* — and any other object only as long as something else holds it: the
/// registry keeps an unowned reference, and the object tells its context from its `deinit`
/// (``ManagedObjectContext/objectDidDeinit(key:objectID:isReferenced:)``), which clears the slot.
/// ``ManagedObjectContext/retainsRegisteredObjects`` pins every object instead.
///
/// A key that no other object stored (``ManagedObject/isReferenced`` false) is reused once its
/// object is gone; keys of inserted objects are always new, because they are also their
/// temporary IDs' counters.
///
/// Releasing a pinned object may run its `deinit`, which writes to the registry: the mutating
/// methods that drop a strong reference return it, for the caller to drop after the registry
/// access ended.
struct ObjectRegistry {
    /// (`Unmanaged` rather than an `unowned(unsafe)` optional: with the latter, Swift 6.3’s
    /// `compactMap` over the slots dropped live objects once a slot before them was emptied.)
    private struct Slot {
        var reference: Unmanaged<ManagedObject>?
        var pinned: ManagedObject?

        init() {}

        init(object: ManagedObject, pinned: Bool) {
            reference = Unmanaged.passUnretained(object)
            self.pinned = pinned ? object : nil
        }

        @inline(__always)
        var object: ManagedObject? { reference?.takeUnretainedValue() }
    }

    private var slots: [Slot] = []
    private var freeKeys: [Int] = []

    /// The object at `key`, if it is alive.
    @inline(__always)
    subscript(key: Int) -> ManagedObject? { slots[key].object }

    /// How many keys were ever given out.
    var keyCount: Int { slots.count }

    /// A key no object ever had (for an insert: its temporary ID's counter).
    var freshKey: Int { slots.count }

    /// A key for a loaded object or fault: a reused one when there is one.
    mutating func reusableKey() -> Int {
        freeKeys.popLast() ?? slots.count
    }

    /// Puts `object` at `key` (``freshKey`` or from ``reusableKey()``).
    mutating func place(_ object: ManagedObject, at key: Int, pinned: Bool) {
        let slot = Slot(object: object, pinned: pinned)
        if key == slots.count { slots.append(slot) } else { slots[key] = slot }
    }

    /// Holds the object at `key` strongly.
    @inline(__always)
    mutating func pin(_ key: Int) {
        if slots[key].pinned == nil { slots[key].pinned = slots[key].object }
    }

    /// Stops holding the object at `key` strongly; returns the reference to drop.
    mutating func unpin(_ key: Int) -> ManagedObject? {
        defer { slots[key].pinned = nil }
        return slots[key].pinned
    }

    /// Empties the slot at `key`; returns the strong reference to drop.
    mutating func clear(_ key: Int) -> ManagedObject? {
        defer { slots[key] = Slot() }
        return slots[key].pinned
    }

    /// Lets `key` be given out again.
    mutating func free(_ key: Int) {
        freeKeys.append(key)
    }

    /// Every live object.
    var objects: [ManagedObject] { slots.compactMap { $0.object } }

    /// Forgets everything; returns the strong references to drop.
    mutating func removeAll() -> [ManagedObject] {
        defer {
            slots.removeAll()
            freeKeys.removeAll()
        }
        return slots.compactMap { $0.pinned }
    }
}
