import Foundation
import FerryModel

/// One peer's session: a state machine that takes what happens (the pull interval, the clock,
/// a commit to the store, a round's end) and answers which round to run, with the time passed in,
/// so it is tested step by step without sockets or waiting:
///
/// ```
///            start                   finish(error: nil)
///   idle ───────────▶ syncing ─────────────────────────▶ idle
///    ▲                   │
///    │ (time passes)     │ finish(error: e)
///    │                   ▼
///   due ◀──────── backingOff(until: now + backoff)
/// ```
///
/// Events (``handle(_:at:using:)``):
/// - ``PeerEvent/pullDue``: a full round, even during a backoff (the pull interval, and the start);
/// - ``PeerEvent/tick``: the round asked for while the last one ran, if any; else a full round
///   when a failed peer's backoff has run out (a retry);
/// - ``PeerEvent/localCommit``: a push round, unless the peer is backing off (its retry will push);
/// - ``PeerEvent/roundEnded(error:)``: the round ends (after a failure, a push asked for meanwhile
///   waits for the retry).
///
/// While a round runs, what is asked for waits in ``pending`` (a full round covers a push) and
/// runs at the next tick after it ends (the sync loop looks at its clock at least every second):
/// a commit made while a round's push had already read what to send is pushed then, not at the
/// next pull interval, and never inside another caller's turn. A backoff that has run out reads as ``Phase/idle`` again. A
/// forced start (`ferry sync-now`) may begin a round during a backoff; nothing starts a second
/// round while one runs. `SyncCoordinator` (the daemon) runs the rounds one at a time.
public struct PeerSession: Sendable, Equatable {
    /// What the session is doing.
    public enum Phase: Sendable, Equatable {
        /// Nothing runs; a round may start.
        case idle
        /// A round runs, started at `since`.
        case syncing(since: Date)
        /// The last round failed; the next automatic round waits until `until`.
        case backingOff(until: Date)

        /// The name `ferry status` shows.
        public var name: String {
            switch self {
            case .idle: "idle"
            case .syncing: "syncing"
            case .backingOff: "backing_off"
            }
        }
    }

    /// Why an event was refused.
    public enum Refusal: FerryError, Sendable, Equatable {
        /// A round already runs.
        case alreadySyncing
        /// The backoff runs until this time (and the start was not forced).
        case backingOff(until: Date)
        /// `finish` without a running round.
        case notSyncing

        /// The kinds of ``Refusal``, one per case.
        public enum Code: String, Hashable, Sendable {
            /// A round already runs (``Refusal/alreadySyncing``).
            case alreadySyncing
            /// The peer backs off after a failure (``Refusal/backingOff(until:)``).
            case backingOff
            /// `finish` without a running round (``Refusal/notSyncing``).
            case notSyncing
        }

        /// The kind of fault.
        public var code: Code {
            switch self {
            case .alreadySyncing: .alreadySyncing
            case .backingOff: .backingOff
            case .notSyncing: .notSyncing
            }
        }

        /// Whether a start may be accepted later: once the running round ends, or the backoff runs out.
        public var isRetryable: Bool {
            switch self {
            case .alreadySyncing, .backingOff: true
            case .notSyncing: false
            }
        }

        /// Why the event was refused, for a person.
        public var description: String {
            switch self {
            case .alreadySyncing: "a round with this peer already runs"
            case .backingOff(let until): "the peer backs off after a failed round until \(until.formatted(.iso8601)); a forced start may run a round now"
            case .notSyncing: "no round with this peer runs to finish"
            }
        }
    }

    private var current: Phase = .idle
    private var retries: RetrySchedule
    /// The round asked for while one runs, to run when it ends.
    public private(set) var pending: PeerRound?
    /// When the last round started.
    public private(set) var lastAttempt: Date?
    /// When the last successful round ended.
    public private(set) var lastSuccess: Date?
    /// Why the last round failed; nil after a success.
    public private(set) var lastError: PeerError?

    /// A session that backs off on `retries` after failures.
    public init(retries: RetrySchedule = RetrySchedule()) {
        self.retries = retries
    }

    /// The phase at `now` (a backoff that has run out is idle).
    public func phase(at now: Date) -> Phase {
        if case .backingOff(let until) = current, until <= now { return .idle }
        return current
    }

    /// Failures since the last success.
    public var consecutiveFailures: Int { retries.consecutiveFailures }

    /// Takes `event` at `now`: the round to run now, if one is due. A round the caller runs must
    /// then be started (``start(at:force:)``, forced) and finished with a ``PeerEvent/roundEnded(error:)``.
    public mutating func handle(_ event: PeerEvent, at now: Date, using random: inout some RandomNumberGenerator) -> PeerRound? {
        let phase = phase(at: now)
        switch event {
        case .pullDue:
            return whenIdle(phase, .full)
        case .tick:
            if case .syncing = phase { return nil }
            // A round asked for while the last one ran (a full one even during a backoff).
            if hasPendingRound(at: now), let asked = pending {
                pending = nil
                return asked
            }
            // (A retry that runs asks for nothing more: the clock keeps ticking meanwhile.)
            guard consecutiveFailures > 0, retries.isDue(at: now), phase == .idle else { return nil }
            return .full
        case .localCommit:
            if case .backingOff = phase { return nil }
            return whenIdle(phase, .push)
        case .roundEnded(let error):
            guard case .syncing = current else { return nil }
            _ = try? finish(error: error, at: now, using: &random)
            // After a failure, a push asked for meanwhile waits for the retry's full round.
            if error != nil, pending == .push { pending = nil }
            return nil
        }
    }

    /// Whether a round asked for while the last one ran is waiting for the next ``PeerEvent/tick``.
    public func hasPendingRound(at now: Date) -> Bool {
        guard let pending else { return false }
        switch phase(at: now) {
        case .syncing: return false
        case .idle: return true
        case .backingOff: return pending == .full
        }
    }

    /// `round` now when no round runs (it covers what was pending); otherwise kept for after it ends.
    private mutating func whenIdle(_ phase: Phase, _ round: PeerRound) -> PeerRound? {
        guard case .syncing = phase else {
            if pending == round || round == .full { pending = nil }
            return round
        }
        pending = pending.map { $0.covering(round) } ?? round
        return nil
    }

    /// When the next automatic round is due after a failure, which the session needs a
    /// ``PeerEvent/tick`` for; nil when none failed (nothing waits on the clock).
    public var retryAt: Date? { retries.retryAt }

    /// Whether a round may start at `now` (`force`: even during a backoff).
    public func canStart(at now: Date, force: Bool = false) -> Bool {
        switch phase(at: now) {
        case .idle: true
        case .syncing: false
        case .backingOff: force
        }
    }

    /// Event: a round starts at `now`.
    public mutating func start(at now: Date, force: Bool = false) throws(Refusal) {
        switch phase(at: now) {
        case .syncing: throw .alreadySyncing
        case .backingOff(let until) where !force: throw .backingOff(until: until)
        default: break
        }
        current = .syncing(since: now)
        lastAttempt = now
    }

    /// Event: the running round ended at `now`, failed with `error` or not. Returns the backoff
    /// chosen after a failure (nil after a success).
    @discardableResult
    public mutating func finish(error: PeerError?, at now: Date, using random: inout some RandomNumberGenerator) throws(Refusal) -> TimeInterval? {
        guard case .syncing = current else { throw .notSyncing }
        if let error {
            let delay = retries.recordFailure(at: now, using: &random)
            lastError = error
            current = .backingOff(until: now.addingTimeInterval(delay))
            return delay
        }
        retries.recordSuccess()
        lastError = nil
        lastSuccess = now
        current = .idle
        return nil
    }
}

/// What happens to a peer, as its ``PeerSession`` takes it.
public enum PeerEvent: Sendable, Equatable {
    /// The pull interval came round (and the daemon started): a full round, even during a backoff.
    case pullDue
    /// The clock moved: a failed peer whose backoff has run out is retried.
    case tick
    /// The store committed (a save here or by another process, or change sets taken in): what it
    /// holds may be new to the peer.
    case localCommit
    /// The round the session asked for ended, failed with `error` or not.
    case roundEnded(error: PeerError?)
}

/// Which halves of a round to run with a peer.
public enum PeerRound: Sendable, Equatable {
    /// Pull, then push; the peer's state read afresh.
    case full
    /// Push only, from the peer's vector as last seen.
    case push
    /// Pull only (a relay's long poll offered change sets).
    case pull

    /// Whether the round pulls.
    public var pulls: Bool { self != .push }
    /// Whether the round pushes.
    public var pushes: Bool { self != .pull }

    /// The one round that does what both do.
    func covering(_ other: PeerRound) -> PeerRound {
        self == other ? self : .full
    }
}
