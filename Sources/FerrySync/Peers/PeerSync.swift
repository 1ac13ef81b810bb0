import Foundation
import FerryStore

/// What one sync round with one peer did.
public struct PeerSyncResult: Sendable, Equatable {
    /// The peer's name.
    public var peer: String
    /// What this store did with the change sets it pulled.
    public var pulled = ApplyReport()
    /// What the peer did with the change sets pushed to it.
    public var pushed = ApplyReport()
    /// Why the round stopped early, if it did (what was done before stays done).
    public var error: PeerError?
    /// Which half of the round ``error`` stopped: the pull, or the push.
    public var failedHalf: Half?
    /// The peer's version vector as last seen in the push (nil when the round did not push).
    public var peerVector: VersionVector?
    /// The peer's store UUID, once a round has asked the peer for its state.
    public var peerStore: UUID?
    /// The version hash of the peer's model, once a round has asked the peer for its state.
    public var peerModel: String?
    /// Whether the peer said it is a relay, once a round has asked the peer for its state.
    public var peerIsRelay: Bool?
    /// Per origin, the last change set the pull received from the peer (so the peer holds it, whether
    /// or not this store could apply it): what a later push need not send back.
    public var pulledThrough: VersionVector = [:]
    /// When the round ended.
    public var finished = Date()

    /// Creates an empty result for `peer`.
    public init(peer: String) { self.peer = peer }

    /// A half of a sync round.
    public enum Half: String, Sendable {
        /// Taking in what the peer has.
        case pull
        /// Sending what the peer lacks.
        case push
    }

    /// One line for a person: counts, or the error (as ``SyncNowAnswer/Peer/summary``).
    public var summary: String { SyncNowAnswer.Peer(self).summary }
}

/// One sync round between this store and one peer: pull what the peer has
/// that this store lacks, then push what the peer lacks, in batches.
///
/// Each batch is applied change set by change set in short transactions, and
/// what to send is computed from the receiver's version vector each time, so a
/// round cut off at any point (a killed process, a dropped connection) resumes
/// where it stopped and applies nothing twice. Nothing is sent back to its
/// origin: the peer's own change sets are covered by its vector.
public struct PeerSync: Sendable {
    /// The peer's name (for results and logs).
    public let name: String
    /// The local side.
    public let endpoint: ReplicationEndpoint
    /// The peer.
    public let client: PeerClient
    /// Change sets per request.
    public let batchSize: Int
    /// Most bytes of change sets in one push (a single larger change set still goes alone).
    static let requestBytes = 4 << 20

    /// A round runner for one peer.
    public init(name: String, endpoint: ReplicationEndpoint, client: PeerClient, batchSize: Int) {
        self.name = name
        self.endpoint = endpoint
        self.client = client
        self.batchSize = max(1, batchSize)
    }

    /// Pulls, then pushes; `progress` hears about each batch.
    ///
    /// `known` is the peer's store and vector as a recent round saw them: a push then starts
    /// from that vector instead of asking the peer for its state (one request less on the path
    /// of every save). A stale vector costs at most duplicates the peer counts and drops; a
    /// vector the peer went back from (a store restored from a backup) is corrected by the next
    /// round without one, which asks.
    ///
    /// `prefetched`: the peer's first batch when it is already here (a relay's long poll answered with
    /// it), so the pull applies it without asking again.
    public func run(pull: Bool = true, push: Bool = true, known: (store: UUID, vector: VersionVector)? = nil,
                    prefetched: [String]? = nil, progress: @Sendable (String) -> Void = { _ in }) async -> PeerSyncResult {
        var result = PeerSyncResult(peer: name)
        result.peerStore = known?.store
        if pull {
            do {
                try await self.pull(into: &result, prefetched: prefetched, progress: progress)
            } catch {
                result.error = Self.peerError(error)
                result.failedHalf = .pull
            }
        }
        // A pull the peer refused (or could not answer) does not keep this store's own change sets
        // from it: the push goes on, unless the peer cannot be reached or refused the token.
        if push, result.error.map(Self.stillPushes) ?? true {
            do {
                try await self.push(into: &result, startingFrom: known?.vector, progress: progress)
            } catch where result.error == nil {
                result.error = Self.peerError(error)
                result.failedHalf = .push
            } catch {
                // (The pull's error is the round's.)
            }
        }
        result.finished = Date()
        return result
    }

    private static func peerError(_ error: any Error) -> PeerError {
        (error as? PeerError) ?? .badAnswer("\(error)", cause: error)
    }

    /// Whether a push is still worth trying after a pull failed this way.
    private static func stillPushes(after error: PeerError) -> Bool {
        switch error {
        case .notListening, .unreachable, .unauthorized: false
        case .failed, .badAnswer, .localStore, .changeSetTooLarge: true
        }
    }

    private func pull(into result: inout PeerSyncResult, prefetched: [String]?, progress: @Sendable (String) -> Void) async throws {
        var vector = try await endpoint.vector()
        var batch: (lines: [String], checked: ReplayEngine.CheckedBatch)
        if let prefetched {
            batch = (prefetched, try await checked(prefetched))
        } else {
            batch = try await fetch(after: vector)
        }
        while !Task.isCancelled, !batch.lines.isEmpty {
            // Ask for the next batch, and check it, while this one is applied, after the vector the store
            // should have then; it is used only if the store reports exactly that vector afterwards.
            let forecast = VectorForecast.vector(vector, takingIn: batch.lines)
            let next = forecast.map { expected in
                Task { [self] in try await fetch(after: expected) }
            }
            if let received = VectorForecast.vector(result.pulledThrough, takingIn: batch.lines) { result.pulledThrough = received }
            let report: ApplyReport
            do {
                report = try await endpoint.apply(batch.checked)
            } catch where error is ReplayError || error is HistoryError {
                // Malformed, or past this store's tombstone horizon: nothing was taken in.
                next?.cancel()
                throw PeerError.badAnswer("the change sets it sent were refused here: \(error)", cause: error)
            } catch {
                next?.cancel()
                let failure = StoreFailure(error)
                throw PeerError.localStore(StoreFailure("could not take the change sets: \(failure.message)", cause: failure.cause ?? failure,
                                                        isRetryable: failure.isRetryable))
            }
            result.pulled.add(report)
            progress("\(name): pulled \(batch.lines.count) change sets (\(report.applied) applied)")
            // The peer may answer fewer than asked (it bounds an answer's bytes): only an empty
            // answer ends the pull, or one with nothing new (only held sets), which cannot progress.
            if report.applied + report.quarantined == 0 {
                next?.cancel()
                return
            }
            vector = report.vector
            if let next, forecast == vector {
                // (An unstructured task does not hear its awaiter's cancellation: pass it on, so a
                // daemon stopping does not wait for the prefetch to run into its request timeout.)
                batch = try await withTaskCancellationHandler { try await next.value } onCancel: { next.cancel() }
            } else {
                next?.cancel()
                batch = try await fetch(after: vector)
            }
        }
    }

    /// The peer's next batch after `vector`, checked against this store's model
    /// (a bad line refuses the whole batch before anything is applied).
    private func fetch(after vector: VersionVector) async throws -> (lines: [String], checked: ReplayEngine.CheckedBatch) {
        let lines = try await client.pull(after: vector, limit: batchSize, store: endpoint.storeIdentifier)
        return (lines, try await checked(lines))
    }

    /// `lines` from the peer, checked against this store's model and trust.
    private func checked(_ lines: [String]) async throws -> ReplayEngine.CheckedBatch {
        do {
            return try await endpoint.check(lines: lines)
        } catch ReplayError.untrusted(_, let refusal) where refusal.mayBeLearned && endpoint.trust.shouldAskPeers() {
            // A key not known yet (the peer's own, first seen; or a rotation): ask the peer, then check once more.
            try endpoint.learnKeys(from: try await client.state(), peer: name)
            do {
                return try await endpoint.check(lines: lines)
            } catch {
                throw refused(error)
            }
        } catch {
            throw refused(error)
        }
    }

    /// The round's error for a batch refused here (an untrusted change set is told to the endpoint's observer).
    private func refused(_ error: ReplayError) -> PeerError {
        if case .untrusted(_, let refusal) = error { endpoint.noteRefusal(refusal, via: "pull") }
        return PeerError.badAnswer("the change sets it sent were refused here: \(error)", cause: error)
    }

    private func push(into result: inout PeerSyncResult, startingFrom known: VersionVector?,
                      progress: @Sendable (String) -> Void) async throws {
        // After each batch the peer's answer carries its new vector, so only the first batch
        // may need to ask for it.
        var peerVector = known
        var offeredKeys = false
        // Most bytes per request: halved, for the rest of the round, each time the peer refuses a request
        // of several change sets as too large (a peer whose server.max_body_bytes is under ``requestBytes``).
        var requestBytes = Self.requestBytes
        while !Task.isCancelled {
            let remote: VersionVector
            if let peerVector {
                remote = peerVector
            } else {
                let state = try await client.state()
                remote = state.vector
                result.peerStore = state.store
                result.peerModel = state.modelHash
                result.peerIsRelay = state.isRelay
            }
            result.peerVector = remote
            // A store has every change set of its own: none goes back to it, however old the vector.
            var query = remote
            if let store = result.peerStore { query[store] = Int64.max }
            // A request's body stays bounded (the peer refuses large ones with 413): at least one line, and
            // only what goes is read (reading `batchSize` lines to send a few read a backlog of large
            // change sets whole on every round).
            let lines = try await endpoint.lines(after: query, limit: batchSize, maximumBytes: requestBytes)
            guard !lines.isEmpty else { return }
            let report: ApplyReport
            do {
                report = try await push(lines, offeringKeys: !offeredKeys)
            } catch PeerError.failed(status: 413, let message) {
                // Alone, it cannot be sent in smaller requests: say what would let it through.
                guard lines.count > 1 else { throw PeerError.changeSetTooLarge(bytes: lines[0].byteCount, message: message) }
                // Several: send fewer per request, as the peer asks.
                requestBytes = max(1, lines.reduce(0) { $0 + $1.byteCount + 1 } / 2)
                progress("\(name): the peer refused \(lines.count) change sets in one request as too large; sending at most \(requestBytes) bytes per request")
                continue
            }
            offeredKeys = true
            result.pushed.add(report)
            result.peerVector = report.vector
            peerVector = report.vector
            progress("\(name): pushed \(lines.count) change sets (\(report.applied) applied)")
            if report.applied + report.quarantined == 0 { return }
        }
    }
}

extension PeerSync {
    /// Pushes `lines`. A relay that refuses them as untrusted (422) may not know a key of this store's yet
    /// (a rotation since its configuration was written): with `offeringKeys`, the store's keys are offered
    /// to it (it takes the rotations a key it trusts endorsed) and the push is sent once more.
    fileprivate func push(_ lines: [ChangeSetPage.Line], offeringKeys: Bool) async throws -> ApplyReport {
        let refusal: PeerError
        do {
            return try await client.push(lines)
        } catch {
            refusal = error
        }
        guard offeringKeys, case .failed(status: 422, _) = refusal, (try? await client.state())?.isRelay == true else { throw refusal }
        try await client.offerKeys(try await endpoint.state().keys)
        return try await client.push(lines)
    }
}

extension ApplyReport {
    /// Adds another report's counts (keeping the later vector).
    mutating func add(_ other: ApplyReport) {
        applied += other.applied
        duplicate += other.duplicate
        waiting += other.waiting
        quarantined += other.quarantined
        vector = other.vector
    }
}
