import Foundation
import FerryStore

/// How replicas settle objects of different origins that share a unique key (docs/SYNC.md,
/// "Uniqueness constraints across replicas"): which one survives, and whose value of each
/// property the survivor keeps. Pure, so every replica decides the same.
enum DuplicateRule {
    /// (survivor, loser): the object whose origin URI sorts first (byte order) survives.
    static func order(_ a: String, _ b: String) -> (survivor: String, loser: String) {
        a.utf8.lexicographicallyPrecedes(b.utf8) ? (a, b) : (b, a)
    }

    /// Whether the loser's value of a property replaces the survivor's: the later write wins
    /// (by timestamp, then origin); a value never written since its object's insert loses to any
    /// write; when neither was written since, the survivor keeps its own. Two writes with one
    /// clock (one save wrote both objects) are settled by their values: the greater JSON text wins,
    /// so the outcome does not depend on which duplicates merged first.
    static func loserWins(loser: WriteStamp?, survivor: WriteStamp?, loserValue: String, survivorValue: String) -> Bool {
        guard let loser else { return false }
        guard let survivor else { return true }
        if loser != survivor { return loser > survivor }
        return survivorValue.utf8.lexicographicallyPrecedes(loserValue.utf8)
    }

    /// The text a value is compared by when two writes share a clock.
    static func text(of value: ChangeValue) -> String {
        switch value {
        case .null: "null"
        case .object(let uri): uri
        case .attribute(let attribute): AttributeJSON.encode(attribute).text
        }
    }
}
