import Foundation

/// The objects of ``ManagedObjectContext/fetchResults(_:)``: a collection that holds the matching
/// IDs and reads the objects' values a batch at a time as it is read (Core Data's batched
/// faulting, `fetchBatchSize`).
///
/// Only the batch last read is held by the collection; objects of earlier batches stay in
/// memory only while something else holds them (a context holds unchanged objects weakly, see
/// ``ManagedObjectContext/retainsRegisteredObjects``). Iterating a million results therefore
/// keeps about one batch of objects in memory. Reading an element outside the current batch
/// reads its whole batch in one store query; objects already registered in the context keep
/// their in-context values. An object deleted from the store since the IDs were read is a fault
/// whose values cannot be read (``ContextError/objectInaccessible(_:)``), as in Core Data.
///
/// Like its context, a `FetchedResults` belongs to one isolation domain.
public struct FetchedResults: RandomAccessCollection {
    private enum Storage {
        case objects([ManagedObject])
        case batched(ids: ObjectIDList, batchSize: Int, batch: CurrentBatch)
    }

    /// The batch read last (a reference, so that reading through a copy of the collection shares it).
    final class CurrentBatch {
        var start = 0
        var objects: [ManagedObject] = []
    }

    private let storage: Storage
    private let context: ManagedObjectContext

    init(objects: [ManagedObject], context: ManagedObjectContext) {
        storage = .objects(objects)
        self.context = context
    }

    init(ids: ObjectIDList, batchSize: Int, context: ManagedObjectContext) {
        storage = .batched(ids: ids, batchSize: Swift.max(batchSize, 1), batch: CurrentBatch())
        self.context = context
    }

    /// The IDs of the results, in order, without reading any object.
    public var objectIDs: [ObjectID] {
        switch storage {
        case .objects(let objects): objects.map(\.objectID)
        case .batched(let ids, _, _): Array(ids)
        }
    }

    public var startIndex: Int { 0 }

    public var endIndex: Int {
        switch storage {
        case .objects(let objects): objects.count
        case .batched(let ids, _, _): ids.count
        }
    }

    public subscript(position: Int) -> ManagedObject {
        switch storage {
        case .objects(let objects):
            return objects[position]
        case .batched(let ids, let batchSize, let batch):
            precondition(position >= 0 && position < ids.count, "index \(position) out of range 0..<\(ids.count)")
            if position < batch.start || position >= batch.start + batch.objects.count {
                let start = position / batchSize * batchSize
                let batchIDs = Array(ids[start..<Swift.min(start + batchSize, ids.count)])
                // Dropping the previous batch first lets its objects go before the next is read.
                batch.objects = []
                batch.start = start
                batch.objects = context.registerBatch(batchIDs)
            }
            return batch.objects[position - batch.start]
        }
    }
}

@available(*, unavailable, message: "results belong to their context's isolation domain")
extension FetchedResults: Sendable {}
