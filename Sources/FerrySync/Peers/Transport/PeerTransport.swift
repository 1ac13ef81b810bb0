import Foundation
import FerryStore

/// One HTTP request to a peer, as ``PeerClient`` builds it.
public struct PeerRequest: Sendable {
    /// `GET` or `POST`.
    public var method: String
    /// The full URL, query included.
    public var url: URL
    /// The headers (authorization, content type and encoding).
    public var headers: [(name: String, value: String)]
    /// The body, if any.
    public var body: Data?

    public init(method: String, url: URL, headers: [(name: String, value: String)], body: Data?) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
    }
}

/// A peer's answer: its status and its body, already decompressed.
public struct PeerResponse: Sendable {
    public var status: Int
    public var body: Data

    public init(status: Int, body: Data) {
        self.status = status
        self.body = body
    }
}

/// Carries ``PeerRequest``s to a peer. Failures to reach it are thrown as
/// ``PeerError/notListening(_:cause:)`` or ``PeerError/unreachable(_:cause:)``; any HTTP
/// status is an answer, not an error. The daemon's is ``HTTPTransport``
/// (AsyncHTTPClient); tests pass FerryTesting's `InMemoryTransport`, which
/// hands each request to an in-process server's router.
public protocol PeerTransport: Sendable {
    /// Sends `request` and returns the peer's answer, whatever its status.
    func send(_ request: PeerRequest) async throws(PeerError) -> PeerResponse
    /// Sends `request` and writes a successful (2xx) answer's body to the new file `path` as it
    /// arrives (a snapshot: too large to hold in memory); an answer of another status is
    /// returned with its body and nothing is written.
    func download(_ request: PeerRequest, to path: String) async throws(PeerError) -> PeerResponse
    /// Sends `request` with the `size` bytes of `file` (from its start) as its body, streamed (a
    /// snapshot: too large to hold in memory), and returns the peer's answer.
    func upload(_ request: PeerRequest, from file: FileHandle, size: Int64) async throws(PeerError) -> PeerResponse
    /// Sends `request` with `body` made a piece at a time as the connection takes it (a large change
    /// set's push: too large to hold whole for every peer), and returns the peer's answer. A piece
    /// that cannot be made fails the request as ``PeerError/localStore(_:)``; the peer sees a body cut short.
    func send(_ request: PeerRequest, streamedBody body: StreamedBody) async throws(PeerError) -> PeerResponse
    /// Sends `request`'s head and returns once the answer's head is in, with the request's body
    /// left open: pieces are sent through the returned stream as the caller has them, and the
    /// answer's body is read as it comes (a push stream, ``PushStream``). Nil when this transport
    /// cannot stream; the caller then sends each piece as a request of its own.
    func openStream(_ request: PeerRequest) async throws(PeerError) -> PeerStreamChannel?
}

/// A request body made a piece at a time as it is sent, never held whole (``PeerTransport/send(_:streamedBody:)``).
public struct StreamedBody: Sendable {
    /// Starts a reading of the body from its first byte (a request sent again, to another URL, reads it again).
    public let makeReading: @Sendable () -> any StreamedBodyReading

    public init(_ makeReading: @escaping @Sendable () -> any StreamedBodyReading) {
        self.makeReading = makeReading
    }
}

/// One reading of a ``StreamedBody``.
public protocol StreamedBodyReading {
    /// The body's next bytes; nil once every byte was given.
    /// - Throws: when the body cannot be made on (its source is damaged); no piece follows.
    mutating func next() throws -> Data?
}

extension StreamedBody {
    /// The request's error when a piece of the body cannot be made: this store's, not the peer's.
    static func failure(_ error: any Error) -> PeerError {
        .localStore(StoreFailure("cannot make the body to send: \(error)", cause: error))
    }
}

/// A request open both ways: its body is written piece by piece while its answer's body is read.
public struct PeerStreamChannel: Sendable {
    /// The answer's status.
    public var status: Int
    /// The answer's body as it arrives; it ends when the peer ends the answer or the connection is lost.
    public var answer: AsyncThrowingStream<Data, any Error>
    /// Sends the next piece of the request's body.
    public var send: @Sendable (Data) -> Void
    /// Ends the request's body (the peer then ends its answer); with `abort`, drops the request at once.
    public var close: @Sendable (_ abort: Bool) -> Void

    public init(status: Int, answer: AsyncThrowingStream<Data, any Error>, send: @escaping @Sendable (Data) -> Void,
                close: @escaping @Sendable (_ abort: Bool) -> Void) {
        self.status = status
        self.answer = answer
        self.send = send
        self.close = close
    }
}

extension PeerTransport {
    /// No streams: each push is a request of its own.
    public func openStream(_ request: PeerRequest) async throws(PeerError) -> PeerStreamChannel? { nil }

    /// Reads the whole file, then sends it: for transports whose bodies are small (tests).
    public func upload(_ request: PeerRequest, from file: FileHandle, size: Int64) async throws(PeerError) -> PeerResponse {
        var request = request
        do {
            try file.seek(toOffset: 0)
            request.body = try file.read(upToCount: Int(size)) ?? Data()
        } catch {
            throw PeerError.localStore(StoreFailure("cannot read the file to send: \(error)", cause: error))
        }
        return try await send(request)
    }

    /// Makes the whole body, then sends it: for transports whose bodies are small (tests).
    public func send(_ request: PeerRequest, streamedBody body: StreamedBody) async throws(PeerError) -> PeerResponse {
        var request = request
        var reading = body.makeReading()
        var whole = Data()
        do {
            while let piece = try reading.next() { whole.append(piece) }
        } catch {
            throw StreamedBody.failure(error)
        }
        request.body = whole
        return try await send(request)
    }

    /// Holds the whole answer, then writes it: for transports whose answers are small (tests).
    public func download(_ request: PeerRequest, to path: String) async throws(PeerError) -> PeerResponse {
        let answer = try await send(request)
        guard (200..<300).contains(answer.status) else { return answer }
        guard FileManager.default.createFile(atPath: path, contents: answer.body) else {
            throw PeerError.localStore(StoreFailure("cannot write \(path)"))
        }
        return PeerResponse(status: answer.status, body: Data())
    }
}

/// How a client checks a peer's HTTPS certificate.
public enum PeerTrust: Sendable {
    /// Against the system trust store.
    case systemStore
    /// Against these certificate authorities only (a peer's `ca_file`).
    case certificateAuthority(CertificateAuthority)
}
