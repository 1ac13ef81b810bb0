import Foundation
import Testing
import GRDB
import FerryModel
import FerryStore
@testable import FerrySQLite
import FerryTestSupport

/// Fetches compile to one statement whose plan uses the indexes: equality on an
/// indexed attribute, comparisons with foreign keys, and the correlated
/// subqueries of to-many predicates.
@Suite("Query plans use the indexes")
struct QueryPlanTests {
    static let model = try! SampleModels.load("OrgChart")

    func plan(_ format: String, _ arguments: [Any?] = [], in store: SQLiteStore) throws -> String {
        let request = try FerryStore.FetchRequest(entityName: "Person", format: format, arguments: arguments, model: Self.model)
        let query = try SQLQuery.select("t0.Z_PK", for: request, layout: store.layout)
        #expect(!query.sql.contains("'"), "values are bound, never spliced into the SQL: \(query.sql)")
        return try store.read { db in
            try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN " + query.sql, arguments: query.arguments)
                .map { $0["detail"] as String? ?? "" }.joined(separator: "\n")
        }
    }

    @Test("Indexed equality, foreign keys and to-many subqueries search by index")
    func indexes() throws {
        let directory = TemporaryDirectory()
        let store = try SQLiteStore(path: directory.file("plan.sqlite"), model: Self.model)
        let container = try PersistentContainer(store: store)
        let context = container.newContext()
        let boss = try context.make("Person", ["id": Int64(1), "name": "Boss"])
        for id in 2...50 { try context.make("Person", ["id": Int64(id), "name": "P\(id)", "manager": boss]) }
        try context.save()

        #expect(try plan("id == 7", in: store).contains("INDEX ZPERSON_ZID_INDEX (ZID=?)"))
        #expect(try plan("manager == %@", [boss], in: store).contains("INDEX ZPERSON_ZMANAGER_INDEX (ZMANAGER=?)"))
        let any = try plan("ANY employees.name == 'P7'", in: store)
        #expect(any.contains("CORRELATED SCALAR SUBQUERY") || any.contains("CORRELATED"), "\(any)")
        #expect(any.contains("INDEX ZPERSON_ZMANAGER_INDEX (ZMANAGER=?)"), "\(any)")
        #expect(try plan("employees.@count > 2", in: store).contains("INDEX ZPERSON_ZMANAGER_INDEX (ZMANAGER=?)"))
        #expect(try plan("manager.id == 1", in: store).contains("USING INTEGER PRIMARY KEY (rowid=?)"), "the to-one hop joins by primary key")
        #expect(try plan("name BEGINSWITH[c] 'p1'", in: store).contains("SCAN"), "unindexed attributes scan, as with hand-written SQL")
    }
}
