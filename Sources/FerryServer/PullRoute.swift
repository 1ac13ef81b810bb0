import Foundation
import Hummingbird
import Logging
import CompressNIO
import FerryStore
import FerrySync

/// A daemon's answer to a pull (``PullRequest``: `POST /v1/changesets/pull`, or the older
/// `GET /v1/changesets?after=VECTOR&limit=N`): the change sets the caller lacks,
/// streamed as JSON lines page by page (gzip-compressed chunk by chunk when the
/// caller takes gzip), so that a long history is served in flat memory.
///
/// Peers pull with POST: a vector grows with every origin a fleet has seen, and in a
/// URL it once outgrew what the HTTP parser takes (about 80 KiB), which stopped every
/// pull between any two peers.
package struct PullRoute: Sendable {
    let gate: StoreGate
    /// Most change sets read from the store per streamed chunk.
    static let pageSize = 16
    /// Change sets in an answer's first chunk; later chunks are sized from the bytes
    /// per change set seen so far, so that an answer of large change sets ends near
    /// ``answerBytes`` instead of a whole chunk past it.
    static let firstPageSize = 4
    /// A pull answer stops after the chunk that reaches this many bytes, so one answer
    /// stays a bounded size whatever the limit; the caller asks again. Small, because
    /// the caller checks the next answer while it applies this one: only the first
    /// answer of a catch-up is waited for, so the smaller it is the sooner replay starts
    /// (at 4 MiB, a third of W3's catch-up of 100,000 objects went to waiting for it).
    package static let answerBytes = 1 << 20
    /// The most of a large change set made and written at a time, when the store gives it in
    /// pieces (``ChangeSetPage/Line``): a slow caller then holds this much of it, not all of it.
    static let pieceBytes = 256 << 10

    /// zlib's fastest level for pull answers: change sets (long runs of repeated URIs) still
    /// shrink about 15× (17× at the default level), in half the CPU time (0.11 s instead of
    /// 0.21 s per 22 MB), which on a catch-up is time the serving peer's store work could use.
    package static let answerCompression = ZlibConfiguration(compressionLevel: .fastestCompression)

    /// The answer to a pull of the change sets after `vector`, at most `limit` of them (a daemon
    /// answers at once, whatever the pull's `wait_ms` says).
    func answer(_ request: Request, after vector: VersionVector, limit: Int, logger: Logger) async throws -> Response {
        let endpoint = try await gate.readableEndpointOrUnavailable()
        // The first page is read before answering, so a purged history is a clean 410, not a cut stream.
        let first: ChangeSetPage
        do {
            first = try await endpoint.page(after: vector, cursor: 0, limit: min(limit, Self.firstPageSize))
        } catch let error as HistoryError {
            throw APIError.gone("\(error)", cause: error)
        } catch {
            throw APIError.unavailable("the store cannot be read now: \(error)", cause: error)
        }
        return StreamedAnswer.response(gzip: Self.acceptsGzip(request)) { send in
            var page = first
            var asked = min(limit, Self.firstPageSize)
            var sent = 0
            var bytes = 0
            while true {
                var buffer = ByteBuffer()
                var full = false
                for line in page.lines {
                    // A change set larger than an answer goes alone: after others, it waits for the next answer.
                    if bytes > 0 || buffer.readableBytes > 0, line.byteCount >= Self.answerBytes {
                        full = true
                        break
                    }
                    if let text = line.text {
                        buffer.writeString(text)
                    } else {
                        // A large line the store gives in pieces is sent so: each piece is written
                        // (and waits for the caller to take it) before the next is made.
                        var pieces = line.pieces()
                        while let piece = try Self.next(of: &pieces, logger: logger) {
                            buffer.writeBytes(piece)
                            bytes += buffer.readableBytes
                            try await send(&buffer)
                        }
                    }
                    buffer.writeInteger(UInt8(ascii: "\n"))
                    if bytes + buffer.readableBytes >= Self.answerBytes {
                        full = true
                        break
                    }
                }
                bytes += buffer.readableBytes
                try await send(&buffer)
                sent += page.lines.count
                guard !full, sent < limit, page.lines.count == asked, bytes < Self.answerBytes else { break }
                let bytesPerChangeSet = max(1, bytes / sent)
                asked = min(limit - sent, Self.pageSize, (Self.answerBytes - bytes) / bytesPerChangeSet + 1)
                page = try await endpoint.page(after: vector, cursor: page.cursor, limit: asked)
                if page.lines.isEmpty { break }
            }
        }
    }

    /// The next piece of a large line; a damaged one is logged (the answer is then cut short, its
    /// head sent already: the caller sees a failed pull and tries again later).
    private static func next(of pieces: inout any LinePieces, logger: Logger) throws -> [UInt8]? {
        do {
            return try pieces.next(maximumBytes: pieceBytes)
        } catch {
            logger.error("a pull answer was cut short: \(error)")
            throw error
        }
    }

    /// Whether the caller takes gzip (`Accept-Encoding: gzip`, not `gzip;q=0`).
    package static func acceptsGzip(_ request: Request) -> Bool {
        let header = request.headers[.acceptEncoding] ?? ""
        return header.split(separator: ",").contains { part in
            let fields = part.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
            return fields.first == "gzip" && !fields.dropFirst().contains { $0.replacingOccurrences(of: " ", with: "") == "q=0" }
        }
    }
}

/// A pull answer written as it is made: JSON lines (`application/x-ndjson`), compressed chunk by chunk
/// when the caller takes gzip, each chunk with a sync flush so that the answer still streams. Shared by a
/// daemon's pull route and a relay's.
package enum StreamedAnswer {
    /// A response whose body `write` makes, handing each buffer to `send` (which writes it, compressed
    /// when `gzip`, waits for the caller to take it, and empties it).
    package static func response(
        gzip: Bool,
        _ write: @escaping @Sendable (_ send: (inout ByteBuffer) async throws -> Void) async throws -> Void
    ) -> Response {
        let body = ResponseBody { writer in
            let compressor = gzip ? CompressionAlgorithm.gzip(configuration: PullRoute.answerCompression).compressor : nil
            try compressor?.startStream()
            try await write { buffer in
                if let compressor {
                    try await writer.write(try buffer.compressStream(with: compressor, flush: .sync))
                } else {
                    try await writer.write(buffer)
                }
                buffer.clear()
            }
            if let compressor {
                var end = ByteBuffer()
                try await writer.write(try end.compressStream(with: compressor, flush: .finish))
                try compressor.finishStream()
            }
            try await writer.finish(nil)
        }
        var headers: HTTPFields = [.contentType: "application/x-ndjson"]
        if gzip { headers[.contentEncoding] = "gzip" }
        return Response(status: .ok, headers: headers, body: body)
    }
}
