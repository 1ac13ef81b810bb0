import Foundation
import FerryModel
import FerrySync

/// Whether the API's store is open. A daemon whose store cannot be opened at
/// start (a read-only or full file system, missing permissions) still serves
/// what needs no store — health, status, metrics — and, when the store could be
/// opened read-only, reads (state and pulls) from that view; the other routes
/// answer 503 with the reason, until the store opens and the gate opens.
public actor StoreGate {
    /// The store's state as the API sees it.
    public enum State: Sendable {
        /// The store is open; requests go to this endpoint.
        case open(ReplicationEndpoint)
        /// The store could not be opened for writing, for `reason`, since `since`;
        /// `readOnlyView` serves reads meanwhile, when the store could be opened read-only.
        case unavailable(reason: String, since: Date, readOnlyView: ReplicationEndpoint?)
    }

    /// The current state.
    public private(set) var state: State

    /// A gate already open on `endpoint`.
    public init(open endpoint: ReplicationEndpoint) {
        state = .open(endpoint)
    }

    /// A gate whose store could not be opened, for `reason`.
    public init(unavailable reason: String, since: Date = Date()) {
        state = .unavailable(reason: reason, since: since, readOnlyView: nil)
    }

    /// Opens the gate: from now on requests reach `endpoint`.
    public func open(_ endpoint: ReplicationEndpoint) {
        state = .open(endpoint)
    }

    /// Records a newer reason why the store still cannot be opened (the time it started is
    /// kept), and the read-only view that serves reads meanwhile, if any.
    public func stillUnavailable(_ reason: String, readOnlyView: ReplicationEndpoint?) {
        if case .unavailable(_, let since, _) = state {
            state = .unavailable(reason: reason, since: since, readOnlyView: readOnlyView)
        }
    }

    /// The endpoint, when the store is open.
    public func endpoint() throws(StoreUnavailable) -> ReplicationEndpoint {
        switch state {
        case .open(let endpoint): return endpoint
        case .unavailable(let reason, _, _): throw StoreUnavailable(reason: reason)
        }
    }

    /// An endpoint to read from: the store when open, else its read-only view if there is one.
    public func readableEndpoint() throws(StoreUnavailable) -> ReplicationEndpoint {
        switch state {
        case .open(let endpoint), .unavailable(_, _, let endpoint?): return endpoint
        case .unavailable(let reason, _, nil): throw StoreUnavailable(reason: reason)
        }
    }
}

/// The store is not open (yet), and why.
public struct StoreUnavailable: FerryError, Sendable {
    /// The kinds of ``StoreUnavailable``.
    public enum Code: String, Hashable, Sendable {
        /// The store is not open: the daemon is starting, or the store's surroundings keep it shut.
        case storeNotOpen
    }

    /// Why the store cannot be opened (the gate keeps only this: the error met opening the store
    /// is in the daemon's log).
    public let reason: String

    /// The store is not open for `reason`.
    public init(reason: String) {
        self.reason = reason
    }

    /// Always ``Code/storeNotOpen``.
    public var code: Code { .storeNotOpen }

    /// Always: the daemon keeps trying to open the store, and serves once it opens.
    public var isRetryable: Bool { true }

    public var description: String {
        "the store is not open: \(reason); the daemon keeps trying and resumes syncing by itself once it opens"
    }
}
