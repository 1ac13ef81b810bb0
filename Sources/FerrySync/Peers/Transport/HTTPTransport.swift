import Foundation
import Synchronization
import AsyncHTTPClient
import FerryStore
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL

/// The one HTTP client of every peer: AsyncHTTPClient on SwiftNIO, with
/// kept-alive connections, gzip answers, timeouts and Swift task cancellation.
/// HTTPS peers are checked against the system trust store, or against a
/// private CA (a peer's `ca_file`).
///
/// (It replaced URLSession, which on Linux needed three workarounds and still
/// ended the process on a response cut inside its headers: docs/RELIABILITY.md.)
final class HTTPTransport: PeerTransport {
    private let client: HTTPClient
    private let trust: PeerTrust
    private let timeout: TimeInterval

    /// The most a peer's answer may hold, decompressed (a pull page is far smaller).
    static let maximumAnswerBytes = 1 << 30

    /// A transport whose requests may go `timeout` seconds without data, and take four times that in all.
    init(trust: PeerTrust, timeout: TimeInterval) {
        var tls = TLSConfiguration.makeClientConfiguration()
        if case .certificateAuthority(let authority) = trust {
            tls.trustRoots = .certificates(authority.certificates)
        }
        tls.minimumTLSVersion = .tlsv12
        let seconds = TimeAmount.milliseconds(Int64(timeout * 1000))
        var configuration = HTTPClient.Configuration(
            tlsConfiguration: tls,
            redirectConfiguration: .disallow,
            timeout: .init(connect: min(seconds, .seconds(30)), read: seconds),
            decompression: .enabled(limit: .size(Self.maximumAnswerBytes))
        )
        // A refused connection or certificate fails the request at once: the peer's session
        // retries with its own backoff (and a bad certificate would fail again for the whole
        // connect timeout).
        configuration.connectionPool.retryConnectionEstablishment = false
        client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        self.trust = trust
        self.timeout = timeout
    }

    deinit {
        // Does not block: the client keeps itself alive until its connections are closed.
        client.shutdown { _ in }
    }

    /// The AsyncHTTPClient request for `request`.
    private static func http(_ request: PeerRequest) -> HTTPClientRequest {
        var http = HTTPClientRequest(url: request.url.absoluteString)
        http.method = HTTPMethod(rawValue: request.method)
        http.headers.add(name: "Accept-Encoding", value: "gzip")
        for header in request.headers { http.headers.add(name: header.name, value: header.value) }
        if let body = request.body { http.body = .bytes(ByteBuffer(bytes: body)) }
        return http
    }

    func send(_ request: PeerRequest) async throws(PeerError) -> PeerResponse {
        let http = Self.http(request)
        let place = "\(request.method) \(request.url.path)"
        do {
            let response = try await client.execute(http, timeout: .milliseconds(Int64(timeout * 4000)))
            let body = try await response.body.collect(upTo: Self.maximumAnswerBytes)
            return PeerResponse(status: Int(response.status.code), body: Data(body.readableBytesView))
        } catch {
            throw Self.peerError(error, place: place, trust: trust)
        }
    }

    func download(_ request: PeerRequest, to path: String) async throws(PeerError) -> PeerResponse {
        let http = Self.http(request)
        let place = "\(request.method) \(request.url.path)"
        let response: HTTPClientResponse
        do {
            // No deadline for the whole answer (a snapshot may take long on a slow link); the read
            // timeout still ends a transfer that stalls.
            response = try await client.execute(http, timeout: .hours(24))
        } catch {
            throw Self.peerError(error, place: place, trust: trust)
        }
        guard (200..<300).contains(Int(response.status.code)) else {
            let body = (try? await response.body.collect(upTo: 1 << 20)).map { Data($0.readableBytesView) } ?? Data()
            return PeerResponse(status: Int(response.status.code), body: body)
        }
        guard FileManager.default.createFile(atPath: path, contents: nil), let file = FileHandle(forWritingAtPath: path) else {
            throw PeerError.localStore(StoreFailure("cannot create \(path) to write the peer's answer into"))
        }
        defer { try? file.close() }
        var received: Int64 = 0
        do {
            for try await chunk in response.body {
                let data = Data(chunk.readableBytesView)
                try await NIOThreadPool.singleton.runIfActive { try file.write(contentsOf: data) }
                received += Int64(data.count)
            }
            try await NIOThreadPool.singleton.runIfActive { try file.synchronize() }
        } catch let error as IOError {
            throw Self.peerError(error, place: place, trust: trust)
        } catch let error as CocoaError {
            throw PeerError.localStore(StoreFailure("cannot write \(path): \(error.localizedDescription)", cause: error))
        } catch {
            throw Self.peerError(error, place: place, trust: trust)
        }
        if let expected = response.headers.first(name: "Content-Length").flatMap(Int64.init), expected != received {
            throw PeerError.unreachable("\(place): the answer was cut after \(received) of \(expected) bytes")
        }
        return PeerResponse(status: Int(response.status.code), body: Data())
    }

    func upload(_ request: PeerRequest, from file: FileHandle, size: Int64) async throws(PeerError) -> PeerResponse {
        var http = Self.http(request)
        do {
            try file.seek(toOffset: 0)
        } catch {
            throw PeerError.localStore(StoreFailure("cannot read the file to send: \(error)", cause: error))
        }
        let progress = BodyProgress()
        http.body = .stream(FileChunks(file: file, size: size, progress: progress), length: .known(size))
        return try await execute(streaming: http, place: "\(request.method) \(request.url.path)", progress: progress, body: "the upload")
    }

    func send(_ request: PeerRequest, streamedBody body: StreamedBody) async throws(PeerError) -> PeerResponse {
        var http = Self.http(request)
        let progress = BodyProgress()
        http.body = .stream(BodyPieces(body: body, progress: progress), length: .unknown)
        return try await execute(streaming: http, place: "\(request.method) \(request.url.path)", progress: progress, body: "the request's body")
    }

    /// Sends `http`, whose body is streamed and notes its `progress`, and returns the answer.
    ///
    /// No deadline for the whole request (a snapshot may take long on a slow link), and the read
    /// timeout only starts once the body is sent: a peer that stops taking the body (a relay
    /// stopped, or its machine paused) would hold the request for ever. So it fails once the client has asked
    /// for no piece of the body for the timeout (AsyncHTTPClient's write timeout is no help: it
    /// times the sender's silence, and stops while the peer is not reading). Once the body is all
    /// given, the read timeout bounds the wait for the answer (a peer replaying a large change set).
    private func execute(streaming http: HTTPClientRequest, place: String, progress: BodyProgress,
                         body: String) async throws(PeerError) -> PeerResponse {
        let client = self.client
        let sent = http
        let seconds = timeout
        let limit = Duration.seconds(seconds)
        let outcome: Result<PeerResponse, any Error> = await withTaskGroup(of: Result<PeerResponse, any Error>?.self) { group in
            group.addTask {
                do {
                    let response = try await client.execute(sent, timeout: .hours(24))
                    let body = try await response.body.collect(upTo: 1 << 20)
                    return .success(PeerResponse(status: Int(response.status.code), body: Data(body.readableBytesView)))
                } catch {
                    return .failure(error)
                }
            }
            group.addTask {
                while progress.isFinishedOrRecent(within: limit) {
                    try? await Task.sleep(for: limit / 4)
                    if Task.isCancelled { return nil }
                }
                return .failure(PeerError.unreachable("\(place): the peer took no bytes of \(body) for \(seconds) s"))
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first ?? .failure(CancellationError())
        }
        switch outcome {
        case .success(let response): return response
        case .failure(let error as PeerError): throw error
        case .failure(let error): throw Self.peerError(error, place: place, trust: trust)
        }
    }

    func openStream(_ request: PeerRequest) async throws(PeerError) -> PeerStreamChannel? {
        var http = Self.http(request)
        let (pieces, writer) = AsyncStream.makeStream(of: ByteBuffer.self)
        http.body = .stream(pieces, length: .unknown)
        let place = "\(request.method) \(request.url.path)"
        let response: HTTPClientResponse
        do {
            // The deadline bounds the wait for the answer's head only (AsyncHTTPClient stops applying it
            // then), so it never cuts a stream in use; the read timeout never applies (the request is
            // never sent whole), so ``PushStream`` bounds each answer, and closes idle and old streams.
            response = try await client.execute(http, timeout: .milliseconds(Int64(timeout * 1000)))
        } catch {
            writer.finish()
            throw Self.peerError(error, place: place, trust: trust)
        }
        let (answer, sink) = AsyncThrowingStream.makeStream(of: Data.self)
        let reader = Task {
            do {
                for try await chunk in response.body { sink.yield(Data(chunk.readableBytesView)) }
                sink.finish()
            } catch {
                sink.finish(throwing: error)
            }
        }
        return PeerStreamChannel(status: Int(response.status.code), answer: answer,
                                 send: { writer.yield(ByteBuffer(bytes: $0)) },
                                 close: { abort in
                                     writer.finish()
                                     if abort { reader.cancel() }
                                 })
    }

    /// The ``PeerError`` for a failed request: refused connections are `notListening`,
    /// certificate failures say what the certificate was checked against, anything else
    /// (a cut answer, a timeout, a cancelled request) is `unreachable`; each keeps `error` as its cause.
    static func peerError(_ error: any Error, place: String, trust: PeerTrust) -> PeerError {
        if isConnectionRefused(error) {
            return .notListening("\(place): connection refused", cause: error)
        }
        let checkedAgainst = switch trust {
        case .systemStore: "the system trust store"
        case .certificateAuthority(let authority): "ca_file \(authority.file)"
        }
        let detail = "\(error)"
        if detail.contains("CERTIFICATE_VERIFY_FAILED") {
            return .unreachable("\(place): TLS handshake failed: the peer's certificate does not chain up to \(checkedAgainst) (CERTIFICATE_VERIFY_FAILED)",
                                cause: error)
        }
        if let error = error as? NIOSSLExtraError, error == .failedToValidateHostname {
            return .unreachable("\(place): TLS handshake failed: the peer's certificate is not for the host of its url (\(error))", cause: error)
        }
        if error is NIOSSLError || error is BoringSSLError {
            return .unreachable("\(place): TLS handshake failed (checked against \(checkedAgainst)): \(detail)", cause: error)
        }
        if error is CancellationError {
            return .unreachable("\(place): the request was cancelled", cause: error)
        }
        return .unreachable("\(place): \(error)", cause: error)
    }

    private static func isConnectionRefused(_ error: any Error) -> Bool {
        if let error = error as? IOError { return error.errnoCode == ECONNREFUSED }
        if let error = error as? NIOConnectionError {
            return !error.connectionErrors.isEmpty && error.connectionErrors.allSatisfy { isConnectionRefused($0.error) }
        }
        return false
    }
}

/// When the client last asked for a piece of a streamed body (it asks as the connection takes the bytes
/// before), and whether it has had the last.
final class BodyProgress: Sendable {
    private let lastAsked = Mutex<ContinuousClock.Instant?>(ContinuousClock.now)

    func note() { lastAsked.withLock { if $0 != nil { $0 = .now } } }

    /// The body was given whole: the wait for the answer is the read timeout's to bound.
    func finish() { lastAsked.withLock { $0 = nil } }

    /// Whether the body was given whole, or the client asked for a piece within the last `limit`.
    func isFinishedOrRecent(within limit: Duration) -> Bool {
        guard let last = lastAsked.withLock({ $0 }) else { return true }
        return ContinuousClock.now - last < limit
    }
}

/// A ``StreamedBody``'s pieces, each made when the request asks for it.
struct BodyPieces: AsyncSequence, Sendable {
    typealias Element = ByteBuffer
    let body: StreamedBody
    let progress: BodyProgress

    struct AsyncIterator: AsyncIteratorProtocol {
        var reading: any StreamedBodyReading
        let progress: BodyProgress

        mutating func next() async throws -> ByteBuffer? {
            progress.note()
            do {
                guard let piece = try reading.next() else {
                    progress.finish()
                    return nil
                }
                return ByteBuffer(bytes: piece)
            } catch {
                throw StreamedBody.failure(error)
            }
        }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(reading: body.makeReading(), progress: progress) }
}

/// A file's bytes in chunks of 1 MiB, each read on the I/O thread pool when the request asks for it,
/// so an upload holds one chunk at a time.
struct FileChunks: AsyncSequence, Sendable {
    typealias Element = ByteBuffer
    let file: FileHandle
    let size: Int64
    /// When the client last asked for a chunk.
    let progress: BodyProgress
    static let chunkBytes = 1 << 20

    struct AsyncIterator: AsyncIteratorProtocol {
        let file: FileHandle
        var left: Int64
        let progress: BodyProgress

        mutating func next() async throws -> ByteBuffer? {
            progress.note()
            guard left > 0 else {
                progress.finish()
                return nil
            }
            let count = Int(Swift.min(left, Int64(FileChunks.chunkBytes)))
            let file = self.file
            let data = try await NIOThreadPool.singleton.runIfActive { try file.read(upToCount: count) ?? Data() }
            guard !data.isEmpty else { throw PeerError.localStore(StoreFailure("the file to send ended \(left) bytes early")) }
            left -= Int64(data.count)
            return ByteBuffer(bytes: data)
        }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(file: file, left: size, progress: progress) }
}
