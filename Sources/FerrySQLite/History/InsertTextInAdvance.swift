import Foundation
import FerryModel
import FerryStore

/// Writes a local save's inserts as change-set text on a thread of its own while
/// the saving thread writes their rows (``SaveWriter``); ``ChangeRecorder`` then
/// takes the text instead of writing it itself. The bytes are the ones
/// ``ChangeRecorder`` would write.
///
/// Only possible when that text needs nothing from the store: every object of
/// the store still has its own URI (no identity map to consult), the save is
/// not a replay, and no insert has to-many members (those are recorded with the
/// insert). SQLite has one writer, so on two cores this runs beside the writes
/// instead of after them.
final class InsertTextInAdvance: Sendable {
    /// Saves with fewer inserts write their text in place (a thread costs more than it saves).
    static let minimumInserts = 64

    /// The inserts' text, its compressed beginning and its signature begun; nil when an insert
    /// could not be written without the store.
    typealias Text = (writer: ChangeSetWriter, compressed: CompressedPrefix?, signature: (any PartialSignature)?)

    private let text: DedicatedThreads.Joinable<Text?>

    private init(_ text: DedicatedThreads.Joinable<Text?>) {
        self.text = text
    }

    /// Starts writing the inserts of `request` (with their allocated IDs, `permanent`), or returns
    /// nil when the save does not qualify
    /// (see the type's notes; `allLocal` says whether every object has its own URI, and is
    /// asked only when everything else qualifies).
    static func start(_ request: SaveRequest, permanent: InsertedIDs,
                      layout: StoreLayout, signer: (any ChangeSetSigner)?, allLocal: () throws -> Bool) rethrows -> InsertTextInAdvance? {
        guard request.toManyChanges.isEmpty, permanent.permanentIDs.count >= minimumInserts,
              permanent.permanentIDs.count == request.inserts.count, try allLocal() else { return nil }
        return InsertTextInAdvance(DedicatedThreads.spawn(named: "ferry-record") { () -> Text? in
            let text = write(request, permanent: permanent, layout: layout)
            // The text so far is the beginning of the body: compress it here too (a failure leaves it to the transaction).
            let compressed = text.flatMap { writer in writer.withBytesSoFar { try? CompressedPrefix($0) } }
            // And begin its signature (the digest of the inserts), so the transaction hashes only the tail.
            let signature = signer.flatMap { signer in text.map { writer in writer.withBytesSoFar { signer.beginSignature(over: $0) } } }
            return text.map { ($0, compressed, signature) }
        })
    }

    /// The inserts' text and, when long enough, its compressed form (the beginning of the
    /// stored body), waiting for the thread; nil when an insert could not be written without the
    /// store (the recorder then writes them itself). Call once: the compressed beginning and the
    /// signature begun are finished by their one user.
    func take() -> Text? {
        text.join()
    }

    /// The inserts' text, as ``ChangeRecorder`` writes a local save's inserts when every
    /// object has its own URI; nil if a reference cannot be written from its key alone.
    private static func write(_ request: SaveRequest, permanent: InsertedIDs, layout: StoreLayout) -> ChangeSetWriter? {
        let resolve = permanent.resolve
        let insertedIDs = permanent.permanentIDs
        var writer = ChangeSetWriter(capacity: request.inserts.count * ChangeRecorder.bytesPerInsert, author: request.author)
        var plans = PlanCache(layout: layout)
        for index in insertedIDs.indices {  // (by index: a `for … in` would copy each insert)
            let id = insertedIDs[index]
            guard let plan = plans.plan(for: id.entityName), let key = id.primaryKey,
                  ChangeRecorder.writeInsert(request.inserts[index], key: key, plan: plan, resolve: resolve, keysAreURIs: true,
                                             plans: &plans, into: &writer, uri: { _ in nil }) else { return nil }
        }
        return writer
    }
}
