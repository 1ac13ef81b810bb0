import Foundation
import Testing
import FerryModel
import FerryStore
import FerryTestSupport

/// Expression fetches (Core Data's `NSExpressionDescription` with `@count`, `@sum`, `@avg`, `@min`,
/// `@max`), grouped by `propertiesToGroupBy` and filtered by a having predicate: the same results
/// from the SQLite store's `GROUP BY` statement and the in-memory store's aggregation.
@Suite("Aggregate fetches")
struct AggregateFetchTests {
    static let model = try! ManagedObjectModel {
        Entity("Sale") {
            Attribute("region", .string)
            Attribute("units", .integer64)
            Attribute("price", .double)
            Attribute("amount", .decimal)
            Attribute("day", .date)
            Relationship("customer", to: "Client", inverse: "sales")
        }
        Entity("Client") {
            Attribute("name", .string)
            Relationship("sales", to: "Sale", inverse: "customer", toMany: true)
        }
    }

    struct Seeded {
        let test: TestContainer
        let context: ManagedObjectContext
        let ann: ObjectID
        let bob: ObjectID
    }

    /// Five sales, in this order (primary-key order):
    /// north 3 × 1.5 (0.1, Ann), south 5 × 2.25 (0.2, Bob), north 4 × nil (0.2, Bob), nil 1 × 0.5 (nil, none), south 10 × 4 (1.05, Ann).
    func seeded(_ kind: TestStoreKind) throws -> Seeded {
        let test = try TestContainer(model: Self.model, kind: kind)
        let context = test.context()
        let ann = try context.make("Client", ["name": "Ann"])
        let bob = try context.make("Client", ["name": "Bob"])
        let rows: [(String?, Int64, Double?, String?, ManagedObject?)] = [
            ("north", 3, 1.5, "0.1", ann), ("south", 5, 2.25, "0.2", bob), ("north", 4, nil, "0.2", bob),
            (nil, 1, 0.5, nil, nil), ("south", 10, 4, "1.05", ann),
        ]
        for (index, row) in rows.enumerated() {
            let sale = try context.make("Sale", ["units": row.1, "day": Date(timeIntervalSinceReferenceDate: Double(1000 - index))])
            if let region = row.0 { try sale.setValue(region, forKey: "region") }
            if let price = row.2 { try sale.setValue(price, forKey: "price") }
            if let amount = row.3 { try sale.setValue(Decimal(string: amount), forKey: "amount") }
            if let customer = row.4 { try sale.setValue(customer, forKey: "customer") }
        }
        try context.save()
        return Seeded(test: test, context: context, ann: ann.objectID, bob: bob.objectID)
    }

    static func decimal(_ text: String) -> FetchedValue { .attribute(.decimal(Decimal(string: text) ?? 0)) }

    @Test("Grouped by an attribute: every function, groups in the order of their first object, nil values skipped", arguments: TestStoreKind.allCases)
    func groupedByAttribute(kind: TestStoreKind) throws {
        let context = try seeded(kind).context
        var request = FetchRequest(entityName: "Sale")
        request.propertiesToGroupBy = ["region"]
        request.expressions = [.count(as: "n"), .sum("units", as: "units"), .avg("price", as: "avgPrice"), .count("price", as: "priced"),
                               .min("amount", as: "least"), .max("amount", as: "most"), .min("day", as: "first")]
        let rows = try context.fetchDictionaries(request)
        #expect(rows == [
            ["region": .attribute(.string("north")), "n": .attribute(.integer(2)), "units": .attribute(.integer(7)), "avgPrice": .attribute(.double(1.5)),
             "priced": .attribute(.integer(1)), "least": Self.decimal("0.1"), "most": Self.decimal("0.2"),
             "first": .attribute(.date(Date(timeIntervalSinceReferenceDate: 998)))],
            ["region": .attribute(.string("south")), "n": .attribute(.integer(2)), "units": .attribute(.integer(15)), "avgPrice": .attribute(.double(3.125)),
             "priced": .attribute(.integer(2)), "least": Self.decimal("0.2"), "most": Self.decimal("1.05"),
             "first": .attribute(.date(Date(timeIntervalSinceReferenceDate: 996)))],
            // The group of sales without a region: its key is left out, as nil values are; so are @min and @max of nothing.
            ["n": .attribute(.integer(1)), "units": .attribute(.integer(1)), "avgPrice": .attribute(.double(0.5)), "priced": .attribute(.integer(1)),
             "first": .attribute(.date(Date(timeIntervalSinceReferenceDate: 997)))],
        ])
    }

    @Test("Grouped by a to-one and by a key path through it", arguments: TestStoreKind.allCases)
    func groupedByRelationship(kind: TestStoreKind) throws {
        let seeded = try seeded(kind)
        var request = FetchRequest(entityName: "Sale")
        request.propertiesToGroupBy = ["customer"]
        request.expressions = [.sum("units", as: "units")]
        #expect(try seeded.context.fetchDictionaries(request) == [
            ["customer": .object(seeded.ann), "units": .attribute(.integer(13))],
            ["customer": .object(seeded.bob), "units": .attribute(.integer(9))],
            ["units": .attribute(.integer(1))],
        ])
        request.propertiesToGroupBy = ["customer.name", "region"]
        request.propertiesToFetch = ["customer.name"]
        request.expressions = [.count(as: "n")]
        request.sortDescriptors = [FetchSortDescriptor("customer.name", ascending: false)]
        request.predicate = .comparison(keyPath: "customer", .notEqual, .null)
        // Grouped by name and region, four groups, of which the result shows the name only.
        #expect(try seeded.context.fetchDictionaries(request) == [
            ["customer.name": .attribute(.string("Bob")), "n": .attribute(.integer(1))],
            ["customer.name": .attribute(.string("Bob")), "n": .attribute(.integer(1))],
            ["customer.name": .attribute(.string("Ann")), "n": .attribute(.integer(1))],
            ["customer.name": .attribute(.string("Ann")), "n": .attribute(.integer(1))],
        ])
    }

    @Test("Without groups: one row over every match, and one over none (count 0, sum 0, no average)", arguments: TestStoreKind.allCases)
    func overAllMatches(kind: TestStoreKind) throws {
        let context = try seeded(kind).context
        var request = FetchRequest(entityName: "Sale")
        request.expressions = [.count(as: "n"), .sum("units", as: "units"), .avg("price", as: "avgPrice"),
                               .sum("amount", as: "amount"), .avg("amount", as: "avgAmount"), .sum("price", as: "revenue")]
        #expect(try context.fetchDictionaries(request) == [[
            "n": .attribute(.integer(5)), "units": .attribute(.integer(23)), "avgPrice": .attribute(.double(2.0625)),
            // Decimals exactly: 0.1 + 0.2 + 0.2 + 1.05, with no binary rounding.
            "amount": Self.decimal("1.55"), "avgAmount": Self.decimal("0.3875"), "revenue": .attribute(.double(8.25)),
        ]])
        request.predicate = .comparison(keyPath: "units", .greater, .attribute(.integer(100)))
        #expect(try context.fetchDictionaries(request) == [[
            "n": .attribute(.integer(0)), "units": .attribute(.integer(0)), "amount": Self.decimal("0"), "revenue": .attribute(.double(0)),
        ]])
    }

    @Test("A having predicate over expression names and group keys, sorted by an expression, then offset and limit", arguments: TestStoreKind.allCases)
    func havingSortAndWindow(kind: TestStoreKind) throws {
        let context = try seeded(kind).context
        var request = FetchRequest(entityName: "Sale")
        request.propertiesToGroupBy = ["region"]
        request.expressions = [.sum("units", as: "units"), .sum("amount", as: "amount")]
        request.havingPredicate = .comparison(keyPath: "units", .greater, .attribute(.integer(5)))
        request.sortDescriptors = [FetchSortDescriptor("units", ascending: false)]
        func regions() throws -> [String] {
            try context.fetchDictionaries(request).map { row in
                if case .attribute(.string(let region))? = row["region"] { return region }
                return "-"
            }
        }
        #expect(try regions() == ["south", "north"])
        request.havingPredicate = .and([.comparison(keyPath: "amount", .lessOrEqual, .attribute(.decimal(Decimal(string: "0.3") ?? 0))),
                                        .comparison(keyPath: "region", .notEqual, .null)])
        #expect(try regions() == ["north"], "0.1 + 0.2 is 0.3 exactly, so north's amount is not above it")
        request.havingPredicate = .or([.stringMatch(keyPath: "region", .beginsWith, "S", .caseInsensitive),
                                       .comparison(keyPath: "region", .equal, .null)])
        #expect(try regions() == ["south", "-"])
        request.havingPredicate = nil
        request.fetchOffset = 1
        request.fetchLimit = 1
        #expect(try regions() == ["north"])
    }

    /// The name an invalid aggregate fetch is refused for, or nil when it is not refused that way.
    func refusedName(_ context: ManagedObjectContext, _ request: FetchRequest) -> String? {
        do {
            _ = try context.fetchDictionaries(request)
            return nil
        } catch QueryError.invalidAggregate(let entity, let name, let reason) {
            #expect(entity == "Sale" && !reason.isEmpty)
            return name
        } catch {
            Issue.record("refused otherwise: \(error)")
            return nil
        }
    }

    @Test("Aggregate fetches that cannot be computed are refused, naming the key path or expression", arguments: TestStoreKind.allCases)
    func refusals(kind: TestStoreKind) throws {
        let context = try seeded(kind).context
        var grouped = FetchRequest(entityName: "Sale")
        grouped.propertiesToGroupBy = ["region"]
        grouped.expressions = [.count(as: "n")]

        var request = grouped
        request.propertiesToFetch = ["region", "units"]
        #expect(refusedName(context, request) == "units", "fetched but not grouped by")
        request = grouped
        request.expressions = [.sum("region", as: "total")]
        #expect(refusedName(context, request) == "total", "@sum of a string")
        request = grouped
        request.expressions = [.count(as: "region")]
        #expect(refusedName(context, request) == "region", "an expression named like a group key")
        request = grouped
        request.expressions = [FetchExpression(name: "m", function: .max, keyPath: nil)]
        #expect(refusedName(context, request) == "m", "@max of nothing named")
        request = grouped
        request.sortDescriptors = [FetchSortDescriptor("units")]
        #expect(refusedName(context, request) == "units", "sorted by what the result does not hold")
        request = grouped
        request.havingPredicate = .quantified(.any, keyPath: "customer.sales", .alwaysTrue)
        #expect(refusedName(context, request) == "customer.sales", "a to-many condition in the having predicate")
        request = FetchRequest(entityName: "Sale")
        request.expressions = [.count(as: "n")]
        request.propertiesToFetch = ["region"]
        #expect(refusedName(context, request) == "region", "a fetched property beside expressions without groups")
    }

    @Test("An integer @sum that overflows is refused, not wrapped", arguments: TestStoreKind.allCases)
    func integerOverflow(kind: TestStoreKind) throws {
        let test = try TestContainer(model: Self.model, kind: kind)
        let context = test.context()
        try context.make("Sale", ["units": Int64.max])
        try context.make("Sale", ["units": Int64(1)])
        try context.save()
        var request = FetchRequest(entityName: "Sale")
        request.expressions = [.sum("units", as: "total"), .max("units", as: "most")]
        do {
            _ = try context.fetchDictionaries(request)
            Issue.record("the overflowing sum was answered")
        } catch QueryError.invalidAggregate(_, let name, let reason) {
            #expect(name == "total" && reason.contains("overflows"))
        }
        request.expressions = [.max("units", as: "most")]
        #expect(try context.fetchDictionaries(request) == [["most": .attribute(.integer(Int64.max))]])
    }

    @Test("Random grouped fetches: the SQLite store's GROUP BY and the in-memory aggregation return the same rows")
    func parity() throws {
        var random = SeededGenerator(seed: 2511)
        let memory = try TestContainer(model: Self.model, kind: .memory)
        let sqlite = try TestContainer(model: Self.model, kind: .sqlite)
        let contexts = [memory.context(), sqlite.context()]
        let regions: [String?] = [nil, "a", "b", "B", "c"]
        let prices: [Double?] = [nil, 0.5, 1.25, 2, 3.75, -1.5]
        let amounts: [String?] = [nil, "0.1", "0.2", "1.05", "-3.3"]
        var clients: [[ManagedObject]] = [[], []]
        for name in ["Ann", "Bob", "ann"] {
            for (index, context) in contexts.enumerated() { clients[index].append(try context.make("Client", ["name": name])) }
        }
        for _ in 0..<80 {
            let region = regions.randomElement(using: &random) ?? nil
            let units: Int64? = Int.random(in: 0..<6, using: &random) == 0 ? nil : Int64.random(in: -5...20, using: &random)
            let price = prices.randomElement(using: &random) ?? nil
            let amount = amounts.randomElement(using: &random) ?? nil
            let client = Int.random(in: 0...3, using: &random)
            for (index, context) in contexts.enumerated() {
                let sale = try context.insert(entityName: "Sale")
                try sale.setValue(region, forKey: "region")
                try sale.setValue(units, forKey: "units")
                try sale.setValue(price, forKey: "price")
                try sale.setValue(amount.flatMap { Decimal(string: $0) }, forKey: "amount")
                if client < 3 { try sale.setValue(clients[index][client], forKey: "customer") }
            }
        }
        for context in contexts { try context.save() }

        let groupChoices = [[], ["region"], ["customer"], ["customer.name"], ["region", "customer.name"]]
        let functions: [(FetchExpression.Function, String?)] = [(.count, nil), (.count, "price"), (.sum, "units"), (.sum, "price"), (.sum, "amount"),
                                                               (.avg, "units"), (.avg, "amount"), (.min, "region"), (.max, "units"), (.min, "amount"),
                                                               (.max, "customer.name")]
        /// Object IDs differ between the stores (each has its own UUID): compare their entity and row number.
        func comparable(_ rows: [[String: FetchedValue]]) -> [[String: String]] {
            rows.map { row in
                row.mapValues { value in
                    switch value {
                    case .attribute(let attribute): "\(attribute)"
                    case .object(let id): "\(id.entityName)/\(id.primaryKey ?? -1)"
                    }
                }
            }
        }
        var compared = 0
        for round in 0..<150 {
            var request = FetchRequest(entityName: "Sale")
            request.propertiesToGroupBy = groupChoices.randomElement(using: &random) ?? []
            let chosen = functions.shuffled(using: &random).prefix(Int.random(in: 1...4, using: &random))
            request.expressions = chosen.enumerated().map { FetchExpression(name: "e\($0.offset)", function: $0.element.0, keyPath: $0.element.1) }
            if Bool.random(using: &random) {
                request.predicate = .comparison(keyPath: "units", [.greater, .less, .notEqual].randomElement(using: &random) ?? .greater,
                                                .attribute(.integer(Int64.random(in: -2...10, using: &random))))
            }
            if Bool.random(using: &random), let sum = request.expressions.first(where: { $0.function == .count || $0.keyPath == "units" }) {
                request.havingPredicate = .comparison(keyPath: sum.name, [.greater, .lessOrEqual].randomElement(using: &random) ?? .greater,
                                                      .attribute(.integer(Int64.random(in: 0...12, using: &random))))
            }
            let sortable = request.propertiesToGroupBy.filter { !$0.contains("customer") || $0.contains(".") } + request.expressions.map(\.name)
            if let key = sortable.randomElement(using: &random), Bool.random(using: &random) {
                request.sortDescriptors = [FetchSortDescriptor(key, ascending: Bool.random(using: &random))]
            }
            if Int.random(in: 0..<4, using: &random) == 0 {
                request.fetchOffset = Int.random(in: 0...2, using: &random)
                request.fetchLimit = Int.random(in: 0...3, using: &random)
            }
            let inMemory = try comparable(contexts[0].fetchDictionaries(request))
            let inSQL = try comparable(contexts[1].fetchDictionaries(request))
            #expect(inMemory == inSQL, "round \(round): \(request)")
            if !inMemory.isEmpty { compared += 1 }
        }
        #expect(compared > 100, "most rounds compared some rows")
    }
}
