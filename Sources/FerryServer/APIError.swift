import Foundation
import Hummingbird
import FerryStore

/// Why the API refused or could not serve a request: each case one HTTP status,
/// answered as `{"error":{"message":…}}` (``ErrorMessage``) with a message that
/// says what happened and what to do.
public enum APIError: Error, Sendable, Equatable, HTTPResponseError, CustomStringConvertible {
    /// No token, or one the tokens file does not list: 401, without detail.
    case unauthorized
    /// The token's role does not allow this route: 403.
    case forbidden(String)
    /// The request is malformed (a bad parameter, a body that is not change sets): 400.
    case badRequest(String)
    /// No such thing (a peer name the configuration does not have): 404.
    case notFound(String)
    /// The change sets asked for were purged from this store's history, or the change sets sent
    /// do not know everything made before its tombstone horizon: 410.
    case gone(String)
    /// A pushed change set does not prove it comes from its origin (no signature, a wrong one, an
    /// origin not trusted, a revoked key): 422; nothing was applied.
    case untrusted(String)
    /// The body is larger than the server takes: 413.
    case contentTooLarge(String)
    /// The body's encoding is not one the server reads: 415.
    case unsupportedMediaType(String)
    /// The store or the daemon cannot serve this now (not open, busy, failing): 503.
    case unavailable(String)
    /// The daemon holds as many request bodies as it takes: 503 with `Retry-After: 1`.
    case busy(String)
    /// The store failed in a way that is a bug or needs an operator: 500.
    case internalError(String)

    public var status: HTTPResponse.Status {
        switch self {
        case .unauthorized: .unauthorized
        case .forbidden: .forbidden
        case .badRequest: .badRequest
        case .notFound: .notFound
        case .gone: .gone
        case .contentTooLarge: .contentTooLarge
        case .unsupportedMediaType: .unsupportedMediaType
        case .untrusted: .unprocessableContent
        case .unavailable, .busy: .serviceUnavailable
        case .internalError: .internalServerError
        }
    }

    public var description: String {
        switch self {
        case .unauthorized: "unauthorized"
        case .forbidden(let message), .badRequest(let message), .notFound(let message), .gone(let message), .contentTooLarge(let message),
             .unsupportedMediaType(let message), .untrusted(let message), .unavailable(let message), .busy(let message), .internalError(let message):
            Self.excerpt(message)
        }
    }

    /// The longest message an answer (or a log line) carries: messages quote what was sent, and
    /// a request must not buy an answer many times its size (a 64 KB gzip body once unpacked into
    /// a 64 MiB number that came back whole).
    static let longestMessage = 1_000

    /// `message`, cut to ``longestMessage`` characters with a note of its full length.
    static func excerpt(_ message: String) -> String {
        guard message.utf8.count > longestMessage else { return message }
        return String(message.prefix(longestMessage)) + "… (cut: \(message.count) characters in all)"
    }

    public func response(from request: Request, context: some RequestContext) throws -> Response {
        var headers: HTTPFields = [.contentType: "application/json"]
        if case .unauthorized = self { headers[.wwwAuthenticate] = "Bearer" }
        if case .busy = self { headers[.retryAfter] = "1" }
        return Response(status: status, headers: headers,
                        body: ResponseBody(byteBuffer: ByteBuffer(string: WireJSON.encode(ErrorMessage(description)))))
    }
}
