import Foundation
import FerryStore
import FerryTestSupport

/// The fixed data set of the predicate table: a few objects of every entity of
/// the three sample models, each known by a label (`p1`, `o2`, `d3`, …).
///
/// The expected results in ``PredicateTable`` were worked out by hand from the
/// comments below, not by running Ferry.
enum PredicateTableData {
    static let u1 = UUID(uuidString: "11111111-1111-1111-1111-111111111111") ?? UUID()
    static let u2 = UUID(uuidString: "22222222-2222-2222-2222-222222222222") ?? UUID()

    /// A UTC midnight date, `yyyy-mm-dd`.
    static func day(_ text: String) -> Date {
        ISO8601DateFormatter().date(from: text + "T00:00:00Z") ?? .distantPast
    }

    /// Inserts the data set of `model` into `context` (unsaved) and returns the objects by label.
    static func insert(_ model: String, into context: ManagedObjectContext) throws -> [String: ManagedObject] {
        switch model {
        case "OrgChart": return try orgChart(context)
        case "Orders": return try orders(context)
        default: return try company(context)
        }
    }

    /// People (id, name, manager) and organisations (id, name, leader):
    ///
    ///     p1 1 "Alice"   —          employees p2 p3 p9
    ///     p2 2 "Bob"     p1         employees p4 p5
    ///     p3 3 "Carol"   p1         employees p6
    ///     p4 4 "dave"    p2         employees p8
    ///     p5 5 "Émile"   p2
    ///     p6 6 "Zoë"     p3
    ///     p7 0 nil       —
    ///     p8 8 "alice"   p4
    ///     p9 9 "O'Brien" p1
    ///
    ///     o1 10 "Acme"    leader p1
    ///     o2 20 "Globex"  leader p2
    ///     o3 30 "Initech" no leader
    ///     o4 0  nil       leader p5
    private static func orgChart(_ context: ManagedObjectContext) throws -> [String: ManagedObject] {
        var objects: [String: ManagedObject] = [:]
        let people: [(String, Int64, String?, String?)] = [
            ("p1", 1, "Alice", nil), ("p2", 2, "Bob", "p1"), ("p3", 3, "Carol", "p1"), ("p4", 4, "dave", "p2"),
            ("p5", 5, "Émile", "p2"), ("p6", 6, "Zoë", "p3"), ("p7", 0, nil, nil), ("p8", 8, "alice", "p4"), ("p9", 9, "O'Brien", "p1"),
        ]
        for (label, id, name, manager) in people {
            let person = try context.make("Person", ["id": id])
            try person.setValue(name, forKey: "name")
            if let manager { try person.setValue(objects[manager], forKey: "manager") }
            objects[label] = person
        }
        let organizations: [(String, Int16, String?, String?)] = [
            ("o1", 10, "Acme", "p1"), ("o2", 20, "Globex", "p2"), ("o3", 30, "Initech", nil), ("o4", 0, nil, "p5"),
        ]
        for (label, id, name, leader) in organizations {
            let organization = try context.make("Organization", ["id": id])
            try organization.setValue(name, forKey: "name")
            try organization.setValue(leader.flatMap { objects[$0] }, forKey: "leader")
            objects[label] = organization
        }
        return objects
    }

    /// Customers (name, info), services (name, info), orders (date, made, paid,
    /// customer) and their rows (sum, order, service):
    ///
    ///     c1 "Ann"  "vip"      s1 "Wash" "basic"
    ///     c2 "Ben"  nil        s2 "Dry"  nil
    ///     c3 "Cleo" "new"      s3 "Iron" "premium"
    ///     c4 "Dan"  "vip"
    ///
    ///     d1 2024-01-10 made paid     c1   rows w1 w2
    ///     d2 2024-02-15 made unpaid   c1   rows w3
    ///     d3 2024-03-01 unmade unpaid c2   rows w4
    ///     d4 2024-03-20 made paid     —    rows w5 w6
    ///     d5 2023-12-31 unmade paid   c3   no rows
    ///
    ///     w1 10.5 d1 s1    w2 4.0 d1 s2    w3 20.0 d2 s3    w4 7.25 d3 s1
    ///     w5 3.0  d4 —     w6 nil d4 s1    w7 0.0  —  s2
    private static func orders(_ context: ManagedObjectContext) throws -> [String: ManagedObject] {
        var objects: [String: ManagedObject] = [:]
        for (label, name, info) in [("c1", "Ann", "vip"), ("c2", "Ben", nil), ("c3", "Cleo", "new"), ("c4", "Dan", "vip")] as [(String, String, String?)] {
            let customer = try context.make("Customer", ["name": name])
            try customer.setValue(info, forKey: "info")
            objects[label] = customer
        }
        for (label, name, info) in [("s1", "Wash", "basic"), ("s2", "Dry", nil), ("s3", "Iron", "premium")] as [(String, String, String?)] {
            let service = try context.make("Service", ["name": name])
            try service.setValue(info, forKey: "info")
            objects[label] = service
        }
        let orders: [(String, String, Bool, Bool, String?)] = [
            ("d1", "2024-01-10", true, true, "c1"), ("d2", "2024-02-15", true, false, "c1"), ("d3", "2024-03-01", false, false, "c2"),
            ("d4", "2024-03-20", true, true, nil), ("d5", "2023-12-31", false, true, "c3"),
        ]
        for (label, date, made, paid, customer) in orders {
            let order = try context.make("Order", ["date": day(date), "made": made, "paid": paid])
            try order.setValue(customer.flatMap { objects[$0] }, forKey: "customer")
            objects[label] = order
        }
        let rows: [(String, Float?, String?, String?)] = [
            ("w1", 10.5, "d1", "s1"), ("w2", 4.0, "d1", "s2"), ("w3", 20.0, "d2", "s3"), ("w4", 7.25, "d3", "s1"),
            ("w5", 3.0, "d4", nil), ("w6", nil, "d4", "s1"), ("w7", 0.0, nil, "s2"),
        ]
        for (label, sum, order, service) in rows {
            let row = try context.make("RowOfOrder")
            try row.setValue(sum, forKey: "sum")
            try row.setValue(order.flatMap { objects[$0] }, forKey: "order")
            try row.setValue(service.flatMap { objects[$0] }, forKey: "service")
            objects[label] = row
        }
        return objects
    }

    /// Companies (name, inn, uid) and employees (firstName, secondName, company):
    ///
    ///     k1 "Acme"     "7701" u1     e1 "Peter"   "Gibbons"  k2    e4 "Wile" "Coyote"   k1
    ///     k2 "Initech"  nil    u2     e2 "Michael" "Bolton"   k2    e5 "Road" "Runner"   —
    ///     k3 "Umbrella" "7702" nil    e3 "Samir"   nil        k2    e6 nil    "Lumbergh" k2
    private static func company(_ context: ManagedObjectContext) throws -> [String: ManagedObject] {
        var objects: [String: ManagedObject] = [:]
        for (label, name, inn, uid) in [("k1", "Acme", "7701", u1), ("k2", "Initech", nil, u2), ("k3", "Umbrella", "7702", nil)]
                as [(String, String, String?, UUID?)] {
            let company = try context.make("Company", ["name": name])
            try company.setValue(inn, forKey: "inn")
            try company.setValue(uid, forKey: "uid")
            objects[label] = company
        }
        let employees: [(String, String?, String?, String?)] = [
            ("e1", "Peter", "Gibbons", "k2"), ("e2", "Michael", "Bolton", "k2"), ("e3", "Samir", nil, "k2"),
            ("e4", "Wile", "Coyote", "k1"), ("e5", "Road", "Runner", nil), ("e6", nil, "Lumbergh", "k2"),
        ]
        for (label, first, second, company) in employees {
            let employee = try context.make("Employee")
            try employee.setValue(first, forKey: "firstName")
            try employee.setValue(second, forKey: "secondName")
            try employee.setValue(company.flatMap { objects[$0] }, forKey: "company")
            objects[label] = employee
        }
        return objects
    }
}
