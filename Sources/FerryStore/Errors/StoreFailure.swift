import Foundation
import FerryModel

/// A query or write that failed inside a store: what happened, the error that
/// caused it (the database's own, kept for whoever needs more than the message),
/// and whether trying again later may succeed (a busy lock, a full disk, an I/O
/// error) or not (a corrupt file, a bug).
///
/// Written as a string where there is no cause to keep:
/// `throw SaveError.storeFailed("entity 'X' is not in this store's model")`.
public struct StoreFailure: Error, Sendable, CustomStringConvertible, ExpressibleByStringInterpolation {
    /// What happened, for a person.
    public let message: String
    /// The error that caused it, if any.
    public let cause: (any Error)?
    /// Whether the same operation may succeed later without anyone changing anything here.
    public let isRetryable: Bool

    /// A failure saying `message`, caused by `cause`.
    public init(_ message: String, cause: (any Error)? = nil, isRetryable: Bool = false) {
        self.message = message
        self.cause = cause
        self.isRetryable = isRetryable
    }

    public init(stringLiteral value: String) {
        self.init(value)
    }

    public init(stringInterpolation: DefaultStringInterpolation) {
        self.init(String(stringInterpolation: stringInterpolation))
    }

    public var description: String { message }

    /// `error` as a store failure: itself when it is one (or a ``StoreError`` or ``SaveError``
    /// carrying one), else a failure that says what it says and keeps it as the cause.
    public init(_ error: any Error) {
        switch error {
        case let failure as StoreFailure: self = failure
        case StoreError.storeFailure(let failure): self = failure
        case SaveError.storeFailed(let failure): self = failure
        default: self.init(String(describing: error), cause: error)
        }
    }
}

extension StoreFailure: Hashable {
    /// Failures are equal when they say the same and agree on retrying (causes are not compared).
    public static func == (lhs: StoreFailure, rhs: StoreFailure) -> Bool {
        lhs.message == rhs.message && lhs.isRetryable == rhs.isRetryable
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(message)
        hasher.combine(isRetryable)
    }
}

extension StoreFailure: FerryError {
    /// A store failure has one kind; what failed is in its message and its ``cause``.
    public enum Code: String, Hashable, Sendable {
        /// A query or write failed inside the store.
        case storeFailure
    }

    public var code: Code { .storeFailure }
}
