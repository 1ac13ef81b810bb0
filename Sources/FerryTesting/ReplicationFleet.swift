import Foundation
import Logging
import FerryModel
import FerryStore
import FerrySQLite
import FerrySync
import FerryServer
import FerryDaemon

/// Replicas of one model in this process, replicating as daemons do, for an application's own
/// tests of its model and code under replication.
///
/// Each replica is a store (in memory, or a SQLite file in a folder the fleet owns) with a
/// container to write through, a server of the replication API and a sync coordinator: the
/// daemon's own parts (`SyncCoordinator`, the routes of `ferry run`), joined by an
/// ``InMemoryTransport`` instead of sockets, and reckoning time on one ``ManualClock``. Every
/// replica reaches every other. Nothing happens by itself: ``sync(_:)`` runs a round,
/// ``syncUntilQuiet(maximumPasses:)`` runs rounds until nothing moves, ``partition(_:from:)`` and
/// ``heal()`` cut and mend links, and ``checkConverged(_:)`` says where two replicas differ.
///
/// ```swift
/// let fleet = try ReplicationFleet(model: model, replicas: ["phone", "laptop"])
/// let phone = fleet.container("phone").newContext()
/// let note = try phone.insert(entityName: "Note")
/// try note.setValue("hello", forKey: "text")
/// try phone.save()
/// try await fleet.syncUntilQuiet()
/// try fleet.checkConverged()
/// ```
public final class ReplicationFleet: Sendable {
    /// Where the fleet's replicas keep their objects.
    public enum Storage: Sendable {
        /// In memory (``InMemoryStore``): quickest.
        case memory
        /// A SQLite file per replica (`SQLiteStore`, as `ferry run` keeps it), in a folder the
        /// fleet makes and removes when it goes.
        case sqlite
    }

    /// One replica of the fleet.
    public struct Replica: Sendable {
        /// Its name: how the others reach it and how the fleet's methods name it.
        public let name: String
        /// Its store.
        public let store: any ReplicaStore
        /// A container on its store, to read and write as the application does.
        public let container: PersistentContainer
        /// Its runtime of rounds with the others (the daemon's).
        public let coordinator: SyncCoordinator
        /// The links from this replica to the others (cut by a partition).
        let transport: InMemoryTransport
    }

    /// The replicas, in the order they were named.
    public let replicas: [Replica]
    /// The clock every replica reckons rounds and backoffs in.
    public let clock: ManualClock
    private let folder: FleetFolder?

    /// A fleet of replicas named `names` (at least two, distinct, each of letters, digits and `-`:
    /// a replica's name is how the others reach it) of `model`, on `storage`.
    /// - Throws: ``FleetError/badNames(_:)`` for fewer than two names, a repeated one or one of other
    ///   characters, and a store's error when one cannot be made.
    public init(model: ManagedObjectModel, replicas names: [String], storage: Storage = .memory) throws {
        let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-")
        guard names.count >= 2, Set(names).count == names.count,
              names.allSatisfy({ !$0.isEmpty && $0.allSatisfy(allowed.contains) }) else { throw FleetError.badNames(names) }
        let clock = ManualClock()
        let folder = storage == .sqlite ? try FleetFolder() : nil
        let token = "ferry-testing-fleet-token"
        var stores: [(name: String, store: any ReplicaStore)] = []
        for name in names {
            switch storage {
            case .memory:
                stores.append((name, InMemoryStore(model: model)))
            case .sqlite:
                let path = (folder?.path ?? NSTemporaryDirectory()) + "/\(name).sqlite"
                stores.append((name, try SQLiteStore(path: path, model: model)))
            }
        }
        // One endpoint per store, as in a daemon: its server and its rounds share it.
        let endpoints = try stores.map { try ReplicationEndpoint(store: $0.store) }
        let servers = endpoints.map { FerryAPI(endpoint: $0, tokens: AccessTokens([(token, .peer)]), maxBodyBytes: 64 << 20) }
        var replicas: [Replica] = []
        for (index, (name, store)) in stores.enumerated() {
            let transport = InMemoryTransport()
            for (otherIndex, other) in names.enumerated() where other != name { transport.serve(servers[otherIndex].router(), at: other) }
            let peers = names.filter { $0 != name }.map { other in
                (name: other, url: InMemoryTransport.url(of: other), token: token, trust: PeerTrust.systemStore)
            }
            var logger = Logger(label: "ferry.testing.\(name)")
            logger.logLevel = .error
            let coordinator = SyncCoordinator(endpoint: endpoints[index], peers: peers, batchSize: 100,
                                              requestTimeout: 30, logger: logger, clock: clock, transport: transport)
            replicas.append(Replica(name: name, store: store, container: try PersistentContainer(store: store),
                                    coordinator: coordinator, transport: transport))
        }
        self.replicas = replicas
        self.clock = clock
        self.folder = folder
    }

    /// The replica named `name`.
    /// - Precondition: the fleet has one of that name.
    public subscript(_ name: String) -> Replica {
        guard let replica = replicas.first(where: { $0.name == name }) else {
            preconditionFailure("the fleet has no replica named \(name); it has \(replicas.map(\.name))")
        }
        return replica
    }

    /// The container of the replica named `name`.
    public func container(_ name: String) -> PersistentContainer { self[name].container }

    /// Cuts every link between a replica of `side` and one of `otherSide`, both ways: their rounds
    /// with each other fail as with an unreachable peer until ``heal()``.
    public func partition(_ side: [String], from otherSide: [String]) {
        for name in side {
            for other in otherSide {
                self[name].transport.setCut(true, host: other)
                self[other].transport.setCut(true, host: name)
            }
        }
    }

    /// Mends every link a partition cut.
    public func heal() {
        for replica in replicas {
            for other in replicas where other.name != replica.name { replica.transport.setCut(false, host: other.name) }
        }
    }

    /// Whether the link from `name` to `other` is cut.
    public func isCut(from name: String, to other: String) -> Bool {
        self[name].transport.isCut(host: other)
    }

    /// One round (pull, then push) of the replica named `name` with each replica it reaches; of
    /// every replica, one after another, when nil. A round with a replica cut off fails, as it would
    /// with a daemon whose peer is unreachable, and is in the results with its error.
    /// - Precondition: the fleet has a replica named `name`, when one is given.
    @discardableResult
    public func sync(_ name: String? = nil) async -> [PeerSyncResult] {
        if let name { _ = self[name] }
        var results: [PeerSyncResult] = []
        for replica in replicas where name == nil || replica.name == name {
            results += await replica.coordinator.round()
        }
        return results
    }

    /// Rounds of every replica until a whole pass moves no change set, at most `maximumPasses`.
    /// Rounds across a partition fail and are not counted as movement.
    /// - Returns: the passes that moved something.
    /// - Throws: ``FleetError/roundFailed(replica:peer:error:)`` when a round between two replicas that
    ///   are not cut off fails, ``FleetError/notQuiet(passes:)`` when change sets still moved in the last pass.
    @discardableResult
    public func syncUntilQuiet(maximumPasses: Int = 20) async throws(FleetError) -> Int {
        for pass in 0..<maximumPasses {
            var moved = 0
            for replica in replicas {
                for result in await replica.coordinator.round() {
                    if let error = result.error {
                        guard isCut(from: replica.name, to: result.peer) else {
                            throw .roundFailed(replica: replica.name, peer: result.peer, error: error)
                        }
                        continue
                    }
                    moved += result.pulled.applied + result.pushed.applied
                }
            }
            if moved == 0 { return pass }
        }
        throw .notQuiet(passes: maximumPasses)
    }

    /// The canonical dump of a replica's objects (`ferry dump`'s lines: one per object, by origin URI).
    public func dump(_ name: String) throws -> [String] {
        try StoreDump(store: self[name].store).entries().map(\.text)
    }

    /// Checks that the replicas named `names` (every replica when empty) hold the same objects with
    /// the same values, comparing each with the first.
    /// - Throws: ``ConvergenceFailure`` naming the first object (in URI order) whose lines differ.
    public func checkConverged(_ names: [String] = []) throws {
        let compared = names.isEmpty ? replicas.map(\.name) : names
        guard let first = compared.first else { return }
        func byURI(_ name: String) throws -> [String: String] {
            Dictionary(try StoreDump(store: self[name].store).entries().map { ($0.uri, $0.text) }, uniquingKeysWith: { first, _ in first })
        }
        let reference = try byURI(first)
        for other in compared.dropFirst() {
            if let failure = ConvergenceFailure(reference: (first, reference), other: (other, try byURI(other))) { throw failure }
        }
    }
}

/// What went wrong with a fleet's rounds.
public enum FleetError: FerryError, Sendable {
    /// A fleet needs at least two replicas, each named once.
    case badNames([String])
    /// A round between two replicas that are not cut off failed.
    case roundFailed(replica: String, peer: String, error: PeerError)
    /// Change sets still moved after this many passes.
    case notQuiet(passes: Int)

    public var description: String {
        switch self {
        case .badNames(let names):
            "a fleet needs at least two replicas with distinct names of letters, digits and '-'; got \(names)"
        case .roundFailed(let replica, let peer, let error):
            "\(replica)'s round with \(peer) failed, and no partition cuts them apart: \(error)"
        case .notQuiet(let passes):
            "change sets still moved after \(passes) passes of rounds: raise maximumPasses, or look for a replica that keeps writing"
        }
    }

    /// The kinds of ``FleetError``: its cases.
    public enum Code: String, Hashable, Sendable {
        /// ``FleetError/badNames(_:)``: fewer than two replicas, a name repeated or not of letters, digits and '-'.
        case badNames
        /// ``FleetError/roundFailed(replica:peer:error:)``: a round between replicas that are not cut off failed.
        case roundFailed
        /// ``FleetError/notQuiet(passes:)``: change sets still moved after the last pass.
        case notQuiet
    }

    /// The case, without its details.
    public var code: Code {
        switch self {
        case .badNames: .badNames
        case .roundFailed: .roundFailed
        case .notQuiet: .notQuiet
        }
    }

    /// The peer error of a failed round.
    public var cause: (any Error)? {
        if case .roundFailed(_, _, let error) = self { return error }
        return nil
    }

    /// A failed round whose peer error may pass by itself (``PeerError/isRetryable``).
    public var isRetryable: Bool {
        if case .roundFailed(_, _, let error) = self { return error.isRetryable }
        return false
    }
}

/// Two replicas that hold different objects: the first object, in URI order, whose dump lines differ.
public struct ConvergenceFailure: FerryError, Sendable {
    /// The kinds of ``ConvergenceFailure``.
    public enum Code: String, Hashable, Sendable {
        /// Two replicas hold different objects (or different values of one).
        case diverged
    }

    /// The replica compared against, and the one that differs from it.
    public let replicas: (reference: String, other: String)
    /// The origin URI of the first object that differs.
    public let uri: String
    /// That object's dump line on each replica; nil where the replica does not hold it.
    public let lines: (reference: String?, other: String?)
    /// How many objects differ in all.
    public let differing: Int

    init?(reference: (name: String, lines: [String: String]), other: (name: String, lines: [String: String])) {
        let (mine, theirs) = (reference.lines, other.lines)
        let differ = Set(mine.keys).union(theirs.keys).filter { mine[$0] != theirs[$0] }
        guard let first = differ.min(by: { $0.utf8.lexicographicallyPrecedes($1.utf8) }) else { return nil }
        replicas = (reference.name, other.name)
        uri = first
        lines = (mine[first], theirs[first])
        differing = differ.count
    }

    /// Always ``Code/diverged``.
    public var code: Code { .diverged }

    public var description: String {
        "\(replicas.other) differs from \(replicas.reference) at \(differing) object(s); the first, \(uri):\n"
            + "  \(replicas.reference): \(lines.reference ?? "(absent)")\n"
            + "  \(replicas.other): \(lines.other ?? "(absent)")"
    }
}

/// A folder for a fleet's SQLite files, removed with the fleet.
private final class FleetFolder: Sendable {
    let path: String

    init() throws {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("ferry-fleet-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        path = url.path
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }
}
