import Foundation
import Synchronization
import Hummingbird
import Logging
import Metrics
import CompressNIO
import FerryStore
import FerrySync

/// `POST /v1/changesets`: JSON lines in (as they are, or gzip within
/// `server.max_body_bytes`), every line checked before any is applied; answers
/// the ``ApplyReport``.
struct PushRoute: Sendable {
    let gate: StoreGate
    let maxBodyBytes: Int
    /// The push bodies that may be held at once (`server.max_concurrent_bodies`): with
    /// `maxBodyBytes` they bound what pushes can make the daemon hold.
    let bodySlots: BodySlots

    /// The answer to one push request. `allowedOrigins`, when given, are the origins the
    /// caller's token may push change sets of (`origins=` in the tokens file).
    func answer(_ request: Request, allowedOrigins: Set<UUID>? = nil, logger: Logger) async throws -> Response {
        guard bodySlots.take() else { throw Self.busy(bodySlots) }
        defer { bodySlots.give() }
        let lines = try await PushBodies.lines(of: request, maxBodyBytes: maxBodyBytes, pushableBy: allowedOrigins, logger: logger)
        return Response.json(try await apply(lines, logger: logger).json)
    }

    /// The error of a push refused because every body slot is taken.
    static func busy(_ slots: BodySlots) -> APIError {
        .busy("this daemon holds \(slots.capacity) push bodies already (server.max_concurrent_bodies); send again shortly")
    }

    /// Applies pushed change-set lines (every line checked first), as a push request's body or one
    /// batch of a push stream (``PushStreamRoute``): the report, or the error the sender is answered.
    func apply(_ lines: [String], logger: Logger) async throws(APIError) -> ApplyReport {
        let endpoint = try await gate.endpointOrUnavailable()
        do {
            let report = try await endpoint.receive(lines: lines)
            ReceivedMetrics.record(report, via: "push")
            return report
        } catch let error as ReplayError {
            switch error {
            case .malformed: throw APIError.badRequest(error.description, cause: error)
            case .untrusted: throw APIError.untrusted(error.description, cause: error)
            case .busy: throw APIError.unavailable(error.description, cause: error)
            case .notReplicaStore: throw APIError.internalError(error.description, cause: error)
            }
        } catch let error as HistoryError {
            // Past this store's tombstone horizon: the sender must start again from a snapshot.
            throw APIError.gone(error.description, cause: error)
        } catch {
            // The store failed (disk full, read-only, I/O): what was not applied is not recorded,
            // and the sender keeps it and sends it again after its backoff.
            Counter(label: "ferry_store_errors_total", dimensions: [("operation", "push")]).increment()
            logger.error("could not apply pushed change sets: \(error)")
            throw APIError.unavailable("this store cannot take change sets now (\(error)); nothing more was applied; send them again later", cause: error)
        }
    }
}

/// What a push's body holds, read the same way by a daemon's push route and a relay's.
package enum PushBodies {
    /// The change-set lines of a push's body: read within `maxBodyBytes` (413 past it), unpacked when
    /// it says `Content-Encoding: gzip` (within the same bound; 415 for other encodings), split into
    /// lines (400 when there are none). Shared with the relay's push route.
    package static func lines(of request: Request, maxBodyBytes: Int) async throws(APIError) -> [String] {
        try await lines(of: request, maxBodyBytes: maxBodyBytes, oversize: nil).lines
    }

    /// ``lines(of:maxBodyBytes:)``, except that with `oversize`, a body past `maxBodyBytes` (as sent, or
    /// unpacked) is read on, within `oversize.maxBytes`, when one of `oversize.slots` is free (503 busy
    /// otherwise), and must then hold one change set alone (413 otherwise): how a relay takes a change
    /// set larger than its usual request bodies, one at a time. Returns whether a slot was taken; the
    /// caller gives it back once done with the lines (a failure here gives it back itself).
    package static func lines(of request: Request, maxBodyBytes: Int,
                              oversize: OversizeBodies?) async throws(APIError) -> (lines: [String], tookOversizeSlot: Bool) {
        var holding = false
        var limit = maxBodyBytes
        /// Takes the oversize slot and raises the limit to it; false when there is none to take (none
        /// offered, or this body holds it already).
        func raiseLimit() throws(APIError) -> Bool {
            guard let oversize, !holding else { return false }
            guard oversize.slots.take() else {
                throw .busy("this relay is taking another change set larger than server.max_body_bytes (\(maxBodyBytes) bytes), one at a time; " +
                            "send again shortly")
            }
            holding = true
            limit = oversize.maxBytes
            return true
        }
        /// Why a body past `limit` is refused (`unpacked`: once unpacked).
        func tooLarge(unpacked: Bool) -> APIError {
            if let oversize, holding {
                return .contentTooLarge("the request body is larger than server.max_change_set_bytes (\(oversize.maxBytes) bytes), " +
                                        "the most this relay takes for one change set alone; raise it on the relays")
            }
            return .contentTooLarge("the request body \(unpacked ? "unpacks to more than" : "is larger than") server.max_body_bytes (\(maxBodyBytes) bytes); " +
                                    "send fewer change sets per request")
        }
        do throws(APIError) {
            var body = ByteBuffer()
            do {
                for try await var part in request.body {
                    if body.readableBytes + part.readableBytes > limit {
                        guard try raiseLimit(), body.readableBytes + part.readableBytes <= limit else { throw tooLarge(unpacked: false) }
                    }
                    // (The first part is the buffer the rest are added to: a body of one part is not copied.)
                    if body.readableBytes == 0 { body = part } else { body.writeBuffer(&part) }
                }
            } catch let error as APIError {
                throw error
            } catch {
                throw APIError.badRequest("the request body could not be read: \(error)", cause: error)
            }
            var text: String?
            switch request.headers[.contentEncoding]?.lowercased() {
            case nil, "identity":
                break
            case "gzip":
                let packed = body
                // A large body goes straight into its text (``GzipBodyText``), within the limit its
                // trailer's length claims; anything that body turns out not to be is unpacked below.
                // (A claim past the limit is left to the usual unpacking too, which measures it.)
                if let length = GzipBodyText.recordedLength(of: packed), length >= GzipBodyText.smallestDirect {
                    if length > limit { _ = try raiseLimit() }
                    if length <= limit { text = GzipBodyText.text(of: packed, length: length) }
                }
                if text != nil { break }
                /// The body unpacked within `limit`; nil past it.
                func unpack() throws(APIError) -> ByteBuffer? {
                    do {
                        var copy = packed
                        let unpacked = try copy.decompress(with: .gzip(), maxSize: limit)
                        // (The library may stop a little past maxSize; the limit is checked here too.)
                        return unpacked.readableBytes <= limit ? unpacked : nil
                    } catch let error as CompressNIOError where error == .bufferOverflow {
                        return nil
                    } catch {
                        throw .badRequest("the body says Content-Encoding: gzip but is not valid gzip data", cause: error)
                    }
                }
                var unpacked = try unpack()
                if unpacked == nil, try raiseLimit() { unpacked = try unpack() }
                guard let unpacked else { throw tooLarge(unpacked: true) }
                body = unpacked
            case let other?:
                throw APIError.unsupportedMediaType("Content-Encoding '\(other)' is not supported; send the body as is or gzip")
            }
            let lines = text.map(JSONLines.split) ?? body.withUnsafeReadableBytes { JSONLines.split($0) }
            guard !lines.isEmpty else {
                throw APIError.badRequest("the body holds no change sets; send one change set (a JSON object) per line")
            }
            if let oversize, holding, lines.count > 1 {
                throw APIError.contentTooLarge("the request body is larger than server.max_body_bytes (\(maxBodyBytes) bytes) " +
                                               "and holds \(lines.count) change sets; send fewer change sets per request " +
                                               "(one change set alone may be up to server.max_change_set_bytes, \(oversize.maxBytes) bytes)")
            }
            return (lines, holding)
        } catch {
            if holding { oversize?.slots.give() }
            throw error
        }
    }

    /// ``lines(of:maxBodyBytes:)``, refused whole (403, counted and logged without the body or the token)
    /// when a line is a change set of an origin outside `origins` (nil: any origin may be pushed).
    package static func lines(of request: Request, maxBodyBytes: Int, pushableBy origins: Set<UUID>?,
                              logger: Logger) async throws(APIError) -> [String] {
        let lines = try await self.lines(of: request, maxBodyBytes: maxBodyBytes)
        try check(lines, pushableBy: origins, logger: logger)
        return lines
    }

    /// ``check(_:pushableBy:)`` for a push's lines, counted and logged when refused (nil: any origin may be pushed).
    package static func check(_ lines: [String], pushableBy origins: Set<UUID>?, logger: Logger) throws(APIError) {
        guard let origins else { return }
        do {
            try check(lines, pushableBy: origins)
        } catch {
            // The message names the line and origin only.
            Counter(label: "ferry_requests_forbidden_total", dimensions: [("reason", "origin")]).increment()
            logger.warning("refused a push of change sets of an origin its token may not push for", metadata: ["why": .string(error.description)])
            throw error
        }
    }

    /// Refuses the whole push (403, nothing applied) when a line is a change set of an origin the
    /// token may not push for; a line whose origin cannot be read is left to the replay's checks.
    /// The origin is read with the parser the replay's decoder reads it with (`JSONValue`), so that
    /// a line cannot show this check one origin and the replay another (duplicate keys, UUID spellings);
    /// its changes are parsed as strictly but not kept (a relay's push may be one change set of hundreds
    /// of megabytes).
    package static func check(_ lines: [String], pushableBy origins: Set<UUID>) throws(APIError) {
        for (index, line) in lines.enumerated() {
            guard let text = (try? JSONValue.parseWithoutChanges(line))?["origin"]?.stringValue,
                  let origin = ObjectURIComponents.uuid(text) else { continue }
            guard origins.contains(origin) else {
                let allowed = origins.map(\.uuidString).sorted().joined(separator: ", ")
                throw .forbidden("line \(index + 1) is a change set of origin \(origin.uuidString); " +
                                 "this token may push change sets of \(allowed) only (origins= in the tokens file); nothing was applied")
            }
        }
    }
}

/// How a relay takes a push body larger than `server.max_body_bytes`: one change set alone, within
/// `maxBytes` (its `server.max_change_set_bytes`), one such body at a time (its one slot).
package struct OversizeBodies: Sendable {
    package let maxBytes: Int
    package let slots = BodySlots(capacity: 1)

    package init(maxBytes: Int) {
        self.maxBytes = maxBytes
    }
}

/// A count of what is in use out of a fixed capacity, taken and given back without waiting.
package final class BodySlots: Sendable {
    package let capacity: Int
    private let used = Atomic<Int>(0)

    package init(capacity: Int) {
        self.capacity = max(1, capacity)
    }

    /// Takes a slot; false (nothing taken) when all are in use.
    package func take() -> Bool {
        var current = used.load(ordering: .relaxed)
        while current < capacity {
            let (exchanged, original) = used.compareExchange(expected: current, desired: current + 1, ordering: .acquiringAndReleasing)
            if exchanged { return true }
            current = original
        }
        return false
    }

    /// How many are taken now.
    package var inUse: Int { used.load(ordering: .relaxed) }

    /// Gives a taken slot back.
    package func give() {
        used.subtract(1, ordering: .acquiringAndReleasing)
    }
}
