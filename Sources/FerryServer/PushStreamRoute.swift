import Foundation
import Hummingbird
import Logging
import NIOCore
import ServiceLifecycle
import FerryStore
import FerrySync

/// `POST /v1/changesets/stream`: a standing push (docs/PROTOCOL.md, "Push streams").
///
/// The request's body is a sequence of batches, each the change-set lines of one push followed
/// by an empty line; the answer (200, JSON lines) carries one ``ApplyReport`` line per batch, in
/// order, written as soon as the batch is applied. A peer keeps one such request open and sends
/// each new change set on it, so that a save reaches this store without a request of its own
/// (the request's setup was most of what a push cost on loopback: docs/PERFORMANCE.md).
///
/// Each batch is checked and applied as a push request's body is (``PushRoute/apply(_:logger:)``),
/// within `server.max_body_bytes` and holding one of `server.max_concurrent_bodies` while it is
/// applied. A batch refused (malformed, untrusted, an origin the token may not push for, too
/// large, the store unavailable) is answered by one error line, `{"error":{"message":…,"status":N}}`
/// with the status a push request would have had, and the answer ends there: nothing after the
/// refused batch is read. The answer also ends when the request's body ends, and when the daemon
/// shuts down: a batch being applied then stops between change sets (what was applied stays
/// applied; its sender, which may get no line for it, sends the rest again).
struct PushStreamRoute: Sendable {
    let push: PushRoute

    /// The byte that ends a line, and (on a line of its own) a batch.
    private static let newline = UInt8(ascii: "\n")

    /// The answer to one push stream. `allowedOrigins`, when given, are the origins the caller's
    /// token may push change sets of (`origins=` in the tokens file).
    func answer(_ request: Request, allowedOrigins: Set<UUID>?, logger: Logger) async throws -> Response {
        // A request with no body at all (neither a length nor chunks) cannot be a stream.
        if request.headers[.transferEncoding] == nil, request.headers[.contentLength].flatMap(Int.init) ?? 0 == 0 {
            throw APIError.badRequest("a push stream's body is batches of change-set lines, each batch followed by an empty line; this request has none")
        }
        // A store that is not open refuses the stream itself (503), not its first batch.
        _ = try await push.gate.endpointOrUnavailable()
        let push = self.push
        return Response(status: .ok, headers: [.contentType: "application/x-ndjson"], body: ResponseBody { writer in
            // The task that applies a batch writes its answer line itself: handing the line to another
            // task to write would wake one more thread per push, on a processor the store's readers want
            // at that moment (W4 in docs/PERFORMANCE.md). The daemon's shutdown cancels the
            // reading and applying (between change sets); the answer then ends.
            let answers = AnswerWriter(writer)
            await cancelWhenGracefulShutdown {
                await Self.apply(request.body, push: push, allowedOrigins: allowedOrigins, logger: logger) { line in
                    try await answers.write(line)
                }
            }
            writer = answers.writer
            try await writer.finish(nil)
        })
    }

    /// The response's writer while the task that applies batches writes their answers: that task
    /// is its only user until it ends, and the route takes the writer back only then.
    private final class AnswerWriter: @unchecked Sendable {
        var writer: any ResponseBodyWriter

        init(_ writer: any ResponseBodyWriter) {
            self.writer = writer
        }

        func write(_ line: String) async throws {
            try await writer.write(ByteBuffer(string: line + "\n"))
        }
    }

    /// Reads `body` batch by batch, applies each, and hands `answer` its report line; after a refused
    /// batch, its error line, and nothing more is read. Ends when the body ends, or the task is cancelled.
    private static func apply(_ body: RequestBody, push: PushRoute, allowedOrigins: Set<UUID>?, logger: Logger,
                              answer: (String) async throws -> Void) async {
        var batches = BatchReader(body: body, maxBytes: push.maxBodyBytes)
        do {
            while let lines = try await batches.next() {
                guard push.bodySlots.take() else { throw PushRoute.busy(push.bodySlots) }
                let report: ApplyReport
                do {
                    defer { push.bodySlots.give() }
                    try PushBodies.check(lines, pushableBy: allowedOrigins, logger: logger)
                    report = try await push.apply(lines, logger: logger)
                }
                try await answer(report.json)
            }
        } catch let error as APIError {
            try? await answer(WireJSON.encode(ErrorMessage(error.description, status: Int(error.status.code))))
        } catch {
            // The body could not be read or the answer written (the connection closed), or the daemon
            // is stopping: nothing (more) to answer.
            logger.debug("push stream ended: \(error)")
        }
    }

    /// Reads a push stream's body batch by batch.
    private struct BatchReader {
        var iterator: RequestBody.AsyncIterator
        let maxBytes: Int
        /// Bytes read and not yet part of a batch handed out.
        var pending = ByteBuffer()
        var scanned = 0
        var ended = false

        init(body: RequestBody, maxBytes: Int) {
            iterator = body.makeAsyncIterator()
            self.maxBytes = maxBytes
        }

        /// The next batch's lines (empty lines left out); nil when the body ends. Bytes after the last
        /// batch's empty line (a batch cut off by the end of the body) are dropped: that batch was never
        /// whole, and its sender did not get an answer for it.
        mutating func next() async throws -> [String]? {
            while true {
                if let lines = try takeBatch() { return lines }
                if ended { return nil }
                guard pending.readableBytes <= maxBytes else { throw tooLarge }
                guard var chunk = try await iterator.next() else {
                    ended = true
                    continue
                }
                pending.writeBuffer(&chunk)
            }
        }

        /// The lines up to the first empty line in `pending`, taken out of it. `scanned` bytes of
        /// `pending` are known to hold none, so a batch that comes in many chunks is scanned once.
        private var tooLarge: APIError {
            .contentTooLarge("a batch of the push stream is larger than server.max_body_bytes (\(maxBytes) bytes); send fewer change sets per batch")
        }

        private mutating func takeBatch() throws(APIError) -> [String]? {
            while true {
                let from = scanned
                let end: Int? = pending.withUnsafeReadableBytes { bytes in
                    var index = from
                    while index < bytes.count {
                        if bytes[index] == PushStreamRoute.newline, index == 0 || bytes[index - 1] == PushStreamRoute.newline { return index }
                        index += 1
                    }
                    return nil
                }
                guard let end else {
                    scanned = pending.readableBytes
                    return nil
                }
                scanned = 0
                guard end + 1 <= maxBytes else { throw tooLarge }
                let lines = pending.readSlice(length: end + 1).map { $0.withUnsafeReadableBytes { JSONLines.split($0) } } ?? []
                pending.discardReadBytes()
                // A lone empty line (no change set before it) is not a batch: it is skipped.
                if !lines.isEmpty { return lines }
            }
        }
    }
}
