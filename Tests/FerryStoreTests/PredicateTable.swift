import Foundation

/// One row of the predicate table: a predicate on an entity of a sample model
/// and the labels (see ``PredicateTableData``) of the objects it must select.
struct PredicateCase: Sendable, CustomStringConvertible {
    /// A format argument: a plain value, or objects of the data set by label.
    enum Argument: Sendable {
        case value(any Sendable)
        case object(String)
        case objects([String])
    }

    let model: String
    let entity: String
    let format: String
    let arguments: [Argument]
    let variables: [String: String]
    let expected: [String]

    var description: String { "\(model).\(entity): \(format)" }
}

/// The table: 200 predicates over the three sample models, with expectations
/// worked out by hand from the data set's comments.
enum PredicateTable {
    private static func person(_ format: String, _ expected: [String], _ arguments: [PredicateCase.Argument] = [],
                               variables: [String: String] = [:]) -> PredicateCase {
        PredicateCase(model: "OrgChart", entity: "Person", format: format, arguments: arguments, variables: variables, expected: expected)
    }

    private static func on(_ model: String, _ entity: String, _ format: String, _ expected: [String],
                           _ arguments: [PredicateCase.Argument] = []) -> PredicateCase {
        PredicateCase(model: model, entity: entity, format: format, arguments: arguments, variables: [:], expected: expected)
    }

    private static let everyone = ["p1", "p2", "p3", "p4", "p5", "p6", "p7", "p8", "p9"]
    private static func everyone(but excluded: String...) -> [String] { everyone.filter { !excluded.contains($0) } }
    private static func day(_ text: String) -> PredicateCase.Argument { .value(PredicateTableData.day(text)) }

    static let cases: [PredicateCase] = orgChart + organizations + orders + company

    // MARK: - OrgChart: Person

    static let orgChart: [PredicateCase] = [
        // Comparisons and their spellings.
        person("id == 3", ["p3"]),
        person("id = 3", ["p3"]),
        person("id != 3", everyone(but: "p3")),
        person("id <> 3", everyone(but: "p3")),
        person("id < 3", ["p1", "p2", "p7"]),
        person("id <= 3", ["p1", "p2", "p3", "p7"]),
        person("id > 7", ["p8", "p9"]),
        person("id >= 8", ["p8", "p9"]),
        person("id =< 1", ["p1", "p7"]),
        person("id => 9", ["p9"]),
        person("3 > id", ["p1", "p2", "p7"]),
        person("9 == id", ["p9"]),
        person("id == -1", []),
        // Strings compare by UTF-8 bytes: upper case < lower case < accented.
        person("name == 'Alice'", ["p1"]),
        person("name == \"alice\"", ["p8"]),
        person("name == nil", ["p7"]),
        person("name != nil", everyone(but: "p7")),
        person("name == NULL", ["p7"]),
        person("name != 'Bob'", everyone(but: "p2")),
        person("name < 'C'", ["p1", "p2"]),
        person("name >= 'a'", ["p4", "p5", "p8"]),
        person("name == 'O\\'Brien'", ["p9"]),
        person("name == \"O'Brien\"", ["p9"]),
        // [c] and [d] with == and !=.
        person("name ==[c] 'ALICE'", ["p1", "p8"]),
        person("name ==[cd] 'emile'", ["p5"]),
        person("name ==[c] 'emile'", []),
        person("name ==[d] 'Emile'", ["p5"]),
        person("name ==[d] 'Zoe'", ["p6"]),
        person("name !=[c] 'alice'", everyone(but: "p1", "p8")),
        // String operators.
        person("name BEGINSWITH 'A'", ["p1"]),
        person("name BEGINSWITH[c] 'a'", ["p1", "p8"]),
        person("name BEGINSWITH[c] 'É'", ["p5"]),
        person("name BEGINSWITH[c] 'é'", ["p5"]),
        person("name BEGINSWITH[cd] 'e'", ["p5"]),
        person("name BEGINSWITH 'e'", []),
        person("name ENDSWITH 'e'", ["p1", "p4", "p5", "p8"]),
        person("name ENDSWITH[c] 'E'", ["p1", "p4", "p5", "p8"]),
        person("name ENDSWITH 'ë'", ["p6"]),
        person("name ENDSWITH[d] 'e'", ["p1", "p4", "p5", "p6", "p8"]),
        person("name CONTAINS 'li'", ["p1", "p8"]),
        person("name CONTAINS 'il'", ["p5"]),
        person("name CONTAINS[c] 'O'", ["p2", "p3", "p6", "p9"]),
        person("name CONTAINS \"'\"", ["p9"]),
        person("name CONTAINS[cd] 'MIL'", ["p5"]),
        person("name LIKE 'a*'", ["p8"]),
        person("name LIKE[c] 'a*'", ["p1", "p8"]),
        person("name LIKE '?ob'", ["p2"]),
        person("name LIKE '*o*'", ["p2", "p3", "p6"]),
        person("name LIKE[cd] '*E'", ["p1", "p4", "p5", "p6", "p8"]),
        person("name LIKE 'Al?ce'", ["p1"]),
        person("name MATCHES '[a-z]+'", ["p4", "p8"]),
        person("name MATCHES '.*[lL].*'", ["p1", "p3", "p5", "p8"]),
        person("name MATCHES[c] 'b.b'", ["p2"]),
        person("name MATCHES 'Bo'", []),
        person("NOT name BEGINSWITH 'A'", everyone(but: "p1")),
        // IN and BETWEEN.
        person("name IN {'Bob', 'Carol', 'Nobody'}", ["p2", "p3"]),
        person("id IN {0, 9}", ["p7", "p9"]),
        person("NOT id IN {1, 2, 3}", ["p4", "p5", "p6", "p7", "p8", "p9"]),
        person("NOT (id IN {1, 2, 3})", ["p4", "p5", "p6", "p7", "p8", "p9"]),
        person("id BETWEEN {3, 5}", ["p3", "p4", "p5"]),
        person("id BETWEEN {5, 3}", []),
        person("id BETWEEN {0, 0}", ["p7"]),
        person("id between {1, 2}", ["p1", "p2"]),
        // To-one key paths.
        person("manager == nil", ["p1", "p7"]),
        person("manager != nil", ["p2", "p3", "p4", "p5", "p6", "p8", "p9"]),
        person("manager.name == 'Alice'", ["p2", "p3", "p9"]),
        person("manager.name BEGINSWITH[c] 'b'", ["p4", "p5"]),
        person("manager.manager.name == 'Alice'", ["p4", "p5", "p6"]),
        person("manager.manager.manager.id == 1", ["p8"]),
        person("manager.id > 2", ["p6", "p8"]),
        person("manager.name == nil", ["p1", "p7"]),
        person("manager.id == 0", []),
        person("manager.id != 1", ["p1", "p4", "p5", "p6", "p7", "p8"]),
        person("SELF.name == 'Bob'", ["p2"]),
        person("SELF.manager.name == 'Bob'", ["p4", "p5"]),
        // ANY / SOME / ALL / NONE.
        person("ANY employees.name == 'Bob'", ["p1"]),
        person("SOME employees.name BEGINSWITH[c] 'a'", ["p4"]),
        person("ANY employees.id > 5", ["p1", "p3", "p4"]),
        person("ALL employees.id > 5", ["p3", "p4", "p5", "p6", "p7", "p8", "p9"]),
        person("NONE employees.id > 5", ["p2", "p5", "p6", "p7", "p8", "p9"]),
        person("NOT ANY employees.id > 5", ["p2", "p5", "p6", "p7", "p8", "p9"]),
        person("ANY employees.manager.name == 'Alice'", ["p1"]),
        person("ANY employees.name IN {'dave', 'Zoë'}", ["p2", "p3"]),
        person("ANY manager.employees.name == 'Émile'", ["p4", "p5"]),
        person("ANY employees.name == nil", []),
        person("ALL employees.name != nil", everyone),
        person("any employees.id == 6", ["p3"]),
        // @count and aggregates.
        person("employees.@count == 0", ["p5", "p6", "p7", "p8", "p9"]),
        person("employees.@count >= 2", ["p1", "p2"]),
        person("employees.@count == 1", ["p3", "p4"]),
        person("employees.@count != 3", everyone(but: "p1")),
        person("manager.employees.@count == 3", ["p2", "p3", "p9"]),
        person("employees.@sum.id > 10", ["p1"]),
        person("employees.@sum.id == 0", ["p5", "p6", "p7", "p8", "p9"]),
        person("employees.@avg.id == 4.5", ["p2"]),
        person("employees.@avg.id > 5", ["p3", "p4"]),
        person("employees.@min.id == 2", ["p1"]),
        person("employees.@max.id < 7", ["p2", "p3"]),
        person("employees.@max.id == nil", ["p5", "p6", "p7", "p8", "p9"]),
        // SUBQUERY.
        person("SUBQUERY(employees, $e, $e.id > 2).@count == 2", ["p1", "p2"]),
        person("SUBQUERY(employees, $e, $e.name CONTAINS[c] 'a').@count > 0", ["p1", "p2", "p4"]),
        person("SUBQUERY(employees, $e, $e.employees.@count > 0).@count == 2", ["p1"]),
        person("SUBQUERY(employees, $e, ANY $e.employees.name == 'alice').@count == 1", ["p2"]),
        person("SUBQUERY(employees, $e, TRUEPREDICATE).@count == 3", ["p1"]),
        // Two key paths.
        person("manager.id < id", ["p2", "p3", "p4", "p5", "p6", "p8", "p9"]),
        person("id < manager.id", []),
        person("manager.manager == manager", ["p1", "p7"]),
        person("name == manager.name", ["p7"]),
        person("name > manager.name", ["p2", "p3", "p4", "p5", "p6", "p9"]),
        // Objects as arguments.
        person("SELF == %@", ["p3"], [.object("p3")]),
        person("SELF IN %@", ["p1", "p9"], [.objects(["p1", "p9"])]),
        person("SELF != %@", everyone(but: "p1"), [.object("p1")]),
        person("manager == %@", ["p2", "p3", "p9"], [.object("p1")]),
        person("manager IN %@", ["p4", "p5", "p6"], [.objects(["p2", "p3"])]),
        person("ANY employees == %@", ["p4"], [.object("p8")]),
        person("ANY employees IN %@", ["p2", "p3"], [.objects(["p4", "p6"])]),
        person("NONE employees == %@", everyone(but: "p1"), [.object("p2")]),
        // Value arguments and variables.
        person("name == %@", ["p3"], [.value("Carol")]),
        person("%K == %@", ["p6"], [.value("name"), .value("Zoë")]),
        person("id > %d", ["p8", "p9"], [.value(6)]),
        person("id < %i", ["p1", "p7"], [.value(2)]),
        person("id >= %f", ["p9"], [.value(8.5)]),
        person("name BEGINSWITH %s", ["p3"], [.value("Ca")]),
        person("id IN %@", ["p1", "p4"], [.value([1, 4, 100])]),
        person("name IN %@", ["p2", "p8"], [.value(["Bob", "alice"])]),
        person("name == $NAME", ["p4"], variables: ["NAME": "dave"]),
        person("manager.name == $BOSS AND id > 4", ["p5"], variables: ["BOSS": "Bob"]),
        // Constants and compounds.
        person("TRUEPREDICATE", everyone),
        person("FALSEPREDICATE", []),
        person("id > 2 AND id < 5", ["p3", "p4"]),
        person("id < 2 OR id > 8", ["p1", "p7", "p9"]),
        person("id < 2 || name == 'Bob'", ["p1", "p2", "p7"]),
        person("id > 2 && manager.name == 'Bob'", ["p4", "p5"]),
        person("!(id > 2)", ["p1", "p2", "p7"]),
        person("NOT (manager == nil OR id > 5)", ["p2", "p3", "p4", "p5"]),
        person("(id == 1 OR id == 2) AND NOT name BEGINSWITH 'A'", ["p2"]),
        person("id == 1 OR id == 2 AND name == 'Alice'", ["p1"]),
        person("name == 'Bob' and id == 2", ["p2"]),
        person("name beginswith[c] 'b'", ["p2"]),
        person("NOT NOT id == 3", ["p3"]),
        person("TRUEPREDICATE AND FALSEPREDICATE OR id == 4", ["p4"]),
    ]

    // MARK: - OrgChart: Organization

    static let organizations: [PredicateCase] = [
        on("OrgChart", "Organization", "leader == nil", ["o3"]),
        on("OrgChart", "Organization", "leader.name == 'Bob'", ["o2"]),
        on("OrgChart", "Organization", "leader.manager.name == 'Alice'", ["o2"]),
        on("OrgChart", "Organization", "leader.employees.@count > 0", ["o1", "o2"]),
        on("OrgChart", "Organization", "ANY leader.employees.name == 'dave'", ["o2"]),
        on("OrgChart", "Organization", "id BETWEEN {5, 25}", ["o1", "o2"]),
        on("OrgChart", "Organization", "name ENDSWITH 'ex' OR name == nil", ["o2", "o4"]),
        on("OrgChart", "Organization", "leader.id > id", ["o4"]),
        on("OrgChart", "Organization", "leader IN %@", ["o1", "o4"], [.objects(["p1", "p5"])]),
        on("OrgChart", "Organization", "name CONTAINS[c] 'INI'", ["o3"]),
        on("OrgChart", "Organization", "leader.manager == nil", ["o1", "o3"]),
        on("OrgChart", "Organization", "id == 0", ["o4"]),
    ]

    // MARK: - Orders

    static let orders: [PredicateCase] = [
        // Customer
        on("Orders", "Customer", "orders.@count == 2", ["c1"]),
        on("Orders", "Customer", "orders.@count == 0", ["c4"]),
        on("Orders", "Customer", "ANY orders.paid == YES", ["c1", "c3"]),
        on("Orders", "Customer", "ALL orders.paid == true", ["c3", "c4"]),
        on("Orders", "Customer", "NONE orders.made == NO", ["c1", "c4"]),
        on("Orders", "Customer", "info == nil", ["c2"]),
        on("Orders", "Customer", "info != 'vip'", ["c2", "c3"]),
        on("Orders", "Customer", "info IN {'vip', 'new'}", ["c1", "c3", "c4"]),
        on("Orders", "Customer", "SUBQUERY(orders, $o, $o.rowsOfOrder.@sum.sum > 15).@count > 0", ["c1"]),
        on("Orders", "Customer", "SUBQUERY(orders, $o, $o.paid == NO AND $o.made == YES).@count == 1", ["c1"]),
        on("Orders", "Customer", "orders.@max.date >= %@", ["c2"], [day("2024-03-01")]),
        on("Orders", "Customer", "orders.@min.date < %@", ["c3"], [day("2024-01-01")]),
        on("Orders", "Customer", "ANY orders.date > %@", ["c1", "c2"], [day("2024-02-01")]),
        // Order
        on("Orders", "Order", "date > %@", ["d2", "d3", "d4"], [day("2024-02-01")]),
        on("Orders", "Order", "date BETWEEN %@", ["d1", "d2"], [.value([PredicateTableData.day("2024-01-01"), PredicateTableData.day("2024-02-15")])]),
        on("Orders", "Order", "date == %@", ["d4"], [day("2024-03-20")]),
        on("Orders", "Order", "paid == YES AND made == YES", ["d1", "d4"]),
        on("Orders", "Order", "paid == NO", ["d2", "d3"]),
        on("Orders", "Order", "paid == FALSE OR made == FALSE", ["d2", "d3", "d5"]),
        on("Orders", "Order", "paid != made", ["d2", "d5"]),
        on("Orders", "Order", "customer.name == 'Ann'", ["d1", "d2"]),
        on("Orders", "Order", "customer == nil", ["d4"]),
        on("Orders", "Order", "customer.info == nil", ["d3", "d4"]),
        on("Orders", "Order", "rowsOfOrder.@count == 2", ["d1", "d4"]),
        on("Orders", "Order", "rowsOfOrder.@sum.sum > 10", ["d1", "d2"]),
        on("Orders", "Order", "rowsOfOrder.@sum.sum == 0", ["d5"]),
        on("Orders", "Order", "rowsOfOrder.@avg.sum == 3", ["d4"]),
        on("Orders", "Order", "rowsOfOrder.@min.sum < 5", ["d1", "d4"]),
        on("Orders", "Order", "ANY rowsOfOrder.service.name == 'Wash'", ["d1", "d3", "d4"]),
        on("Orders", "Order", "ANY rowsOfOrder.service == nil", ["d4"]),
        on("Orders", "Order", "ALL rowsOfOrder.service.info != nil", ["d2", "d3", "d5"]),
        on("Orders", "Order", "SUBQUERY(rowsOfOrder, $r, $r.sum >= 4 AND $r.service.name != 'Dry').@count >= 1", ["d1", "d2", "d3"]),
        on("Orders", "Order", "customer.orders.@count > 1", ["d1", "d2"]),
        on("Orders", "Order", "ANY customer.orders.paid == NO", ["d1", "d2", "d3"]),
        // RowOfOrder
        on("Orders", "RowOfOrder", "sum == nil", ["w6"]),
        on("Orders", "RowOfOrder", "sum > 5", ["w1", "w3", "w4"]),
        on("Orders", "RowOfOrder", "sum == 7.25", ["w4"]),
        on("Orders", "RowOfOrder", "sum < 4.5 AND sum != nil", ["w2", "w5", "w7"]),
        on("Orders", "RowOfOrder", "sum BETWEEN {3, 10.5}", ["w1", "w2", "w4", "w5"]),
        on("Orders", "RowOfOrder", "order.customer.name == 'Ann'", ["w1", "w2", "w3"]),
        on("Orders", "RowOfOrder", "order.paid == YES", ["w1", "w2", "w5", "w6"]),
        on("Orders", "RowOfOrder", "service.name IN {'Dry', 'Iron'}", ["w2", "w3", "w7"]),
        on("Orders", "RowOfOrder", "order == nil OR service == nil", ["w5", "w7"]),
        on("Orders", "RowOfOrder", "order.rowsOfOrder.@count == 2", ["w1", "w2", "w5", "w6"]),
        on("Orders", "RowOfOrder", "order.date < %@", ["w1", "w2"], [day("2024-02-01")]),
        on("Orders", "RowOfOrder", "service.rowsOfOrders.@count >= 3", ["w1", "w4", "w6"]),
        on("Orders", "RowOfOrder", "sum > %f", ["w3"], [.value(10.5)]),
        // Service
        on("Orders", "Service", "rowsOfOrders.@sum.sum > 17", ["s1", "s3"]),
        on("Orders", "Service", "ANY rowsOfOrders.order.customer.name == 'Ben'", ["s1"]),
        on("Orders", "Service", "info ==[c] 'PREMIUM'", ["s3"]),
        on("Orders", "Service", "NONE rowsOfOrders.order.paid == YES", ["s3"]),
        on("Orders", "Service", "name LIKE '?r*'", ["s2", "s3"]),
    ]

    // MARK: - Company

    static let company: [PredicateCase] = [
        on("Company", "Company", "employee.@count == 4", ["k2"]),
        on("Company", "Company", "employee.@count == 0", ["k3"]),
        on("Company", "Company", "ANY employee.secondName == nil", ["k2"]),
        on("Company", "Company", "ALL employee.firstName != nil", ["k1", "k3"]),
        on("Company", "Company", "inn BEGINSWITH '77'", ["k1", "k3"]),
        on("Company", "Company", "uid == %@", ["k1"], [.value(PredicateTableData.u1)]),
        on("Company", "Company", "uid == nil", ["k3"]),
        on("Company", "Company", "uid != nil AND inn == nil", ["k2"]),
        on("Company", "Company", "SUBQUERY(employee, $e, $e.secondName BEGINSWITH 'B' OR $e.secondName BEGINSWITH 'G').@count == 2", ["k2"]),
        on("Company", "Company", "name MATCHES '[A-I].*'", ["k1", "k2"]),
        on("Company", "Employee", "company.name == 'Initech'", ["e1", "e2", "e3", "e6"]),
        on("Company", "Employee", "company == nil", ["e5"]),
        on("Company", "Employee", "firstName == nil OR secondName == nil", ["e3", "e6"]),
        on("Company", "Employee", "company.inn == nil", ["e1", "e2", "e3", "e5", "e6"]),
        on("Company", "Employee", "firstName < secondName", ["e5"]),
        on("Company", "Employee", "secondName ENDSWITH[c] 'ON'", ["e2"]),
        on("Company", "Employee", "company.employee.@count > 1", ["e1", "e2", "e3", "e6"]),
        on("Company", "Employee", "ANY company.employee.firstName == 'Wile'", ["e4"]),
        on("Company", "Employee", "company.uid == %@", ["e1", "e2", "e3", "e6"], [.value(PredicateTableData.u2)]),
        on("Company", "Employee", "firstName LIKE '*a*'", ["e2", "e3", "e5"]),
        on("Company", "Employee", "firstName IN %@", ["e1", "e5"], [.value(["Peter", "Road"])]),
        on("Company", "Employee", "company.name CONTAINS 'ni' AND secondName != nil", ["e1", "e2", "e6"]),
    ]
}
