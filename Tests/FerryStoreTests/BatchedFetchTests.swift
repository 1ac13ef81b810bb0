import Foundation
import Testing
import FerryModel
@testable import FerryStore
import FerryTestSupport

/// `fetchBatchSize` and ``ManagedObjectContext/fetchResults(_:)``: IDs first, objects a batch at a
/// time as the results are read, earlier batches let go (Core Data's batched faulting).
@Suite("Batched fetches")
struct BatchedFetchTests {
    static let model = try! ManagedObjectModel {
        Entity("Item") {
            Attribute("n", .integer64)
            Relationship("next", to: "Item", inverse: "previous")
            Relationship("previous", to: "Item", inverse: "next")
        }
    }

    /// A store with `count` items numbered from 0, each linked to the one after it.
    func seeded(_ kind: TestStoreKind, count: Int) throws -> TestContainer {
        let test = try TestContainer(model: Self.model, kind: kind)
        let context = test.context()
        var previous: ManagedObject?
        for n in 0..<count {
            let item = try context.make("Item", ["n": Int64(n)])
            try previous?.setValue(item, forKey: "next")
            previous = item
        }
        try context.save()
        return test
    }

    static func n(_ item: ManagedObject) throws -> Int64 { try #require(item.value(forKey: "n") as? Int64) }

    /// Every item in order of `n`, read `batchSize` at a time.
    static func items(batchSize: Int, ascending: Bool = true) -> FetchRequest {
        var request = FetchRequest(entityName: "Item", sortDescriptors: [FetchSortDescriptor("n", ascending: ascending)])
        request.fetchBatchSize = batchSize
        return request
    }

    @Test("Iterating reads a batch at a time and lets earlier batches go; without a batch size every object stays", arguments: TestStoreKind.allCases)
    func boundedIteration(kind: TestStoreKind) throws {
        let test = try seeded(kind, count: 2_500)
        let context = test.context()
        var request = Self.items(batchSize: 100, ascending: false)
        let results = try context.fetchResults(request)
        #expect(results.count == 2_500)
        #expect(context.registeredObjects.isEmpty, "the fetch read IDs only")
        var expected: Int64 = 2_499
        var mostRegistered = 0
        for (position, item) in results.enumerated() {
            #expect(try Self.n(item) == expected)
            expected -= 1
            if position % 50 == 0 { mostRegistered = max(mostRegistered, context.registeredObjects.count) }
        }
        #expect(expected == -1)
        // One batch, and the faults its objects' links name.
        #expect(mostRegistered <= 250, "at most about one batch registered at a time, saw \(mostRegistered)")
        #expect(results.objectIDs == (try context.fetchObjectIDs(request)))

        request.fetchBatchSize = 0
        let everything = try context.fetchResults(request)
        #expect(everything.count == 2_500)
        #expect(context.registeredObjects.count >= 2_500, "without a batch size the results hold every object")
        #expect(try everything.map(Self.n) == (0..<2_500).reversed().map(Int64.init))
    }

    @Test("Linked objects read a batch at a time leave no bookkeeping behind for every object ever referenced")
    func linkedObjectsStayBounded() throws {
        let test = try seeded(.sqlite, count: 12_000)
        let context = test.context()
        let request = Self.items(batchSize: 100)
        var sum: Int64 = 0
        for item in try context.fetchResults(request) { sum += try Self.n(item) }
        #expect(sum == Int64(12_000 * 11_999 / 2))
        // Each item names its neighbours, so each one that went away was a referenced object: its ID
        // is kept only while a live object names it (the sweep starts past 4,096 such IDs).
        #expect(context.departedIDs.count <= 8_192, "\(context.departedIDs.count) departed IDs kept")
        #expect(context.registry.keyCount <= 8_192 + 300, "keys are given out again: \(context.registry.keyCount) used")
    }

    @Test("Random access reads the batch of the element asked for; registered objects keep their values", arguments: TestStoreKind.allCases)
    func randomAccess(kind: TestStoreKind) throws {
        let test = try seeded(kind, count: 1_000)
        let context = test.context()
        let request = Self.items(batchSize: 64)
        let results = try context.fetchResults(request)
        #expect(try Self.n(results[777]) == 777)
        #expect(try Self.n(results[3]) == 3)
        #expect(try Self.n(results[999]) == 999)
        let held = results[500]
        let other = try #require(held.value(forKey: "next") as? ManagedObject)
        try other.setValue(Int64(-1), forKey: "n")  // unsaved
        // The changed object is registered: a later batch read gives it back as it is in the context.
        var again = FetchRequest(entityName: "Item", predicate: .comparison(keyPath: "n", .greater, .attribute(.integer(400))),
                                 sortDescriptors: [FetchSortDescriptor("n")])
        again.fetchBatchSize = 10
        again.includesPendingChanges = false
        let later = try context.fetchResults(again)
        #expect(later[100] === other)
        #expect(try Self.n(later[100]) == -1)
    }

    @Test("With unsaved changes of the fetched entity the results are a whole fetch, unsaved objects included", arguments: TestStoreKind.allCases)
    func pendingChanges(kind: TestStoreKind) throws {
        let test = try seeded(kind, count: 300)
        let context = test.context()
        try context.make("Item", ["n": Int64(-5)])
        let request = Self.items(batchSize: 50)
        let results = try context.fetchResults(request)
        #expect(results.count == 301)
        #expect(try Self.n(results[0]) == -5)
    }

    @Test("An object deleted from the store after the IDs were read is a fault that says it is gone", arguments: TestStoreKind.allCases)
    func deletedMeanwhile(kind: TestStoreKind) throws {
        let test = try seeded(kind, count: 200)
        let reader = test.context()
        let request = Self.items(batchSize: 20)
        let results = try reader.fetchResults(request)
        let writer = test.context()
        let doomed = try #require(try writer.fetch(FetchRequest(entityName: "Item",
                                                                predicate: .comparison(keyPath: "n", .equal, .attribute(.integer(150))))).first)
        writer.delete(doomed)
        try writer.save()
        #expect(try Self.n(results[149]) == 149)
        let gone = results[150]
        #expect(gone.isFault)
        #expect(throws: ContextError.objectInaccessible(gone.objectID.uriString)) { try gone.value(forKey: "n") }
        #expect(try Self.n(results[151]) == 151)
    }
}
