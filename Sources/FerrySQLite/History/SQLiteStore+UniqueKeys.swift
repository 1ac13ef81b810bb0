import Foundation
import GRDB
import FerryModel
import FerryStore

extension SQLiteStore {
    /// Whether a row (of the constraint's entity or a subentity) holds any of these values of
    /// `constraint`: one statement, the keys passed as one JSON array (so the statement is
    /// prepared once, and the column's index is probed once per key).
    public func holdsAny(of keys: [[AttributeValue]], for constraint: UniquenessConstraint) throws -> Bool {
        guard !keys.isEmpty else { return false }
        guard let entity = model.entity(named: constraint.entityName), let table = layout.table(of: entity) else { return false }
        let columns = constraint.properties.compactMap { layout.column(of: $0, in: entity) }
        guard let json = Self.jsonKeys(keys, flat: columns.count == 1), columns.count == constraint.properties.count else {
            return try UniqueKeyQuery.holdsAny(in: self, keys: keys, constraint: constraint)
        }
        let family = layout.entityFilter(for: entity, includesSubentities: true, alias: "t").map { " AND \($0)" } ?? ""
        // CROSS JOIN keeps the keys as the outer loop: one probe of the column's index per key.
        // (One column: a flat array, each key its own value.)
        let sql = "SELECT 1 FROM json_each(?) k CROSS JOIN \(table) t ON "
            + (columns.count == 1 ? "t.\(columns[0]) = k.value"
                : columns.enumerated().map { "t.\($1) = json_extract(k.value, '$[\($0)]')" }.joined(separator: " AND "))
            + "\(family) LIMIT 1"
        return try read { db in try Bool.fetchOne(db.cachedStatement(sql: sql), arguments: [json]) ?? false }
    }

    /// The keys as a JSON array of arrays of values as the columns store them (`flat`: of the
    /// values, for one column); nil when one
    /// cannot be written so (binary data, UUIDs): those are checked with fetch requests.
    static func jsonKeys(_ keys: [[AttributeValue]], flat: Bool) -> String? {
        var text = "["
        text.reserveCapacity(keys.count * 12)
        for (number, key) in keys.enumerated() {
            if number > 0 { text += "," }
            if !flat { text += "[" }
            for (position, value) in key.enumerated() {
                if position > 0 { text += "," }
                switch ValueCodec.databaseValue(value).storage {
                case .int64(let integer): text += String(integer)
                case .double(let double) where double.isFinite: text += "\(double)"
                case .string(let string): JSONValue.appendQuoted(string, to: &text)
                default: return nil
                }
            }
            if !flat { text += "]" }
        }
        return text + "]"
    }
}
