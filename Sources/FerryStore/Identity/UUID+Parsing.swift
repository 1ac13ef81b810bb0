import Foundation

extension UUID {
    /// `UUID(uuidString:)` without its cost on Linux: the 36-character form (8-4-4-4-12 hex
    /// digits, either case), read by ``ObjectURIComponents/uuid(_:)``. Foundation's goes through
    /// `sscanf`, 6 µs a call at the median on the 2-core VM of docs/PERFORMANCE.md, and
    /// the history's reads parse every origin they return (a vector, a change set's origin, a clock).
    package init?(parsing text: String) {
        guard let uuid = ObjectURIComponents.uuid(text) else { return nil }
        self = uuid
    }
}
