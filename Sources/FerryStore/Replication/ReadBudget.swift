/// How many bytes of change-set text one read of a history takes: the first change set always,
/// then each one while the total stays within `maximum` (every one when there is no maximum).
/// What bounds a page served to a peer and a change feed's read, on both stores.
package struct ReadBudget {
    /// The bound, in bytes; nil for none.
    package let maximum: Int?
    private var used = 0

    package init(maximum: Int?) {
        self.maximum = maximum
    }

    /// Whether a change set of `bytes` fits, counting it when it does. `bytes` is asked only under
    /// a bound (it may cost a look at the stored form).
    package mutating func admits(_ bytes: @autoclosure () throws -> Int) rethrows -> Bool {
        guard let maximum else { return true }
        let next = used + (try bytes())
        if used > 0, next > maximum { return false }
        used = next
        return true
    }
}
