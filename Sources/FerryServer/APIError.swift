import Foundation
import Hummingbird
import FerryModel
import FerryStore

/// Why the API refused or could not serve a request: each case one HTTP status,
/// answered as `{"error":{"message":…}}` (``ErrorMessage``) with a message that
/// says what happened and what to do. A case that reports an error met on the way (the store's,
/// a body's decoding) keeps it as its `cause` (``cause``); the answer carries only the message.
public enum APIError: Error, Sendable, Equatable, HTTPResponseError, CustomStringConvertible {
    /// No token, or one the tokens file does not list: 401, without detail.
    case unauthorized
    /// The token's role does not allow this route: 403.
    case forbidden(String)
    /// The request is malformed (a bad parameter, a body that is not change sets): 400; `cause`
    /// is the error met reading it, when there was one.
    case badRequest(String, cause: (any Error)? = nil)
    /// No such thing (a peer name the configuration does not have): 404.
    case notFound(String)
    /// The change sets asked for were purged from this store's history, or the change sets sent
    /// do not know everything made before its tombstone horizon: 410; `cause` is the store's error.
    case gone(String, cause: (any Error)? = nil)
    /// A pushed change set does not prove it comes from its origin (no signature, a wrong one, an
    /// origin not trusted, a revoked key): 422; nothing was applied. `cause` is the refusal met.
    case untrusted(String, cause: (any Error)? = nil)
    /// The body is larger than the server takes: 413.
    case contentTooLarge(String)
    /// The body's encoding is not one the server reads: 415.
    case unsupportedMediaType(String)
    /// The store or the daemon cannot serve this now (not open, busy, failing): 503; `cause` is
    /// the error met, when there was one.
    case unavailable(String, cause: (any Error)? = nil)
    /// The daemon holds as many request bodies as it takes: 503 with `Retry-After: 1`.
    case busy(String)
    /// The store failed in a way that is a bug or needs an operator: 500; `cause` is the store's error.
    case internalError(String, cause: (any Error)? = nil)

    /// The answer's status: its ``code``'s.
    public var status: HTTPResponse.Status { code.status }

    public var description: String {
        guard let message else { return "unauthorized" }
        return Self.excerpt(message)
    }

    /// The message in full (``description`` is cut to ``longestMessage``); nil for ``unauthorized``.
    private var message: String? {
        switch self {
        case .unauthorized: nil
        case .forbidden(let message), .badRequest(let message, _), .notFound(let message), .gone(let message, _), .contentTooLarge(let message),
             .unsupportedMediaType(let message), .untrusted(let message, _), .unavailable(let message, _), .busy(let message),
             .internalError(let message, _):
            message
        }
    }

    /// Errors are equal when they are the same case with the same message (causes are not compared).
    public static func == (lhs: APIError, rhs: APIError) -> Bool {
        lhs.code == rhs.code && lhs.message == rhs.message
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

extension APIError: FerryError {
    /// The kinds of ``APIError``: its cases, each one HTTP status.
    public enum Code: String, Hashable, Sendable {
        /// ``APIError/unauthorized``: 401.
        case unauthorized
        /// ``APIError/forbidden(_:)``: 403.
        case forbidden
        /// ``APIError/badRequest(_:cause:)``: 400.
        case badRequest
        /// ``APIError/notFound(_:)``: 404.
        case notFound
        /// ``APIError/gone(_:cause:)``: 410.
        case gone
        /// ``APIError/untrusted(_:cause:)``: 422.
        case untrusted
        /// ``APIError/contentTooLarge(_:)``: 413.
        case contentTooLarge
        /// ``APIError/unsupportedMediaType(_:)``: 415.
        case unsupportedMediaType
        /// ``APIError/unavailable(_:cause:)``: 503.
        case unavailable
        /// ``APIError/busy(_:)``: 503 with `Retry-After`.
        case busy
        /// ``APIError/internalError(_:cause:)``: 500.
        case internalError

        /// The HTTP status of an error of this kind.
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
    }

    /// The case, without its message.
    public var code: Code {
        switch self {
        case .unauthorized: .unauthorized
        case .forbidden: .forbidden
        case .badRequest: .badRequest
        case .notFound: .notFound
        case .gone: .gone
        case .untrusted: .untrusted
        case .contentTooLarge: .contentTooLarge
        case .unsupportedMediaType: .unsupportedMediaType
        case .unavailable: .unavailable
        case .busy: .busy
        case .internalError: .internalError
        }
    }

    /// The error met, for the cases that keep one (``APIError/badRequest(_:cause:)``, ``APIError/gone(_:cause:)``,
    /// ``APIError/untrusted(_:cause:)``, ``APIError/unavailable(_:cause:)``, ``APIError/internalError(_:cause:)``).
    public var cause: (any Error)? {
        switch self {
        case .badRequest(_, let cause), .gone(_, let cause), .untrusted(_, let cause), .unavailable(_, let cause), .internalError(_, let cause):
            cause
        case .unauthorized, .forbidden, .notFound, .contentTooLarge, .unsupportedMediaType, .busy:
            nil
        }
    }

    /// The 503s: the same request may be served later (the store opens, a body slot frees).
    public var isRetryable: Bool { status == .serviceUnavailable }
}
