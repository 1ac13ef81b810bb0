/// The one shape of every error Ferry throws, whatever the module: what kind of fault it is (a
/// stable ``code``), what happened and what to do about it (``CustomStringConvertible/description``),
/// the error that caused it (``cause``), and whether trying again later can help (``isRetryable``).
///
/// Errors keep Swift's pattern matching (an enum's cases, a struct's fields); the shape is what a
/// program that handles any Ferry error, a log line or a retry loop can rely on:
///
/// ```swift
/// } catch let error as any FerryError {
///     logger.error("\(error)", metadata: ["code": "\(error.codeName)"])
///     if error.isRetryable { scheduleRetry() }
/// }
/// ```
///
/// A message that puts a caught error into its text also keeps that error as its ``cause``: a
/// caller can still ask the underlying error (a database's result code, a socket's errno) for more.
public protocol FerryError: Error, CustomStringConvertible {
    /// The kinds of fault this error type reports: an enum, most often of `String` raw values.
    associatedtype Code: Hashable, Sendable

    /// The kind of fault: stable across releases, for programs to switch on.
    var code: Code { get }
    /// The kind of fault as a word, for logs and metrics: the code's raw value when it is a
    /// `String` (validation errors, whose codes are Core Data's numbers, give the case's name).
    var codeName: String { get }
    /// The error that caused this one, as it was thrown; nil when Ferry found the fault itself.
    var cause: (any Error)? { get }
    /// Whether the same operation may succeed later with nothing changed here (a busy lock, a peer
    /// restarting, a full disk being cleared), as opposed to a fault someone must fix first.
    var isRetryable: Bool { get }
}

extension FerryError {
    public var cause: (any Error)? { nil }
    public var isRetryable: Bool { false }
}

extension FerryError where Code: RawRepresentable, Code.RawValue == String {
    public var codeName: String { code.rawValue }
}

extension ModelError: FerryError {}
