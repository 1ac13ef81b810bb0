import Foundation
import GRDB
import Testing
import FerryModel
import FerryStore
import FerrySQLite
import FerrySync
import FerryTestSupport

/// Which pages a one-object save and its replay write: every page is a WAL frame written and
/// synced before the commit is durable, so a page rewritten for nothing is paid on every save
/// (W4, docs/PERFORMANCE.md).
@Suite("Pages a one-object save and its replay write")
struct PagesWrittenTests {
    static let model = try! SampleModels.load("OrgChart")

    /// The pages the last commit appended to `path`'s log, named by the table or index whose
    /// root they are (every table of these small stores fits in its root page).
    static func lastCommitPages(of path: String) throws -> [String] {
        let log = try Data(contentsOf: URL(fileURLWithPath: path + "-wal"))
        let pageSize = log.bigEndianUInt32(at: 8)
        var offset = 32
        var commits: [[Int]] = [[]]
        while offset + 24 + pageSize <= log.count {
            commits[commits.count - 1].append(log.bigEndianUInt32(at: offset))
            if log.bigEndianUInt32(at: offset + 4) != 0 { commits.append([]) }  // the database's size after a commit frame
            offset += 24 + pageSize
        }
        let last = try #require(commits.dropLast().last, "no commit in \(path)-wal")
        let names = try DatabaseQueue(path: path, configuration: { var c = Configuration(); c.readonly = true; return c }()).read { db in
            Dictionary(try Row.fetchAll(db, sql: "SELECT rootpage, name FROM sqlite_master WHERE rootpage > 0").map { ($0[0] as Int, $0[1] as String) },
                       uniquingKeysWith: { first, _ in first })
        }
        return last.map { names[$0] ?? "page \($0)" }.sorted()
    }

    @Test("A one-object save rewrites the clock's row in place, not its key's index")
    func localSave() throws {
        let a = try Replica(model: Self.model)
        let path = try #require((a.store as? SQLiteStore)?.path)
        for index in 1...3 {
            try a.context.make("Person", ["id": Int64(index), "name": "person \(index)"])
            try a.context.save()
        }
        let pages = try Self.lastCommitPages(of: path)
        #expect(pages.contains("Z_FERRY_STATE"), "the clock moved: \(pages)")
        #expect(!pages.contains("sqlite_autoindex_Z_FERRY_STATE_1"), "the clock's key did not change: \(pages)")
        #expect(pages.count == 8, "the object's row and its two indexes, the entity's key counter, the change set and its key, the clock, the vector: \(pages)")
    }

    @Test("Replaying a peer's one-object saves one by one grows one run of the identity map")
    func replayedSaves() throws {
        let a = try Replica(model: Self.model)
        let b = try Replica(model: Self.model)
        let path = try #require((b.store as? SQLiteStore)?.path)
        var people: [ManagedObject] = []
        for index in 1...3 {
            people.append(try a.context.make("Person", ["id": Int64(index), "name": "person \(index)"]))
            try a.context.save()
            #expect(try b.pull(from: a).applied == 1)
        }
        let pages = try Self.lastCommitPages(of: path)
        #expect(pages.contains("Z_FERRY_RANGE"), "the run grew: \(pages)")
        #expect(!pages.contains("Z_FERRY_RANGE_ROW"), "no new run, so nothing new in its row index: \(pages)")
        #expect(!pages.contains("sqlite_autoindex_Z_FERRY_STATE_1"), "the clock's key did not change: \(pages)")
        #expect(pages.count == 9, "the local save's eight pages and the identity map's run: \(pages)")
        let runs = try DatabaseQueue(path: path).read { db in
            try Row.fetchAll(db, sql: "SELECT Z_FIRST, Z_COUNT FROM Z_FERRY_RANGE").map { [$0[0] as Int64, $0[1] as Int64] }
        }
        #expect(runs == [[1, 3]], "three change sets, one run")
        for person in people {
            #expect(try b.object(person.objectID.uriString)?.value(forKey: "name") as? String == person.value(forKey: "name") as? String)
        }
    }
}

private extension Data {
    func bigEndianUInt32(at offset: Int) -> Int {
        self[startIndex + offset ..< startIndex + offset + 4].reduce(0) { $0 << 8 | Int($1) }
    }
}
