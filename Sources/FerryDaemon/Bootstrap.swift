import Foundation
import Logging
import NIOPosix
import FerryModel
import FerryStore
import FerrySQLite
import FerrySync

/// Starting the daemon's store again from a peer's snapshot, when the peer answers 410: the
/// change sets this store lacks were purged there, or this store is past the peer's tombstone
/// horizon (docs/SYNC.md, "Snapshots").
///
/// It goes in two steps. ``prepare(from:peer:storePath:model:)`` runs while the daemon serves:
/// it downloads the snapshot beside the store and installs it (checked, with a UUID of its own).
/// ``complete(_:storePath:model:logger:)`` runs once the daemon's services have stopped and the
/// store is closed: it carries over every change set the old store holds that the snapshot lacks
/// (its own saves no peer has yet, and any others), keeps the old file as
/// `STORE.before-bootstrap-DATE`, and moves the new one into place. Nothing is lost: a change set
/// the new store cannot apply is kept in it, quarantined and listed, and the old file stays.
enum Bootstrap {
    /// A snapshot installed beside the store, waiting for the daemon to stop.
    struct Prepared: Sendable {
        /// The peer it came from.
        let peer: String
        /// The installed snapshot.
        let path: String
        /// What the installation made.
        let installed: SQLiteStore.InstalledSnapshot
    }

    /// What a completed bootstrap did.
    struct Report: Sendable, CustomStringConvertible {
        let peer: String
        let identifier: UUID
        /// Change sets carried over from the old store and applied (or held, waiting for others).
        let carried: Int
        /// Change sets carried over that the new store refused to apply, kept quarantined.
        let quarantined: Int
        /// Where the old store's file now is.
        let previousFile: String

        var description: String {
            "the store started again from a snapshot of \(peer) as \(identifier.uuidString); carried over \(carried) change sets "
                + "it lacked\(quarantined > 0 ? " (\(quarantined) of them quarantined: see ferry conflicts list)" : ""); the old file is \(previousFile)"
        }
    }

    /// Downloads `peer`'s snapshot through `client` and installs it beside `storePath`.
    static func prepare(from client: PeerClient, peer: String, storePath: String, model: ManagedObjectModel,
                        earlierModels: [ManagedObjectModel] = []) async throws -> Prepared {
        let path = "\(storePath).bootstrap-\(UUID().uuidString)"
        do {
            try await client.downloadSnapshot(to: path)
            // (On NIO's thread pool: checking and installing a large snapshot takes a while, and the
            // daemon goes on serving meanwhile on Swift's shared pool.)
            let installed = try await NIOThreadPool.singleton.runIfActive {
                try SQLiteStore.installSnapshot(at: path, model: model, earlierModels: earlierModels)
            }
            return Prepared(peer: peer, path: path, installed: installed)
        } catch {
            SQLiteStore.removeFiles(at: path)
            throw error
        }
    }

    /// Carries the old store's change sets over into the prepared one and swaps the files. The
    /// daemon's store must be closed. On failure the old store stays in place, untouched.
    /// `earlierModels`: the model's other versions, so that the old store's change sets made with one
    /// of them are carried over (translated) too.
    static func complete(_ prepared: Prepared, storePath: String, model: ManagedObjectModel, earlierModels: [ManagedObjectModel] = [],
                         logger: Logger) throws -> Report {
        var carried = 0
        var quarantined = 0
        do {
            let old = try SQLiteStore(path: storePath, model: model, options: .init(createIfMissing: false, earlierModels: earlierModels))
            let new = try SQLiteStore(path: prepared.path, model: model, options: .init(createIfMissing: false, earlierModels: old.earlierModels))
            // Everything the old store holds and the snapshot lacks: its own saves no peer has yet,
            // change sets of others it took in since, and those it holds back or quarantined.
            var lines = try old.changeSetLines(after: new.historyState().vector, limit: nil)
            lines += try old.heldChangeSets().map(\.body)
            let engine = try ReplayEngine(store: new)
            do {
                carried = Self.taken(try engine.apply(lines: lines))
            } catch let refusal as HistoryError {
                // Change sets the snapshot's horizon refuses (they do not know deletes the peer forgot):
                // each kept, quarantined with the reason, as the store keeps any change set it cannot apply.
                logger.warning("carrying change sets over into the snapshot: \(refusal); applying them one by one")
                for line in lines {
                    do {
                        carried += Self.taken(try engine.apply(lines: [line]))
                    } catch let error as HistoryError {
                        let reason = "carried over from this store's file before it started again from a snapshot of \(prepared.peer), " +
                            "and refused there: \(error)"
                        switch try ChangeSetCodec.decode(line, model: model, versionHash: new.modelVersionHash) {
                        case .changeSet(let changeSet):
                            try new.recordReceived(changeSet, body: line, as: ReceivedRecord(quarantineReason: reason))
                        case .otherModel(let origin, let sequence, _, _):
                            // Made with another model version: kept as it came, held with the reason.
                            try new.hold(HeldChangeSet(origin: origin, sequence: sequence, reason: reason, body: line))
                        }
                        quarantined += 1
                    }
                }
            }
            try old.checkpoint(truncating: true)
            try new.checkpoint(truncating: true)
            try old.close()
            try new.close()
        }
        // Both stores are closed and fully checkpointed here. (A process that opens the store's path
        // meanwhile and meets the rename between the file and its log notices and opens the new file:
        // SQLiteStore.openPool.) The old file gets its second name first
        // (a hard link: the store's path never goes missing, so nothing opening it meanwhile creates an
        // empty store there), then its emptied log goes, then the new file replaces it in one rename.
        let previous = "\(storePath).before-bootstrap-\(ISO8601DateFormatter().string(from: Date()).replacingOccurrences(of: ":", with: "-"))"
        guard link(storePath, previous) == 0 else {
            throw DaemonError(.bootstrap, description: "cannot keep the old store as \(previous): \(String(cString: strerror(errno)))")
        }
        for suffix in ["-wal", "-shm"] { try? FileManager.default.removeItem(atPath: storePath + suffix) }
        guard rename(prepared.path, storePath) == 0 else {
            let reason = String(cString: strerror(errno))
            try? FileManager.default.removeItem(atPath: previous)
            throw DaemonError(.bootstrap, description: "cannot move the new store from \(prepared.path) to \(storePath): \(reason)")
        }
        SQLiteStore.removeFiles(at: prepared.path)
        return Report(peer: prepared.peer, identifier: prepared.installed.identifier, carried: carried, quarantined: quarantined, previousFile: previous)
    }

    /// Change sets a batch took in (applied, held for others, or quarantined by the engine).
    private static func taken(_ report: ApplyReport) -> Int {
        report.applied + report.waiting + report.quarantined
    }

}

/// One run of the daemon's services hears here that a peer answered 410, prepares the snapshot
/// while the daemon goes on serving, and then stops the services so that ``Daemon/run(_:logger:metrics:onListening:)``
/// can complete the bootstrap and start them again on the new store.
actor BootstrapRequest {
    private let storePath: String
    private let model: ManagedObjectModel
    private let earlierModels: [ManagedObjectModel]
    private let logger: Logger
    private var preparing = false
    private var prepared: Bootstrap.Prepared?
    private var stopServices: (@Sendable () async -> Void)?

    init(storePath: String, model: ManagedObjectModel, earlierModels: [ManagedObjectModel] = [], logger: Logger) {
        self.storePath = storePath
        self.model = model
        self.earlierModels = earlierModels
        self.logger = logger
    }

    /// What stops the daemon's services once a snapshot is ready.
    func whenReady(stop: @escaping @Sendable () async -> Void) {
        stopServices = stop
    }

    /// `peer` answered 410 for `reason`: take its snapshot (once; later answers wait for it).
    func peerAnsweredGone(_ peer: String, client: PeerClient, reason: String) async {
        guard prepared == nil, !preparing else { return }
        preparing = true
        defer { preparing = false }
        logger.warning("\(peer) answered 410 (\(reason)); starting this store again from a snapshot of \(peer) (sync.bootstrap)")
        do {
            let ready = try await Bootstrap.prepare(from: client, peer: peer, storePath: storePath, model: model, earlierModels: earlierModels)
            prepared = ready
            let message = "snapshot of \(peer) installed (\(ready.installed.vector.values.reduce(0, +)) change sets taken in); " +
                "restarting the daemon's services on it"
            logger.notice("\(message)")
            await stopServices?()
        } catch {
            logger.error("could not take a snapshot of \(peer) to start again from: \(error); the store stays as it is, and the next 410 tries again")
        }
    }

    /// The prepared snapshot, if any (handed over once).
    func take() -> Bootstrap.Prepared? {
        defer { prepared = nil }
        return prepared
    }
}
