import Foundation
import Synchronization
import Hummingbird
import Logging
import Metrics
import NIOCore
import CompressNIO
import Prometheus
import FerryModel
import FerryStore
import FerrySync
import FerryServer

/// The replication API of a relay (docs/PROTOCOL.md, docs/FLEET.md): what a daemon's API serves
/// to its peers, from change sets in PostgreSQL instead of a store.
///
/// - `GET /healthz`: `{"status":"ok"}`, or 503 while the database cannot be reached;
/// - `GET /v1/state`: the database's UUID, no model (`""`), the vector, the keys pinned here, `"relay":true`;
/// - `POST /v1/changesets/pull` (`{"after","limit","wait_ms","store"}`) and `GET /v1/changesets`: what the
///   caller lacks, in causal order; with `wait_ms`, held until something arrives (a long poll);
/// - `POST /v1/changesets`: change sets in; each checked (envelope and signature) before any is stored;
///   a body past `server.max_body_bytes` is taken when it holds one change set alone, within
///   `server.max_change_set_bytes`, one such body at a time;
/// - `GET /v1/snapshot` / `PUT /v1/snapshot`: the newest snapshot a daemon uploaded (404 until one was);
/// - `PUT /v1/keys`: a daemon's keys, of which the endorsed rotations are taken;
/// - `GET /v1/status`: what the relay holds; `GET /metrics`.
struct RelayAPI: Sendable {
    let database: RelayDatabase
    let fleet: UUID
    let tokens: AccessTokens
    let trust: RelayTrust
    let signal: ChangeSignal
    let maxBodyBytes: Int
    let bodySlots: BodySlots
    /// Pushes of one change set larger than `maxBodyBytes`: up to `server.max_change_set_bytes`, one at a time.
    let oversize: OversizeBodies
    let metrics: PrometheusCollectorRegistry?
    let purges: PurgeRecord
    let pulls: PullRecord

    /// The longest a long poll may ask to wait (a client asking more waits this long).
    static let longestWait: Duration = .seconds(60)

    /// The routes (``ReplicationAPI`` over the relay's database).
    func router() -> Router<FerryRequestContext> {
        ReplicationAPI(backend: self, tokens: tokens, metrics: metrics).router()
    }
}

/// The relay's answers to the replication API's calls, from its database.
extension RelayAPI: ReplicationBackend {
    var optionalRoutes: Set<ReplicationRoute> { [.snapshotUpload, .keyOffer] }

    func health() async -> Response {
        do {
            try await Self.withinDeadline { try await database.ping() }
            return Response.json(#"{"status":"ok"}"#)
        } catch {
            let body = JSONValue.sortedObject(["status": .string("database unavailable"),
                                               "reason": .string("the relay cannot reach its PostgreSQL database; its log says why")])
            return Response.json(body.text, status: .serviceUnavailable)
        }
    }

    func state() async throws -> Response {
        let vector = try await databaseWork("read the version vector") { try await database.vector() }
        let state = HistoryState(store: fleet, modelHash: "", vector: vector, keys: trust.published, isRelay: true)
        return Response.json(state.json)
    }

    func pull(_ query: PullRequest, request: Request, logger: Logger) async throws -> Response {
        let purged = try await purgedThrough()
        if let (origin, through) = purged.first(where: { query.after[$0.key, default: 0] < $0.value }) {
            throw APIError.gone("the change sets of \(origin.uuidString) up to \(through) were purged from this relay (retention), " +
                                "and the vector asks for some of them; " +
                                "start this store again from a daemon's snapshot (sync.bootstrap does it by itself from a daemon peer)")
        }
        if let store = query.store { pulls.note(store, query.after) }
        let wait = min(Duration.milliseconds(query.waitMilliseconds), Self.longestWait)
        let deadline = ContinuousClock.now + wait
        var answer: [RelayDatabase.StoredChangeSet] = []
        while true {
            let seen = signal.generation
            let candidates = try await databaseWork("read change sets") {
                try await database.changeSets(after: query.after, limit: query.limit, maxBytes: PullRoute.answerBytes)
            }
            answer = try await withTexts(RelayPull.causalOrder(candidates, after: query.after, maxBytes: PullRoute.answerBytes))
            let left = deadline - ContinuousClock.now
            if !answer.isEmpty || left <= .zero || signal.isClosed || Task.isCancelled { break }
            Gauge(label: "ferry_relay_long_polls").record(signal.waiting + 1)
            await signal.wait(beyond: seen, timeout: left)
            Gauge(label: "ferry_relay_long_polls").record(signal.waiting)
        }
        Counter(label: "ferry_relay_changesets_served_total").increment(by: answer.count)
        // (A change set in pieces is larger than an answer: it goes alone, ``RelayPull``.)
        if let large = answer.first, large.pieces > 0 {
            return piecewiseAnswer(large, gzip: PullRoute.acceptsGzip(request))
        }
        var buffer = ByteBuffer()
        for changeSet in answer {
            guard var line = changeSet.line else { continue }  // (withTexts: never)
            buffer.writeBuffer(&line)
            buffer.writeInteger(UInt8(ascii: "\n"))
        }
        var headers: HTTPFields = [.contentType: "application/x-ndjson"]
        if PullRoute.acceptsGzip(request), buffer.readableBytes >= 1024 {
            buffer = try buffer.compress(with: .gzip(configuration: PullRoute.answerCompression))
            headers[.contentEncoding] = "gzip"
        }
        return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: buffer))
    }

    /// `answer` up to its first change set whose text the page did not read (one that starts past an
    /// answer's bytes from the page's first, behind change sets this caller cannot take yet): those come
    /// in the next answer. The first always goes: its text is read now when the page did not read it.
    private func withTexts(_ answer: [RelayDatabase.StoredChangeSet]) async throws -> [RelayDatabase.StoredChangeSet] {
        guard let cut = answer.firstIndex(where: { $0.pieces == 0 && $0.line == nil }) else { return answer }
        guard cut == 0 else { return Array(answer[..<cut]) }
        var first = answer[0]
        let (origin, sequence) = (first.origin, first.sequence)
        first.line = try await databaseWork("read a change set") { try await database.line(of: origin, sequence: sequence) }
        // (Gone: retention dropped it meanwhile, and the caller's next pull hears so.)
        return first.line == nil ? [] : [first]
    }

    /// The answer of one change set stored in pieces, written a piece at a time, each read from the
    /// database as the one before is taken by the caller (and compressed as it goes, when the caller
    /// takes gzip): a slow puller holds a piece of it, not all of it. A piece that is gone (retention
    /// dropped the change set meanwhile) or cannot be read cuts the answer short; the caller sees a
    /// failed pull and asks again.
    private func piecewiseAnswer(_ changeSet: RelayDatabase.StoredChangeSet, gzip: Bool) -> Response {
        let database = self.database
        return StreamedAnswer.response(gzip: gzip) { send in
            for index in 0..<changeSet.pieces {
                let read = try await Self.withinDeadline {
                    try await database.piece(of: changeSet.origin, sequence: changeSet.sequence, index: index)
                }
                guard var piece = read else {
                    let message = "a pull answer was cut short: piece \(index) of change set \(changeSet.sequence) of \(changeSet.origin.uuidString) " +
                        "is gone (dropped by retention while it was sent)"
                    database.logger.warning("\(message)")
                    throw RelayError(.pieceGone, "piece \(index) of change set \(changeSet.sequence) of \(changeSet.origin.uuidString) is gone")
                }
                try await send(&piece)
            }
            var end = ByteBuffer(integer: UInt8(ascii: "\n"))
            try await send(&end)
        }
    }

    /// What retention dropped, read from the database at most every ``PurgedThrough/freshness``: on
    /// the path of every pull. (A purge by another relay is seen within that; meanwhile a caller asking
    /// for what went gets an empty answer, since nothing past a gap is served, and 410 at its next pull.)
    private func purgedThrough() async throws(APIError) -> VersionVector {
        if let fresh = purges.purgedThrough() { return fresh }
        let read = try await databaseWork("read what retention dropped") { try await database.purged() }
        purges.notePurgedThrough(read)
        return read
    }

    func push(_ request: Request, allowedOrigins: Set<UUID>?, logger: Logger) async throws -> Response {
        guard bodySlots.take() else {
            throw APIError.busy("this relay holds \(bodySlots.capacity) push bodies already (server.max_concurrent_bodies); send again shortly")
        }
        defer { bodySlots.give() }
        let (lines, tookOversizeSlot) = try await PushBodies.lines(of: request, maxBodyBytes: maxBodyBytes, oversize: oversize)
        defer { if tookOversizeSlot { oversize.slots.give() } }
        try PushBodies.check(lines, pushableBy: allowedOrigins, logger: logger)
        let entries: [(envelope: ChangeSetEnvelope, line: String)]
        do {
            entries = try await RelayIngest.check(lines, verifier: trust.verifier)
        } catch {
            switch error {
            case .malformed:
                throw APIError.badRequest(error.message, cause: error)
            case .untrusted(_, let refusal):
                Counter(label: "ferry_changesets_refused_total", dimensions: [("reason", refusal.reason.rawValue), ("via", "relay")]).increment()
                logger.warning("refused an untrusted change set", metadata: [
                    "origin": .string(refusal.origin.uuidString), "seq": .stringConvertible(refusal.sequence), "reason": .string(refusal.reason.rawValue),
                ])
                throw APIError.untrusted(error.message, cause: error)
            }
        }
        let result = try await databaseWork("store the change sets") { try await database.store(entries) }
        if result.stored > 0 { signal.bump() }
        Counter(label: "ferry_relay_changesets_stored_total").increment(by: result.stored)
        Counter(label: "ferry_relay_objects_stored_total").increment(by: result.objects)
        Counter(label: "ferry_relay_changesets_duplicate_total").increment(by: result.duplicate)
        var report = ApplyReport()
        report.applied = result.stored
        report.duplicate = result.duplicate
        report.waiting = result.waiting
        report.vector = try await databaseWork("read the version vector") { try await database.vector() }
        return Response.json(report.json)
    }

    /// `GET /v1/snapshot`: the newest snapshot a daemon uploaded, streamed chunk by chunk as the SQLite
    /// file it is; 404 while none was.
    func snapshot() async throws -> Response {
        guard let newest = try await databaseWork("look for a snapshot", { try await database.newestSnapshot() }) else {
            throw APIError.notFound("no daemon has uploaded a snapshot to this relay yet (snapshot_upload_interval on a daemon's entry for the relay); " +
                                    "start the new store from a daemon's snapshot (ferry init --from-peer URL-OF-A-DAEMON), " +
                                    "or let it pull the whole history from the relay")
        }
        let source = self.database
        let body = ResponseBody(contentLength: Int(newest.size)) { writer in
            var index: Int32 = 0
            while let chunk = try await source.snapshotChunk(newest.id, index: index) {
                try await writer.write(chunk)
                index += 1
            }
            try await writer.finish(nil)
        }
        var headers: HTTPFields = [.contentType: "application/vnd.sqlite3"]
        if let name = HTTPFields.Element.Name("Ferry-Snapshot-Of") { headers[name] = newest.source.uuidString }
        return Response(status: .ok, headers: headers, body: body)
    }

    /// A key offer's body: `{"keys": [...]}`, as the `keys` of a state.
    struct KeyOffer: Decodable {
        var keys: [PublishedKey]
    }

    /// `PUT /v1/keys`: the keys a daemon holds (its state's `keys`). Every rotation endorsed by a key the
    /// relay trusts for that origin is taken, by every relay on the database; nothing else is (a key for an
    /// origin the relay knows no key of, or one without a valid endorsement, is counted as refused).
    func offerKeys(_ request: Request, logger: Logger) async throws -> Response {
        let body: ByteBuffer
        do {
            body = try await request.body.collect(upTo: PullRequest.maximumRequestBytes)
        } catch {
            throw APIError.contentTooLarge("a key offer takes at most \(PullRequest.maximumRequestBytes) bytes")
        }
        let offer: KeyOffer
        do {
            offer = try WireJSON.decode(KeyOffer.self, from: Data(buffer: body))
        } catch {
            throw APIError.badRequest("a key offer's body must be {\"keys\": [{\"origin\", \"key\", \"from\", \"endorsement\"}, …]}: \(error)", cause: error)
        }
        let (taken, refused) = trust.rotations(in: offer.keys)
        if !taken.isEmpty {
            try await databaseWork("record the keys") { try await database.recordKeys(taken) }
            try await databaseWork("read the keys") { try await trust.reload(from: database) }
            for key in taken {
                logger.notice("trusting a rotated key", metadata: ["origin": .string(key.origin.uuidString), "public_key": .string(key.publicKey),
                                                                 "from": .stringConvertible(key.firstSequence)])
            }
        }
        return Response.json(JSONValue.sortedObject(["learned": .integer(Int64(taken.count)), "refused": .integer(Int64(refused))]).text)
    }

    /// The largest snapshot a relay takes (a store of tens of millions of objects fits).
    static let maximumSnapshotBytes: Int64 = 64 << 30

    /// `PUT /v1/snapshot`: a daemon's snapshot of its store (`Ferry-Snapshot-Of: UUID`), stored in chunks
    /// as it arrives; once whole, it replaces the one before. A body that is not a SQLite file is refused.
    func takeSnapshot(_ request: Request, allowedOrigins: Set<UUID>?, logger: Logger) async throws -> Response {
        guard let name = HTTPFields.Element.Name("Ferry-Snapshot-Of"), let text = request.headers[name], let source = ObjectURIComponents.uuid(text) else {
            throw APIError.badRequest("a snapshot needs the header Ferry-Snapshot-Of: the UUID of the store it was taken of")
        }
        if let allowedOrigins, !allowedOrigins.contains(source) {
            Counter(label: "ferry_requests_forbidden_total", dimensions: [("reason", "origin")]).increment()
            throw APIError.forbidden("this token may push for \(allowedOrigins.map(\.uuidString).sorted().joined(separator: ", ")) only " +
                                     "(origins= in the tokens file), not upload a snapshot of \(source.uuidString)")
        }
        let id = try await databaseWork("start storing a snapshot") { try await database.beginSnapshot(of: source) }
        var size: Int64 = 0
        do {
            var pending = ByteBuffer()
            var index: Int32 = 0
            for try await var part in request.body {
                size += Int64(part.readableBytes)
                guard size <= Self.maximumSnapshotBytes else {
                    throw APIError.contentTooLarge("a snapshot takes at most \(Self.maximumSnapshotBytes) bytes")
                }
                pending.writeBuffer(&part)
                if index == 0, pending.readableBytes >= 16, pending.getString(at: pending.readerIndex, length: 15) != "SQLite format 3" {
                    throw APIError.badRequest("the body is not a SQLite file (a snapshot as GET /v1/snapshot of a daemon answers it)")
                }
                while pending.readableBytes >= Self.snapshotChunkBytes, let chunk = pending.readSlice(length: Self.snapshotChunkBytes) {
                    try await database.storeSnapshotChunk(id, index: index, data: chunk)
                    index += 1
                }
                pending.discardReadBytes()
            }
            guard size >= 16 else { throw APIError.badRequest("the body is not a SQLite file: \(size) bytes") }
            if pending.readableBytes > 0 { try await database.storeSnapshotChunk(id, index: index, data: pending) }
            try await database.completeSnapshot(id, size: size)
        } catch {
            try? await database.abandonSnapshot(id)
            if let error = error as? APIError { throw error }
            throw APIError.unavailable("this relay could not store the snapshot (\(String(describing: error).prefix(300))); send it again later", cause: error)
        }
        logger.info("stored a snapshot of store \(source.uuidString) (\(size) bytes) for new stores to start from")
        return Response.json(JSONValue.sortedObject(["stored": .integer(size), "of": .string(source.uuidString)]).text)
    }

    /// Bytes per row of `ferry_snapshot_chunks`.
    static let snapshotChunkBytes = 1 << 20

    func status(admin: Bool) async throws -> Response {
        let size = try await databaseWork("measure the database") { try await database.size() }
        let vector = try await databaseWork("read the version vector") { try await database.vector() }
        let purged = try await databaseWork("read what retention dropped") { try await database.purged() }
        var fields: [String: JSONValue] = [
            "relay": .bool(true), "store": .string(fleet.uuidString), "vector": ChangeSetCodec.vectorValue(vector),
            "change_sets": .integer(size.changeSets), "bytes": .integer(size.bytes), "origins": .integer(size.origins),
            "purged_through": ChangeSetCodec.vectorValue(purged), "long_polls": .integer(Int64(signal.waiting)),
        ]
        if let last = purges.last {
            fields["last_purge"] = .sortedObject(["at": .string(ISO8601DateFormatter().string(from: last.at)), "change_sets": .integer(Int64(last.count))])
        }
        if admin { fields["database"] = .string(database.place) }
        return Response.json(JSONValue.sortedObject(fields).text)
    }

    /// `work` against the database; a failure is 503 saying what could not be done (a peer tries again,
    /// or another relay of the fleet).
    private func databaseWork<Result: Sendable>(_ what: String, _ work: @escaping @Sendable () async throws -> Result) async throws(APIError) -> Result {
        do {
            return try await Self.withinDeadline(work)
        } catch {
            Counter(label: "ferry_relay_database_errors_total").increment()
            throw APIError.unavailable("this relay could not \(what) in its database (\(String(describing: error).prefix(300))); try again or another relay",
                                       cause: error)
        }
    }
}

extension RelayAPI {
    /// How long one piece of database work may take before the request is answered 503: while the
    /// database cannot be reached, the pool waits for a connection, and callers must hear it soon
    /// (a daemon then tries again, or another relay) rather than run into their own timeouts.
    static let databaseDeadline: Duration = .seconds(5)

    struct DatabaseTimeout: FerryError {
        /// The kinds of ``DatabaseTimeout``.
        enum Code: String, Hashable, Sendable {
            /// PostgreSQL did not answer within ``RelayAPI/databaseDeadline``.
            case timedOut
        }

        var code: Code { .timedOut }
        var description: String { "no answer from PostgreSQL within \(RelayAPI.databaseDeadline)" }
        /// Always: the database may answer in time once it can be reached again.
        var isRetryable: Bool { true }
    }

    /// `work`, or ``DatabaseTimeout`` (and `work` cancelled) after ``databaseDeadline``.
    static func withinDeadline<Result: Sendable>(_ work: @escaping @Sendable () async throws -> Result) async throws -> Result {
        try await withThrowingTaskGroup(of: Result.self) { group in
            group.addTask { try await work() }
            group.addTask {
                try await Task.sleep(for: databaseDeadline)
                throw DatabaseTimeout()
            }
            defer { group.cancelAll() }
            guard let first = try await group.next() else { throw DatabaseTimeout() }
            return first
        }
    }
}

/// The vectors stores pulled with since the last flush (retention waits for them): written to the
/// database every few seconds in one transaction, not on each pull, which would put a commit on the
/// path of every long poll.
final class PullRecord: Sendable {
    private let pending = Mutex<[UUID: VersionVector]>([:])

    func note(_ store: UUID, _ vector: VersionVector) { pending.withLock { $0[store] = vector } }

    /// What was noted since the last call.
    func take() -> [UUID: VersionVector] { pending.withLock { pulls in defer { pulls = [:] }; return pulls } }
}

/// The relay's last purge, for `/v1/status`, and what retention dropped as last read.
final class PurgeRecord: Sendable {
    private let record = Mutex<(at: Date, count: Int)?>(nil)
    private let through = Mutex<(vector: VersionVector, read: ContinuousClock.Instant)?>(nil)
    /// How long a reading of what retention dropped is used before it is read again.
    static let freshness: Duration = .seconds(2)

    var last: (at: Date, count: Int)? { record.withLock { $0 } }

    func note(_ count: Int, at date: Date = Date()) {
        record.withLock { $0 = (date, count) }
        through.withLock { $0 = nil }
    }

    /// The last reading of what retention dropped, while fresh.
    func purgedThrough() -> VersionVector? {
        through.withLock { reading in
            guard let reading, ContinuousClock.now - reading.read < Self.freshness else { return nil }
            return reading.vector
        }
    }

    func notePurgedThrough(_ vector: VersionVector) { through.withLock { $0 = (vector, ContinuousClock.now) } }
}

/// Which origins' change sets the relay takes: the keys of its configuration (`trust.keys`, revocations,
/// unknown origins) and the rotations daemons offered since (`ferry_keys`, shared by every relay on the
/// database, reloaded when any of them takes one).
final class RelayTrust: Sendable {
    let policy: OriginTrust.Policy
    private let state: Mutex<(verifier: ChangeSetVerifier, learned: [OriginKey])>

    init(policy: OriginTrust.Policy) {
        self.policy = policy
        state = Mutex((OriginTrust.verifier(keys: [], policy: policy), []))
    }

    /// The keys trusted now, for checking lines on any thread.
    var verifier: ChangeSetVerifier { state.withLock { $0.verifier } }

    /// The keys `/v1/state` publishes: the configuration's, then the rotations taken.
    var published: [PublishedKey] { (policy.pinned + state.withLock { $0.learned }).map(PublishedKey.init) }

    /// Reads the rotations taken (by any relay on the database) again.
    func reload(from database: RelayDatabase) async throws {
        let learned = try await database.learnedKeys()
        let verifier = OriginTrust.verifier(keys: learned, policy: policy)
        state.withLock { $0 = (verifier, learned) }
    }

    /// Of `offered`, the rotations endorsed by a key trusted for their origin (in order of their first
    /// sequence numbers, so a chain of rotations is taken whole), and how many others were offered.
    func rotations(in offered: [PublishedKey]) -> (taken: [OriginKey], refused: Int) {
        let trusted = Dictionary(grouping: policy.pinned + state.withLock { $0.learned }, by: \.origin)
        var taken: [OriginKey] = []
        var refused = 0
        for (origin, entries) in Dictionary(grouping: offered, by: \.origin) {
            var chain = (trusted[origin] ?? []).sorted { $0.firstSequence < $1.firstSequence }
            for entry in entries.sorted(by: { $0.from < $1.from }) where !chain.contains(where: { $0.publicKey == entry.key }) {
                guard let key = OriginTrust.endorsedRotation(entry, of: origin, after: chain) else {
                    refused += 1
                    continue
                }
                chain.append(key)
                taken.append(key)
            }
        }
        return (taken, refused)
    }
}
