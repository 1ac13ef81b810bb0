import Foundation
import GRDB

/// The map between origin URIs of objects born elsewhere and this store's rows,
/// read and written inside the caller's transaction.
///
/// It is kept in two tables:
///
/// - `Z_FERRY_RANGE`: runs. A replayed change set inserts its objects in the
///   order its origin numbered them, and this store gives them consecutive
///   primary keys, so `…/Person/p1001` … `…/Person/p2000` arriving as rows
///   5001 … 6000 is one row: prefix `x-coredata://<UUID>/Person/p`, first number
///   1001, count 1000, root entity, first key 5001. A run grows when the next
///   change set goes on where it ended (a peer's one-object saves replayed one
///   by one). That is what most of the map is, and it costs one row per run
///   instead of one per object.
/// - `Z_FERRY_OBJECT`: single URIs — those not written `p<N>` with `N` in its
///   shortest form (so the number alone cannot give the text back), objects
///   brought back after a delete (they move to a new row, and this entry wins
///   over the run that still names the old one), and every entry of stores made
///   before runs existed. It is consulted first.
///
/// A URI is mapped at most once (inserting one twice fails the save). A deleted
/// object's entry stays while its tombstone does (its row is gone, not reused:
/// primary keys only grow, so the entry is harmless), and goes with the tombstone
/// at the horizon (``unmap(_:)``), so that the map stays as bounded as the history.
struct IdentityMap {
    let db: Database

    /// A local row: the root entity's number (`Z_ENT` of the hierarchy's table) and the primary key.
    struct Row: Hashable {
        var root: Int
        var key: Int64
    }

    /// An origin URI cut before its number: `x-coredata://<UUID>/Entity/p` (its first
    /// `prefixLength` UTF-8 bytes) and `N`. The prefix is not made a string here: runs
    /// and lookups make one per run or group, not per URI.
    struct NumberedURI {
        let prefixLength: Int
        let number: Int64

        /// Cuts `uri` when its last part is `p<N>` with `N` in its shortest form
        /// (no leading zero, at most 18 digits); nil otherwise.
        init?(_ uri: String) {
            var contiguous = uri
            guard let (prefixLength, number) = contiguous.withUTF8(Self.cut) else { return nil }
            self.prefixLength = prefixLength
            self.number = number
        }

        /// The prefix's length (up to and with the `p`) and the number, read from the raw bytes
        /// (a `String.UTF8View` walked by index cost more than the rest of a lookup).
        private static func cut(_ bytes: UnsafeBufferPointer<UInt8>) -> (prefixLength: Int, number: Int64)? {
            var slash = bytes.count - 1
            while slash >= 0, bytes[slash] != UInt8(ascii: "/") { slash -= 1 }
            let digits = slash + 2
            guard slash >= 0, digits < bytes.count, bytes[slash + 1] == UInt8(ascii: "p"),
                  bytes[digits] != UInt8(ascii: "0"), bytes.count - digits <= 18 else { return nil }
            var number: Int64 = 0
            for index in digits..<bytes.count {
                let byte = bytes[index]
                guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
                number = number * 10 + Int64(byte - UInt8(ascii: "0"))
            }
            return (digits, number)
        }

        /// Whether `uri` (which this was cut from) has `prefix`.
        func has(_ prefix: String, in uri: String) -> Bool {
            prefix.utf8.count == prefixLength && IdentityMap.hasPrefix(uri, prefix)
        }

        /// The prefix of `uri` (which this was cut from), as a string.
        func prefix(of uri: String) -> String {
            String(decoding: uri.utf8.prefix(prefixLength), as: UTF8.self)
        }
    }

    // MARK: - Writing

    /// Maps origin URIs to new local rows (none of them mapped yet), in the
    /// order given: consecutive URIs on consecutive rows become one run.
    /// - Throws: when one of them is mapped already (a URI inserted twice).
    func map(_ rows: [(uri: String, root: Int, key: Int64)]) throws {
        var singles: [(uri: String, root: Int, key: Int64)] = []
        var run: (prefix: String, first: Int64, count: Int64, root: Int, key: Int64)?
        for row in rows {
            guard let numbered = NumberedURI(row.uri) else {
                singles.append(row)
                continue
            }
            if let current = run, current.root == row.root, numbered.number == current.first + current.count,
               row.key == current.key + current.count, numbered.has(current.prefix, in: row.uri) {
                run?.count += 1
                continue
            }
            if let finished = run { try insertRun(finished) }
            run = (numbered.prefix(of: row.uri), numbered.number, 1, row.root, row.key)
        }
        if let finished = run { try insertRun(finished) }
        guard !singles.isEmpty else { return }
        var argument = JSONArgument(capacity: singles.count * 80)
        for row in singles {
            argument.separate()
            argument.appendRaw("[")
            argument.appendString(row.uri)
            argument.appendRaw(",\(row.root),\(row.key)]")
        }
        try db.cachedStatement(sql: """
            INSERT INTO Z_FERRY_OBJECT (Z_URI, Z_ROOT, Z_PK)
            SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]'), json_extract(value, '$[2]') FROM json_each(?)
            """).execute(arguments: [argument.json])
    }

    /// Forgets the entries of `uris` — objects deleted long ago, whose tombstones the horizon
    /// forgets (docs/SYNC.md, "Bounded history"): a single entry goes, a run loses the URI (it
    /// goes, shrinks from either end, or splits in two around it).
    func unmap(_ uris: [String]) throws {
        for uri in uris {
            try db.cachedStatement(sql: "DELETE FROM Z_FERRY_OBJECT WHERE Z_URI = ?").execute(arguments: [uri])
            guard let numbered = NumberedURI(uri) else { continue }
            let prefix = numbered.prefix(of: uri)
            let number = numbered.number
            guard let run = try ranges(prefix: prefix, around: number, limit: 1).first,
                  run.first <= number, number < run.first + run.count else { continue }
            try db.cachedStatement(sql: "DELETE FROM Z_FERRY_RANGE WHERE Z_PREFIX = ? AND Z_FIRST = ?").execute(arguments: [prefix, run.first])
            let before = number - run.first
            if before > 0 { try writeRun(prefix: prefix, first: run.first, count: before, root: run.root, key: run.key) }
            let after = run.first + run.count - number - 1
            if after > 0 { try writeRun(prefix: prefix, first: number + 1, count: after, root: run.root, key: run.key + before + 1) }
        }
    }

    /// Maps one URI to a new row; `replacing` lets an object brought back after
    /// a delete take over its URI (the single entry wins over any run).
    func map(uri: String, root: Int, key: Int64, replacing: Bool) throws {
        let sql = replacing
            ? "INSERT OR REPLACE INTO Z_FERRY_OBJECT (Z_URI, Z_ROOT, Z_PK) VALUES (?, ?, ?)"
            : "INSERT INTO Z_FERRY_OBJECT (Z_URI, Z_ROOT, Z_PK) VALUES (?, ?, ?)"
        try db.cachedStatement(sql: sql).execute(arguments: [uri, root, key])
    }

    private func insertRun(_ run: (prefix: String, first: Int64, count: Int64, root: Int, key: Int64)) throws {
        // The primary key only stops a run starting at the same number; a run overlapping another must fail too.
        let last = run.first + run.count - 1
        let nearby = try ranges(prefix: run.prefix, around: run.first, limit: 2)
        if let overlap = nearby.first(where: { $0.first <= last && $0.first + $0.count > run.first }) {
            throw DatabaseError(resultCode: .SQLITE_CONSTRAINT, message:
                "the identity map already has \(run.prefix)\(max(run.first, overlap.first)): the object was inserted twice")
        }
        let mapped = try mappedSingly(prefix: run.prefix, numbers: run.first...last)
        if let uri = mapped.first {
            throw DatabaseError(resultCode: .SQLITE_CONSTRAINT, message: "the identity map already has \(uri): the object was inserted twice")
        }
        // The run that ends just before, on the rows just before, grows instead: a peer's
        // one-object saves replayed one by one stay one run, and growing it rewrites one page
        // (its count) where a new run would write two (the run and its row index).
        if let before = nearby.first(where: { $0.first + $0.count == run.first && $0.root == run.root && $0.key + $0.count == run.key }) {
            try db.cachedStatement(sql: "UPDATE Z_FERRY_RANGE SET Z_COUNT = ? WHERE Z_PREFIX = ? AND Z_FIRST = ?")
                .execute(arguments: [before.count + run.count, run.prefix, before.first])
            return
        }
        try writeRun(prefix: run.prefix, first: run.first, count: run.count, root: run.root, key: run.key)
    }

    /// Writes one run as it is (the callers have checked it overlaps nothing).
    private func writeRun(prefix: String, first: Int64, count: Int64, root: Int, key: Int64) throws {
        try db.cachedStatement(sql: "INSERT INTO Z_FERRY_RANGE (Z_PREFIX, Z_FIRST, Z_COUNT, Z_ROOT, Z_PK) VALUES (?, ?, ?, ?, ?)")
            .execute(arguments: [prefix, first, count, root, key])
    }

    /// Maps every row of `table` (the hierarchy of root entity `root`) that has no entry yet to
    /// `prefix(Z_ENT)` + its primary key, as runs of consecutive rows of one entity: how a store
    /// installing a snapshot names the rows its source inserted by the source's URIs.
    /// - Returns: how many rows were mapped.
    func mapUnmappedRows(of table: String, root: Int, prefix: (Int) -> String?) throws -> Int {
        let rows = try GRDB.Row.fetchCursor(db, sql: """
            SELECT t.Z_PK, t.Z_ENT FROM \(table) t
            WHERE NOT EXISTS (SELECT 1 FROM Z_FERRY_OBJECT o WHERE o.Z_ROOT = ?1 AND o.Z_PK = t.Z_PK)
              AND NOT EXISTS (SELECT 1 FROM Z_FERRY_RANGE r
                              WHERE r.Z_ROOT = ?1 AND r.Z_PK = (SELECT MAX(Z_PK) FROM Z_FERRY_RANGE WHERE Z_ROOT = ?1 AND Z_PK <= t.Z_PK)
                                AND t.Z_PK < r.Z_PK + r.Z_COUNT)
            ORDER BY t.Z_PK
            """, arguments: [root])
        var mapped = 0
        var run: (entity: Int, first: Int64, count: Int64)?
        func flush() throws {
            guard let finished = run, let prefix = prefix(finished.entity) else { return }
            try writeRun(prefix: prefix, first: finished.first, count: finished.count, root: root, key: finished.first)
        }
        while let row = try rows.next() {
            let key: Int64 = row[0]
            let entity: Int = row[1]
            mapped += 1
            if let current = run, current.entity == entity, current.first + current.count == key {
                run?.count += 1
                continue
            }
            try flush()
            run = (entity, key, 1)
        }
        try flush()
        return mapped
    }

    /// Those of the URIs `prefix` + `numbers` that have a single entry (only stores
    /// made before runs existed have them for such URIs; checked only when any single entry exists).
    private func mappedSingly(prefix: String, numbers: ClosedRange<Int64>) throws -> [String] {
        guard try hasSingles() else { return [] }
        let argument = JSONArgument(strings: numbers.lazy.map { prefix + String($0) }, capacity: numbers.count * (prefix.utf8.count + 12))
        return try String.fetchAll(db.cachedStatement(sql: "SELECT o.Z_URI FROM json_each(?) AS j JOIN Z_FERRY_OBJECT AS o ON o.Z_URI = j.value"),
                                   arguments: [argument.json])
    }

    private func hasSingles() throws -> Bool {
        try Bool.fetchOne(db.cachedStatement(sql: "SELECT EXISTS (SELECT 1 FROM Z_FERRY_OBJECT)")) ?? false
    }

    // MARK: - Reading

    /// Whether anything is mapped (while nothing is, every object has its own URI).
    func isEmpty() throws -> Bool {
        try !(Bool.fetchOne(db.cachedStatement(sql: "SELECT EXISTS (SELECT 1 FROM Z_FERRY_OBJECT) OR EXISTS (SELECT 1 FROM Z_FERRY_RANGE)")) ?? false)
    }

    /// The local row of one origin URI, if mapped.
    func row(of uri: String) throws -> Row? {
        try rows(of: [uri])[uri]
    }

    /// The local rows of those of `uris` that are mapped, in a few index probes:
    /// one join for single entries, and per URI prefix one probe per run or gap
    /// the (sorted) numbers fall in.
    func rows<URIs: Collection<String>>(of uris: URIs) throws -> [String: Row] {
        var found: [String: Row] = [:]
        guard !uris.isEmpty else { return found }
        if try hasSingles() {
            let argument = JSONArgument(strings: uris, capacity: uris.count * 64)
            let statement = try db.cachedStatement(sql: "SELECT o.Z_URI, o.Z_ROOT, o.Z_PK FROM json_each(?) AS j JOIN Z_FERRY_OBJECT AS o ON o.Z_URI = j.value")
            for row in try GRDB.Row.fetchAll(statement, arguments: [argument.json]) {
                found[row[0]] = Row(root: row[1], key: row[2])
            }
        }
        // Grouped by prefix; URIs of one prefix usually come together, so the group is looked up only when it changes.
        var numbersByPrefix: [String: [Int64]] = [:]
        var current: (prefix: String, numbers: [Int64])?
        for uri in uris where found.isEmpty || found[uri] == nil {
            guard let numbered = NumberedURI(uri) else { continue }
            if let group = current, numbered.has(group.prefix, in: uri) {
                current?.numbers.append(numbered.number)
                continue
            }
            if let group = current { numbersByPrefix[group.prefix, default: []] += group.numbers }
            current = (numbered.prefix(of: uri), [numbered.number])
        }
        if let group = current { numbersByPrefix[group.prefix, default: []] += group.numbers }
        for (prefix, unsorted) in numbersByPrefix {
            let numbers = unsorted.sorted()
            var index = 0
            while index < numbers.count {
                let probe = numbers[index]
                let nearby = try ranges(prefix: prefix, around: probe, limit: 2)
                // The run holding `probe` (or the last one before it), then the next one.
                var next = Int64.max
                for range in nearby where range.first > probe { next = min(next, range.first) }
                if let holding = nearby.first(where: { $0.first <= probe && probe < $0.first + $0.count }) {
                    while index < numbers.count, numbers[index] < holding.first + holding.count {
                        let number = numbers[index]
                        found[prefix + String(number)] = Row(root: holding.root, key: holding.key + (number - holding.first))
                        index += 1
                    }
                } else {
                    while index < numbers.count, numbers[index] < next { index += 1 }  // in the gap: not mapped
                }
            }
        }
        return found
    }

    /// Whether `text` starts with `prefix`, byte for byte.
    static func hasPrefix(_ text: String, _ prefix: String) -> Bool {
        var text = text
        var prefix = prefix
        return text.withUTF8 { textBytes in
            prefix.withUTF8 { prefixBytes in
                guard textBytes.count >= prefixBytes.count else { return false }
                guard let textStart = textBytes.baseAddress, let prefixStart = prefixBytes.baseAddress else { return prefixBytes.isEmpty }
                return memcmp(textStart, prefixStart, prefixBytes.count) == 0
            }
        }
    }

    /// The origin URI of a local row, if it is mapped.
    func uri(of row: Row) throws -> String? {
        // (One index probe: no point asking first whether any single entry exists.)
        if let single = try String.fetchOne(db.cachedStatement(sql: "SELECT Z_URI FROM Z_FERRY_OBJECT WHERE Z_ROOT = ? AND Z_PK = ?"),
                                            arguments: [row.root, row.key]) {
            return single
        }
        let statement = try db.cachedStatement(sql: """
            SELECT Z_PREFIX, Z_FIRST, Z_COUNT, Z_PK FROM Z_FERRY_RANGE WHERE Z_ROOT = ? AND Z_PK <= ? ORDER BY Z_PK DESC LIMIT 1
            """)
        guard let range = try GRDB.Row.fetchOne(statement, arguments: [row.root, row.key]) else { return nil }
        let first: Int64 = range[1]
        let count: Int64 = range[2]
        let key: Int64 = range[3]
        guard row.key < key + count else { return nil }
        let prefix: String = range[0]
        return prefix + String(first + (row.key - key))
    }

    /// Every mapping (for a dump): single entries, and every URI of every run.
    func all() throws -> [(uri: String, row: Row)] {
        var result: [(uri: String, row: Row)] = []
        var single = Set<String>()
        for row in try GRDB.Row.fetchAll(db, sql: "SELECT Z_URI, Z_ROOT, Z_PK FROM Z_FERRY_OBJECT") {
            let uri: String = row[0]
            single.insert(uri)
            result.append((uri, Row(root: row[1], key: row[2])))
        }
        for range in try GRDB.Row.fetchAll(db, sql: "SELECT Z_PREFIX, Z_FIRST, Z_COUNT, Z_ROOT, Z_PK FROM Z_FERRY_RANGE") {
            let prefix: String = range[0]
            let first: Int64 = range[1]
            let count: Int64 = range[2]
            let root: Int = range[3]
            let key: Int64 = range[4]
            for offset in 0..<count {
                let uri = prefix + String(first + offset)
                // A single entry wins: the object was brought back on another row.
                if single.contains(uri) { continue }
                result.append((uri, Row(root: root, key: key + offset)))
            }
        }
        return result
    }

    /// The run holding `number` or the last one before it, and the next `limit - 1` runs after.
    private func ranges(prefix: String, around number: Int64, limit: Int) throws
        -> [(first: Int64, count: Int64, root: Int, key: Int64)] {
        let statement = try db.cachedStatement(sql: """
            SELECT Z_FIRST, Z_COUNT, Z_ROOT, Z_PK FROM Z_FERRY_RANGE
            WHERE Z_PREFIX = ?1 AND Z_FIRST >= coalesce(
                (SELECT Z_FIRST FROM Z_FERRY_RANGE WHERE Z_PREFIX = ?1 AND Z_FIRST <= ?2 ORDER BY Z_FIRST DESC LIMIT 1), ?2)
            ORDER BY Z_FIRST LIMIT ?3
            """)
        return try GRDB.Row.fetchAll(statement, arguments: [prefix, number, limit]).map { ($0[0], $0[1], $0[2], $0[3]) }
    }
}
