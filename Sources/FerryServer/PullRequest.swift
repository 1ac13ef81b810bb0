import Foundation
import Hummingbird
import FerryStore

/// What a pull asks for, as a daemon and a relay both read it (docs/PROTOCOL.md): the caller's
/// version vector, how many change sets at most, how long to hold an empty answer (a relay's long
/// poll; a daemon answers at once), and the caller's store UUID (what a relay's retention waits for).
///
/// `POST /v1/changesets/pull` carries it as a JSON body, `{"after": VECTOR, "limit": N,
/// "wait_ms": N, "store": UUID}`, every member optional but none null; the older
/// `GET /v1/changesets?after=VECTOR&limit=N` in the query.
package struct PullRequest: Sendable, Equatable {
    /// The caller's version vector: what it has.
    package var after: VersionVector = [:]
    /// The most change sets the answer may hold.
    package var limit = 500
    /// How long to hold the answer while there is nothing new, in milliseconds.
    package var waitMilliseconds = 0
    /// The caller's store, when it says.
    package var store: UUID?

    /// Largest body of a POST pull (a vector of about 20,000 origins).
    package static let maximumRequestBytes = 1 << 20
    /// Most change sets one pull request may ask for.
    package static let maximumLimit = 10_000

    package init(after: VersionVector = [:], limit: Int = 500, waitMilliseconds: Int = 0, store: UUID? = nil) {
        self.after = after
        self.limit = limit
        self.waitMilliseconds = waitMilliseconds
        self.store = store
    }

    /// The pull of a `POST /v1/changesets/pull`, read from its body.
    /// - Throws: ``APIError`` 413 for a body past ``maximumRequestBytes``, 400 for one that is not
    ///   such an object or asks for a limit out of range or a negative wait.
    package static func fromBody(of request: Request) async throws(APIError) -> PullRequest {
        let body: ByteBuffer
        do {
            body = try await request.body.collect(upTo: maximumRequestBytes)
        } catch {
            throw .contentTooLarge("a pull request's body takes at most \(maximumRequestBytes) bytes")
        }
        let pull: PullRequest
        do {
            pull = try WireJSON.decode(Body.self, from: Data(buffer: body)).request
        } catch {
            throw .badRequest("a pull's body must be {\"after\": {\"<store UUID>\": 12, …}, \"limit\": 500}"
                              + " (and, for a relay, \"wait_ms\" and \"store\"): \(error)", cause: error)
        }
        try pull.validate()
        return pull
    }

    /// The pull of a `GET /v1/changesets?after=VECTOR&limit=N`, read from its query.
    /// - Throws: ``APIError`` 400 for a vector that is not JSON or a limit out of range.
    package static func fromQuery(of request: Request) throws(APIError) -> PullRequest {
        var pull = PullRequest()
        do {
            // A form-encoded query writes spaces as '+', which never occurs in a vector's JSON otherwise.
            let after = (request.uri.queryParameters.get("after") ?? "{}").replacingOccurrences(of: "+", with: " ")
            pull.after = try ChangeSetCodec.decodeVector(after)
        } catch {
            throw .badRequest("'after' must be a version vector as JSON, e.g. {\"<store UUID>\":12}: \(error.description)", cause: error)
        }
        let limitText = request.uri.queryParameters.get("limit") ?? "500"
        guard let limit = Int(limitText) else {
            throw .badRequest("'limit' must be a whole number from 1 to \(maximumLimit); found '\(limitText)'")
        }
        pull.limit = limit
        try pull.validate()
        return pull
    }

    private func validate() throws(APIError) {
        guard (1...Self.maximumLimit).contains(limit) else {
            throw .badRequest("'limit' must be a whole number from 1 to \(Self.maximumLimit); found \(limit)")
        }
        guard waitMilliseconds >= 0 else {
            throw .badRequest("'wait_ms' must be 0 or more milliseconds; found \(waitMilliseconds)")
        }
    }

    /// The JSON body: each member may be left out, but none may be null.
    private struct Body: Decodable {
        var request = PullRequest()

        private enum CodingKeys: String, CodingKey { case after, limit, waitMilliseconds = "wait_ms", store }

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            if container.contains(.after) { request.after = try container.decode(WireVector.self, forKey: .after).vector }
            if container.contains(.limit) { request.limit = try container.decode(Int.self, forKey: .limit) }
            if container.contains(.waitMilliseconds) {
                request.waitMilliseconds = try container.decode(Int.self, forKey: .waitMilliseconds)
            }
            if container.contains(.store) {
                let text = try container.decode(String.self, forKey: .store)
                guard let uuid = ObjectURIComponents.uuid(text) else {
                    throw DecodingError.dataCorruptedError(forKey: .store, in: container, debugDescription: "'store' must be a store UUID")
                }
                request.store = uuid
            }
        }
    }
}
