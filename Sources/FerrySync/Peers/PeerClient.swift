import Foundation
import Synchronization
import FerryModel
import FerryStore
import CompressNIO
import NIOCore

/// Why a request to a peer failed.
///
/// Errors are equal when they are the same case with the same payload (their causes are not compared).
public enum PeerError: FerryError, Sendable, CustomStringConvertible, Equatable {
    /// Nothing listens at the peer's address (connection refused); `cause` is the error met, when there was one.
    case notListening(String, cause: (any Error)? = nil)
    /// The peer could not be reached, did not answer in time, or failed the TLS check; `cause` is the
    /// error met, when there was one.
    case unreachable(String, cause: (any Error)? = nil)
    /// The peer refused the token (401) or its role (403).
    case unauthorized(status: Int)
    /// The peer answered with an error status.
    case failed(status: Int, message: String)
    /// The peer's answer is not what the protocol says (or this side could not make or take it in);
    /// `cause` is the error met, when there was one.
    case badAnswer(String, cause: (any Error)? = nil)
    /// This side's store failed (disk full, read-only, I/O error; a change set to push that cannot be
    /// read): nothing of the batch was taken in or sent whole, and the next round tries again. The
    /// failure says which, and keeps the store's error as its cause.
    case localStore(StoreFailure)
    /// The peer refused (413) a push of one change set alone, of `bytes` bytes: larger than the
    /// request body it takes (a daemon's `server.max_body_bytes`, a relay's `server.max_change_set_bytes`;
    /// the peer's `message` names it). Nothing this store has after it reaches the peer by pushes until
    /// the peer's limit is raised above it (a daemon peer may still pull it; a relay pulls nothing).
    case changeSetTooLarge(bytes: Int, message: String)

    /// The kinds of ``PeerError``, one per case.
    public enum Code: String, Hashable, Sendable {
        /// Nothing listens at the peer's address (``PeerError/notListening(_:cause:)``).
        case notListening
        /// The peer could not be reached, did not answer in time, or failed the TLS check (``PeerError/unreachable(_:cause:)``).
        case unreachable
        /// The peer refused the token or its role (``PeerError/unauthorized(status:)``).
        case unauthorized
        /// The peer answered with an error status (``PeerError/failed(status:message:)``).
        case failed
        /// The peer's answer is not what the protocol says (``PeerError/badAnswer(_:cause:)``).
        case badAnswer
        /// This side's store failed (``PeerError/localStore(_:)``).
        case localStore
        /// The peer refused a push of one change set alone as too large (``PeerError/changeSetTooLarge(bytes:message:)``).
        case changeSetTooLarge
    }

    /// The kind of fault.
    public var code: Code {
        switch self {
        case .notListening: .notListening
        case .unreachable: .unreachable
        case .unauthorized: .unauthorized
        case .failed: .failed
        case .badAnswer: .badAnswer
        case .localStore: .localStore
        case .changeSetTooLarge: .changeSetTooLarge
        }
    }

    /// The error met: the one kept by ``notListening(_:cause:)``, ``unreachable(_:cause:)`` or
    /// ``badAnswer(_:cause:)``, or the store's failure of ``localStore(_:)``.
    public var cause: (any Error)? {
        switch self {
        case .notListening(_, let cause), .unreachable(_, let cause), .badAnswer(_, let cause): cause
        case .localStore(let failure): failure
        case .unauthorized, .failed, .changeSetTooLarge: nil
        }
    }

    public var description: String {
        switch self {
        case .notListening(let detail, _): "not listening: \(detail)"
        case .unreachable(let detail, _): "unreachable: \(detail)"
        case .unauthorized(401): "the peer refused our token (401); check token_file against the peer's tokens_file"
        case .unauthorized(let status): "the peer refused this action for our token (\(status)); it needs an admin token"
        case .failed(let status, let message): "the peer answered \(status): \(message)"
        case .badAnswer(let detail, _): "the peer's answer was not understood: \(detail)"
        case .localStore(let detail): "this store failed: \(detail)"
        case .changeSetTooLarge(let bytes, let message):
            "the peer refuses the next change set to push, \(Self.megabytes(bytes)) MB alone, as larger than the request body it takes "
                + "(it answered 413: \(message)); nothing made after it reaches the peer by pushes until the peer's limit "
                + "(server.max_body_bytes on a daemon, server.max_change_set_bytes on a relay) is raised above \(Self.megabytes(bytes)) MB "
                + "(a daemon peer may still pull it; a relay pulls nothing)"
        }
    }

    /// Whether trying again later may succeed (network trouble, a busy or restarting peer).
    public var isRetryable: Bool {
        switch self {
        case .notListening, .unreachable, .localStore: true
        case .failed(let status, _): status >= 500 || status == 429 || status == 408
        case .unauthorized, .badAnswer, .changeSetTooLarge: false
        }
    }

    /// The same case with the same payload; causes are not compared.
    public static func == (lhs: PeerError, rhs: PeerError) -> Bool {
        switch (lhs, rhs) {
        case (.notListening(let left, _), .notListening(let right, _)): left == right
        case (.unreachable(let left, _), .unreachable(let right, _)): left == right
        case (.unauthorized(let left), .unauthorized(let right)): left == right
        case (.failed(let leftStatus, let leftMessage), .failed(let rightStatus, let rightMessage)):
            leftStatus == rightStatus && leftMessage == rightMessage
        case (.badAnswer(let left, _), .badAnswer(let right, _)): left == right
        case (.localStore(let left), .localStore(let right)): left == right
        case (.changeSetTooLarge(let leftBytes, let leftMessage), .changeSetTooLarge(let rightBytes, let rightMessage)):
            leftBytes == rightBytes && leftMessage == rightMessage
        case (.notListening, _), (.unreachable, _), (.unauthorized, _), (.failed, _), (.badAnswer, _), (.localStore, _),
             (.changeSetTooLarge, _):
            false
        }
    }

    private static func megabytes(_ bytes: Int) -> String {
        String(format: "%.1f", Double(bytes) / 1_048_576)
    }
}

/// Talks to one peer's HTTP API (docs/PROTOCOL.md) through AsyncHTTPClient;
/// an HTTPS peer's certificate is checked as its ``PeerTrust`` says.
///
/// A peer may be reached at several URLs that serve the same history: relays sharing one
/// database (docs/FLEET.md). Requests go to the URL in use; when it cannot be reached or
/// answers 502, 503 or 504, the request goes to the next URL in the list, which is in use from
/// then on. Every request is safe to send twice: pulls and state only read, and a push of a
/// change set already taken in counts as a duplicate.
public struct PeerClient: Sendable {
    /// Every URL the peer is reached at, in the order they are tried.
    public let baseURLs: [URL]
    private let token: String
    private let transport: any PeerTransport
    /// Which of ``baseURLs`` is in use (shared by copies of this client).
    private let inUse: URLInUse
    /// The standing push to the peer (shared by copies of this client).
    private let pushStream: PushStream

    /// The URL in use: the first that answered the last request (the first listed until one fails).
    public var baseURL: URL { baseURLs[inUse.index] }

    /// A client for the peer at `baseURL`, presenting `token`; a request may go `timeout`
    /// seconds without data (and take four times that in all). `trust` says how the peer's
    /// HTTPS certificate is checked.
    public init(baseURL: URL, token: String, timeout: TimeInterval = PeerClient.defaultTimeout, trust: PeerTrust = .systemStore) {
        self.init(baseURLs: [baseURL], token: token, timeout: timeout, trust: trust)
    }

    /// A client for a peer reached at any of `baseURLs` (at least one), failing over from one to
    /// the next; otherwise as ``init(baseURL:token:timeout:trust:)``.
    public init(baseURLs: [URL], token: String, timeout: TimeInterval = PeerClient.defaultTimeout, trust: PeerTrust = .systemStore) {
        self.init(baseURLs: baseURLs, token: token, timeout: timeout, trust: trust,
                  streamIdleLimit: .milliseconds(Int64(min(Self.streamIdleLimit, timeout / 2) * 1000)))
    }

    /// ``init(baseURLs:token:timeout:trust:)`` with the push stream's idle limit set (tests shorten it).
    package init(baseURLs: [URL], token: String, timeout: TimeInterval, trust: PeerTrust, streamIdleLimit: Duration) {
        self.init(baseURLs: baseURLs, token: token, transport: HTTPTransport(trust: trust, timeout: timeout), streamIdleLimit: streamIdleLimit,
                  answerLimit: .seconds(timeout))
    }

    /// A client for the peer at `baseURL` that sends its requests through `transport`.
    public init(baseURL: URL, token: String, transport: any PeerTransport) {
        self.init(baseURLs: [baseURL], token: token, transport: transport)
    }

    /// A client for a peer reached at any of `baseURLs` that sends its requests through `transport`.
    public init(baseURLs: [URL], token: String, transport: any PeerTransport) {
        self.init(baseURLs: baseURLs, token: token, transport: transport, streamIdleLimit: .seconds(Self.streamIdleLimit))
    }

    /// A client whose push stream (``PushStream``) closes after `streamIdleLimit` without a push, and
    /// whose push on it fails when its answer has not come after `answerLimit` (a request's timeout).
    package init(baseURLs: [URL], token: String, transport: any PeerTransport, streamIdleLimit: Duration,
                 answerLimit: Duration = .seconds(Self.defaultTimeout)) {
        precondition(!baseURLs.isEmpty, "a peer needs at least one URL")
        self.baseURLs = baseURLs
        self.token = token
        self.transport = transport
        self.inUse = URLInUse()
        self.pushStream = PushStream(idleLimit: streamIdleLimit, answerLimit: answerLimit)
    }

    /// Seconds a request may go without data unless the caller says otherwise.
    public static let defaultTimeout: TimeInterval = 30

    /// Seconds a push stream stays open without a push (at most half the request timeout).
    static let streamIdleLimit: TimeInterval = 10

    /// `GET /v1/state`: the peer's store UUID, model hash and version vector.
    public func state() async throws(PeerError) -> HistoryState {
        try decode(HistoryState.self, try await send("GET", "v1/state"), from: "GET /v1/state")
    }

    /// `POST /v1/changesets/pull`: at most `limit` change sets the peer has and `vector` does not
    /// cover. The vector goes in the body: it grows with every origin, and a URL does not.
    /// `store`, this side's UUID, lets a relay tell who has what (its retention waits for the stores
    /// that pull from it); a daemon ignores it.
    public func pull(after vector: VersionVector, limit: Int, store: UUID? = nil) async throws(PeerError) -> [String] {
        let caller = store.map { #","store":"\#($0.uuidString)""# } ?? ""
        let body = Data(#"{"after":\#(ChangeSetCodec.encode(vector)),"limit":\#(limit)\#(caller)}"#.utf8)
        let data = try await send("POST", "v1/changesets/pull", body: body, contentType: "application/json")
        return JSONLines.split(data)
    }

    /// `POST /v1/changesets/pull` with `wait` to a relay (a long poll): answers as soon as the relay
    /// holds change sets `vector` does not cover, or empty after `wait` seconds. Only relays wait
    /// (``HistoryState/isRelay``); a store answers at once. `wait` must stay below the client's timeout.
    public func waitForChangeSets(after vector: VersionVector, limit: Int, wait: TimeInterval, store: UUID? = nil) async throws(PeerError) -> [String] {
        let milliseconds = Int((wait * 1000).rounded())
        let caller = store.map { #","store":"\#($0.uuidString)""# } ?? ""
        let body = Data(#"{"after":\#(ChangeSetCodec.encode(vector)),"limit":\#(limit),"wait_ms":\#(milliseconds)\#(caller)}"#.utf8)
        let data = try await send("POST", "v1/changesets/pull", body: body, contentType: "application/json")
        return JSONLines.split(data)
    }

    /// Push bodies smaller than this go as they are: on loopback or a LAN, setting up zlib on both
    /// sides costs more than the bytes it saves (a single save's change set is a few hundred bytes).
    static let smallestCompressedPush = 8 << 10

    /// How push bodies are compressed: zlib's fastest level, about 15 times smaller for change sets, in
    /// half the default level's processor time.
    static let pushCompression = ZlibConfiguration(compressionLevel: .fastestCompression)

    /// `POST /v1/changesets`: the peer applies the lines (all checked first) and says what it did.
    /// The body goes gzip-compressed unless it is small; a small one goes on the peer's push stream
    /// (`POST /v1/changesets/stream`, ``PushStream``) when the peer offers one and it is free.
    public func push(_ lines: [String]) async throws(PeerError) -> ApplyReport {
        var buffer = ByteBuffer()
        for line in lines {
            buffer.writeString(line)
            buffer.writeInteger(UInt8(ascii: "\n"))
        }
        // (A peer reached at several URLs is a set of relays, which take no streams; its pushes fail over as requests.)
        if buffer.readableBytes < Self.smallestCompressedPush, baseURLs.count == 1 {
            let url = baseURL
            let answer = try await pushStream.push(Data(buffer.readableBytesView)) { () async throws(PeerError) -> PeerStreamChannel? in
                try await transport.openStream(try request(url, "POST", "v1/changesets/stream", contentType: "application/x-ndjson"))
            }
            if let answer { return try decode(ApplyReport.self, try Self.checked(answer), from: "POST /v1/changesets/stream") }
        }
        // (A body sent compressed is copied only once compressed: a push of one large change set held
        // a third copy of it uncompressed.)
        let body: Data
        var encoding: String?
        if buffer.readableBytes >= Self.smallestCompressedPush {
            do {
                let compressed = try buffer.compress(with: .gzip(configuration: Self.pushCompression))
                buffer = ByteBuffer()
                body = Data(compressed.readableBytesView)
                encoding = "gzip"
            } catch {
                throw PeerError.badAnswer("gzip of the request body failed: \(error)", cause: error)
            }
        } else {
            body = Data(buffer.readableBytesView)
        }
        let data = try await send("POST", "v1/changesets", body: body, contentType: "application/x-ndjson", contentEncoding: encoding)
        return try decode(ApplyReport.self, data, from: "POST /v1/changesets")
    }

    /// ``push(_:)-([String])`` for lines as a store's page gives them (``ReplicationEndpoint/lines(after:limit:maximumBytes:)``).
    /// When one is given in pieces (a large change set), the body is made as it is sent: inflated from the
    /// store's compressed form and gzip-compressed a piece at a time (``PushBody``), so that the push holds
    /// the store's form and a piece, not the line and its compressed copy, for every peer it goes to.
    public func push(_ lines: [ChangeSetPage.Line]) async throws(PeerError) -> ApplyReport {
        let texts = lines.compactMap(\.text)
        if texts.count == lines.count { return try await push(texts) }
        let body = PushBody.streamed(lines)
        let answer = try await failingOver { url throws(PeerError) in
            let request = try request(url, "POST", "v1/changesets", contentType: "application/x-ndjson", contentEncoding: "gzip")
            return try await transport.send(request, streamedBody: body)
        }
        return try decode(ApplyReport.self, try Self.checked(answer), from: "POST /v1/changesets")
    }

    /// `POST /v1/sync` (admin): asks a daemon for a sync round now; returns its
    /// per-peer results, whether they succeeded (200) or not (502).
    public func requestSync(peer: String?) async throws(PeerError) -> SyncNowAnswer {
        let data = try await send("POST", "v1/sync", query: peer.map { [URLQueryItem(name: "peer", value: $0)] } ?? [], alsoAccepting: [502])
        return try decode(SyncNowAnswer.self, data, from: "POST /v1/sync")
    }

    /// `GET /v1/status`: the daemon's status document.
    public func status() async throws(PeerError) -> StatusDocument {
        try decode(StatusDocument.self, try await send("GET", "v1/status"), from: "GET /v1/status")
    }

    /// `GET /v1/snapshot`: writes a snapshot of the peer's store to the new file `path`
    /// (docs/SYNC.md, "Snapshots"); install it with `SQLiteStore.installSnapshot`.
    public func downloadSnapshot(to path: String) async throws(PeerError) {
        _ = try Self.checked(try await failingOver { url throws(PeerError) in
            try await transport.download(try request(url, "GET", "v1/snapshot"), to: path)
        })
    }

    /// `PUT /v1/snapshot` to a relay: sends `snapshot`, a snapshot of store `store`, for new stores to
    /// start from (docs/FLEET.md, "Joining through a relay"). Only relays take snapshots.
    public func uploadSnapshot(_ snapshot: SnapshotFile, of store: UUID) async throws(PeerError) {
        _ = try Self.checked(try await failingOver { url throws(PeerError) in
            var request = try request(url, "PUT", "v1/snapshot", contentType: "application/vnd.sqlite3")
            request.headers.append(("Ferry-Snapshot-Of", store.uuidString))
            return try await transport.upload(request, from: snapshot.handle, size: snapshot.size)
        })
    }

    /// `PUT /v1/keys` to a relay: offers the keys this store holds (its state's `keys`), so the relay takes
    /// the rotations among them that a key it trusts endorsed. Only relays take keys.
    public func offerKeys(_ keys: [PublishedKey]) async throws(PeerError) {
        let body = Data(WireJSON.encode(KeyOffer(keys: keys)).utf8)
        _ = try await send("PUT", "v1/keys", body: body, contentType: "application/json")
    }

    private struct KeyOffer: Encodable {
        var keys: [PublishedKey]
    }

    /// Why a token file cannot be used.
    public enum TokenFileProblem: FerryError, Sendable, Equatable {
        /// The file cannot be read.
        case unreadable
        /// It holds no token, or more than one word.
        case notOneToken

        /// The kinds of ``TokenFileProblem``, one per case.
        public enum Code: String, Hashable, Sendable {
            /// The file cannot be read (``TokenFileProblem/unreadable``).
            case unreadable
            /// It holds no token, or more than one word (``TokenFileProblem/notOneToken``).
            case notOneToken
        }

        /// The kind of fault.
        public var code: Code {
            switch self {
            case .unreadable: .unreadable
            case .notOneToken: .notOneToken
            }
        }

        /// What is wrong with the file, for a person.
        public var description: String {
            switch self {
            case .unreadable: "the token file cannot be read (missing, or not readable by this user)"
            case .notOneToken: "the token file must hold one token (one word; blank space around it is ignored)"
            }
        }
    }

    /// The one token the file at `path` holds (surrounding blank space and newlines ignored).
    public static func token(inFile path: String) throws(TokenFileProblem) -> String {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { throw .unreadable }
        let token = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !token.isEmpty, !token.contains(where: \.isWhitespace) else { throw .notOneToken }
        return token
    }

    // MARK: - Internals

    private func send(_ method: String, _ path: String, query: [URLQueryItem] = [], body: Data? = nil,
                      contentType: String? = nil, contentEncoding: String? = nil, alsoAccepting: Set<Int> = []) async throws(PeerError) -> Data {
        let answer = try await failingOver { url throws(PeerError) in
            try await transport.send(try request(url, method, path, query: query, body: body, contentType: contentType, contentEncoding: contentEncoding))
        }
        return try Self.checked(answer, alsoAccepting: alsoAccepting)
    }

    /// `attempt` at the URL in use, then, while it cannot be reached or answers that it cannot serve
    /// now (502, 503, 504), at each other URL in turn; the URL that answered is in use from then on.
    /// With one URL, the one attempt's answer or error.
    private func failingOver(_ attempt: (URL) async throws(PeerError) -> PeerResponse) async throws(PeerError) -> PeerResponse {
        let first = inUse.index
        var lastError: PeerError?
        var lastAnswer: PeerResponse?
        for step in 0..<baseURLs.count {
            let index = (first + step) % baseURLs.count
            do {
                let answer = try await attempt(baseURLs[index])
                if [502, 503, 504].contains(answer.status), step < baseURLs.count - 1 {
                    lastAnswer = answer
                    continue
                }
                if step > 0 { inUse.use(index, from: first) }
                return answer
            } catch {
                switch error {
                case .notListening, .unreachable: lastError = error
                default: throw error
                }
            }
        }
        if let lastAnswer { return lastAnswer }
        throw lastError ?? PeerError.unreachable("no URL to try")
    }

    /// A request to the peer at `url`, with this client's token.
    private func request(_ url: URL, _ method: String, _ path: String, query: [URLQueryItem] = [], body: Data? = nil,
                         contentType: String? = nil, contentEncoding: String? = nil) throws(PeerError) -> PeerRequest {
        var components = URLComponents(url: url.appendingPathComponent(path), resolvingAgainstBaseURL: false)
        if !query.isEmpty { components?.queryItems = query }
        guard let url = components?.url else { throw PeerError.badAnswer("cannot build a URL from \(baseURL) and \(path)") }
        var headers: [(name: String, value: String)] = [("Authorization", "Bearer \(token)")]
        if let contentType { headers.append(("Content-Type", contentType)) }
        if let contentEncoding { headers.append(("Content-Encoding", contentEncoding)) }
        return PeerRequest(method: method, url: url, headers: headers, body: body)
    }

    /// The answer's body when its status is a success (or one of `alsoAccepting`); the error it stands for otherwise.
    private static func checked(_ answer: PeerResponse, alsoAccepting: Set<Int> = []) throws(PeerError) -> Data {
        switch answer.status {
        case 200..<300:
            return answer.body
        case let status where alsoAccepting.contains(status):
            return answer.body
        case 401, 403:
            throw PeerError.unauthorized(status: answer.status)
        default:
            throw PeerError.failed(status: answer.status, message: errorMessage(answer.body))
        }
    }

    /// The message of an error answer (`{"error":{"message":…}}`), or the start of the body as it is.
    static func errorMessage(_ data: Data) -> String {
        (try? WireJSON.decode(ErrorMessage.self, from: data))?.error.message ?? String(decoding: data.prefix(300), as: UTF8.self)
    }

    private func decode<Message: Decodable>(_ type: Message.Type, _ data: Data, from place: String) throws(PeerError) -> Message {
        do {
            return try WireJSON.decode(type, from: data)
        } catch {
            throw PeerError.badAnswer("\(place): \(error)", cause: error)
        }
    }
}

/// Which of a peer's URLs is in use, shared by every copy of its ``PeerClient``.
final class URLInUse: Sendable {
    private let current = Atomic<Int>(0)

    var index: Int { current.load(ordering: .relaxed) }

    /// Moves to `index`, unless another request moved away from `previous` meanwhile.
    func use(_ index: Int, from previous: Int) {
        _ = current.compareExchange(expected: previous, desired: index, ordering: .relaxed)
    }
}
