import Foundation
import Testing
import GRDB
import FerryModel
import FerryStore
@testable import FerrySQLite
import FerryTestSupport

/// The origin URI ↔ row map: runs for consecutive URIs on consecutive rows,
/// single entries for the rest, single entries first, nothing mapped twice.
@Suite("Identity map: runs and single entries")
struct IdentityMapTests {
    static let model = try! SampleModels.load("OrgChart")
    static let origin = "x-coredata://6F1C2A3B-0000-4000-8000-00000000000A/Person/p"
    static let other = "x-coredata://6F1C2A3B-0000-4000-8000-00000000000B/Person/p"

    /// Runs `body` in a write transaction of a fresh store, rolled back afterwards.
    func withMap(_ body: (IdentityMap, Database) throws -> Void) throws {
        let directory = TemporaryDirectory()
        let store = try SQLiteStore(path: directory.file("map.sqlite"), model: Self.model)
        try store.write { db in try body(IdentityMap(db: db), db) }
    }

    func count(_ table: String, _ db: Database) throws -> Int {
        try Int.fetchOne(db, sql: "SELECT count(*) FROM \(table)") ?? -1
    }

    @Test("Consecutive URIs on consecutive rows are one run; a break in either starts another")
    func runs() throws {
        try withMap { map, db in
            #expect(try map.isEmpty())
            var rows = (1...1000).map { (uri: Self.origin + String($0), root: 2, key: Int64(500 + $0)) }
            rows.append((Self.origin + "2000", 2, 1501))     // the URI jumps: a new run
            rows.append((Self.origin + "2001", 2, 1503))     // the row jumps: a new run
            rows.append((Self.other + "1002", 2, 1504))      // another origin: a new run
            rows.append((Self.other + "1003", 1, 1505))      // another root: a new run
            try map.map(rows)
            #expect(try count("Z_FERRY_RANGE", db) == 5)
            #expect(try count("Z_FERRY_OBJECT", db) == 0)
            #expect(try !map.isEmpty())

            for row in rows {
                #expect(try map.row(of: row.uri) == IdentityMap.Row(root: row.root, key: row.key), "\(row.uri)")
                #expect(try map.uri(of: IdentityMap.Row(root: row.root, key: row.key)) == row.uri)
            }
            let asked = rows.map(\.uri) + [Self.origin + "1001", Self.origin + "0", Self.origin + "1999", Self.origin + "2002",
                                           Self.other + "1001", Self.other + "1004", "x-coredata://6F1C2A3B-0000-4000-8000-00000000000A/Organization/p5"]
            let found = try map.rows(of: asked)
            #expect(found.count == rows.count, "only the mapped ones: \(Set(found.keys).subtracting(rows.map(\.uri)).sorted())")
            for row in rows { #expect(found[row.uri] == IdentityMap.Row(root: row.root, key: row.key)) }
            #expect(try map.uri(of: IdentityMap.Row(root: 2, key: 500)) == nil, "just before the first run")
            #expect(try map.uri(of: IdentityMap.Row(root: 2, key: 1502)) == nil, "in the gap between two runs")
            #expect(try map.uri(of: IdentityMap.Row(root: 1, key: 1504)) == nil, "another root")
            #expect(try Set(map.all().map(\.uri)) == Set(rows.map(\.uri)))
        }
    }

    @Test("A run that goes on where another ended, on the rows after it, grows that run; any break starts another")
    func runsGrow() throws {
        try withMap { map, db in
            try map.map((1...5).map { (Self.origin + String($0), 2, Int64(100 + $0)) })
            try map.map([(Self.origin + "6", 2, 106)])                          // next URI, next row: grows
            try map.map([(Self.origin + "7", 2, 107), (Self.origin + "8", 2, 108)])
            #expect(try GRDB.Row.fetchAll(db, sql: "SELECT Z_FIRST, Z_COUNT, Z_PK FROM Z_FERRY_RANGE").map { [$0[0], $0[1], $0[2]] as [Int64] }
                    == [[1, 8, 101]])
            try map.map([(Self.origin + "9", 2, 110)])                          // the row jumps
            try map.map([(Self.origin + "11", 2, 111)])                         // the URI jumps
            try map.map([(Self.origin + "12", 1, 112)])                         // another root
            try map.map([(Self.other + "13", 2, 113)])                          // another origin
            #expect(try count("Z_FERRY_RANGE", db) == 5)
            let expected = (1...8).map { (Self.origin + String($0), IdentityMap.Row(root: 2, key: Int64(100 + $0))) }
                + [(Self.origin + "9", .init(root: 2, key: 110)), (Self.origin + "11", .init(root: 2, key: 111)),
                   (Self.origin + "12", .init(root: 1, key: 112)), (Self.other + "13", .init(root: 2, key: 113))]
            for (uri, row) in expected {
                #expect(try map.row(of: uri) == row, "\(uri)")
                #expect(try map.uri(of: row) == uri)
            }
            #expect(try map.row(of: Self.origin + "10") == nil)
            #expect(try map.uri(of: .init(root: 2, key: 109)) == nil)
            // A grown run splits like any other when one of its URIs goes.
            try map.unmap([Self.origin + "6"])
            #expect(try map.row(of: Self.origin + "6") == nil)
            #expect(try map.row(of: Self.origin + "5") == .init(root: 2, key: 105))
            #expect(try map.row(of: Self.origin + "7") == .init(root: 2, key: 107))
            #expect(throws: DatabaseError.self, "inside the grown run") { try map.map([(Self.origin + "8", 2, 200)]) }
        }
    }

    @Test("URIs whose number is not in its shortest form are single entries, apart from the same number written plainly")
    func singles() throws {
        try withMap { map, db in
            try map.map([(Self.origin + "007", 2, 10), (Self.origin + "7", 2, 11), (Self.origin + "8", 2, 12),
                         ("x-coredata://6F1C2A3B-0000-4000-8000-00000000000A/Person/p1234567890123456789", 2, 13)])
            #expect(try count("Z_FERRY_OBJECT", db) == 2, "p007 and the 19-digit number")
            #expect(try count("Z_FERRY_RANGE", db) == 1, "p7 and p8")
            #expect(try map.rows(of: [Self.origin + "007", Self.origin + "7", Self.origin + "8"])
                    == [Self.origin + "007": .init(root: 2, key: 10), Self.origin + "7": .init(root: 2, key: 11), Self.origin + "8": .init(root: 2, key: 12)])
            #expect(try map.uri(of: .init(root: 2, key: 10)) == Self.origin + "007")
            #expect(try map.uri(of: .init(root: 2, key: 13)) == "x-coredata://6F1C2A3B-0000-4000-8000-00000000000A/Person/p1234567890123456789")
            #expect(IdentityMap.NumberedURI(Self.origin + "12")?.number == 12)
            for odd in [Self.origin + "0", Self.origin + "", Self.origin + "1a", "x-coredata://X/Person/q1", "no-slash"] {
                #expect(IdentityMap.NumberedURI(odd) == nil, "\(odd)")
            }
        }
    }

    @Test("An object brought back on a new row keeps its URI: the single entry wins over the run, both ways")
    func broughtBack() throws {
        try withMap { map, _ in
            try map.map((1...10).map { (Self.origin + String($0), 2, Int64(100 + $0)) })
            try map.map(uri: Self.origin + "4", root: 2, key: 200, replacing: true)
            #expect(try map.row(of: Self.origin + "4") == .init(root: 2, key: 200))
            #expect(try map.rows(of: [Self.origin + "4", Self.origin + "5"])
                    == [Self.origin + "4": .init(root: 2, key: 200), Self.origin + "5": .init(root: 2, key: 105)])
            #expect(try map.uri(of: .init(root: 2, key: 200)) == Self.origin + "4")
            let all = try map.all()
            #expect(all.count == 10)
            #expect(all.first { $0.uri == Self.origin + "4" }?.row == .init(root: 2, key: 200))
        }
    }

    @Test("Mapping a URI twice fails, whether it falls inside a run, overlaps one, or has a single entry")
    func mappedTwice() throws {
        let attempts: [(String, [(uri: String, root: Int, key: Int64)])] = [
            ("inside a run", [(Self.origin + "15", 2, 900)]),
            ("overlapping a run's start", (5...10).map { (Self.origin + String($0), 2, Int64(900 + $0)) }),
            ("overlapping a run's end", (19...25).map { (Self.origin + String($0), 2, Int64(900 + $0)) }),
            ("covering a run", (1...30).map { (Self.origin + String($0), 2, Int64(900 + $0)) }),
            ("a single entry", [(Self.origin + "0042", 2, 900)]),
            ("a single entry of an older store inside a new run", (40...45).map { (Self.origin + String($0), 2, Int64(900 + $0)) }),
        ]
        for (label, rows) in attempts {
            try withMap { map, db in
                try map.map((10...20).map { (Self.origin + String($0), 2, Int64(100 + $0)) })
                try map.map([(Self.origin + "0042", 2, 300)])
                // As a store made before runs existed keeps them: one single entry per object.
                try db.execute(sql: "INSERT INTO Z_FERRY_OBJECT (Z_URI, Z_ROOT, Z_PK) VALUES (?, 2, 301)", arguments: [Self.origin + "43"])
                #expect(throws: DatabaseError.self, "\(label)") { try map.map(rows) }
            }
        }
        try withMap { map, db in
            try map.map((10...20).map { (Self.origin + String($0), 2, Int64(100 + $0)) })
            try map.map((21...30).map { (Self.origin + String($0), 2, Int64(200 + $0)) })
            try map.map((1...9).map { (Self.origin + String($0), 2, Int64(300 + $0)) })
            #expect(try count("Z_FERRY_RANGE", db) == 3, "runs next to each other are fine")
        }
    }
}
