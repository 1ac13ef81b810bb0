import Foundation
import Synchronization
import FerryStore

/// A standing push to one peer (`POST /v1/changesets/stream`, docs/PROTOCOL.md): one request
/// kept open, each push a batch written on it and answered by one line.
///
/// A push request costs its sender the client's request machinery and its receiver the parsing,
/// routing and checks of a new request: on loopback that is most of what a save's push costs
/// as a request of its own (W4 in docs/PERFORMANCE.md). The stream pays them once.
///
/// It is an optimisation, never a second path for errors: a push it cannot carry (the peer does
/// not offer streams, the stream is busy with another push, the connection was lost before the
/// answer) is answered `nil`, and ``PeerClient`` sends it as a request of its own, which reports any
/// failure as usual. A batch sent again that way is safe: the peer counts what it already has as
/// duplicates. Only what the peer said is passed on: its report, or the refusal of the batch.
///
/// A stream idle for ``idleLimit`` is closed, and one open for ``longestLife`` is closed after its
/// next push, so that neither side holds a request for long; the next push opens a new one.
///
/// A push whose answer has not come after ``answerLimit`` fails as its request would have failed
/// for want of data (`unreachable`), and its stream is dropped: the HTTP client's read timeout
/// only starts once a request has been sent whole, which a stream's never is, so without this a
/// peer that stopped answering without closing the connection (a stopped process, a paused
/// machine) held the push, and every round queued behind it, for good. (A peer whose process
/// still runs closes a stream it has read nothing on for 60 s, its connections' idle timeout.)
final class PushStream: Sendable {
    /// How long an open stream may wait for its next push before it is closed.
    let idleLimit: Duration
    /// How long a push waits for its answer (the client's request timeout).
    let answerLimit: Duration
    /// How long a stream is used before a new one is opened.
    static let longestLife: Duration = .seconds(600)

    private struct State: ~Copyable {
        var connection: Connection?
        /// A push is on the stream now.
        var busy = false
        /// The peer answered that it has no such route (an older daemon, a relay): pushes go as requests.
        var unsupported = false
    }

    private let state = Mutex(State())

    init(idleLimit: Duration, answerLimit: Duration) {
        self.idleLimit = idleLimit
        self.answerLimit = answerLimit
    }

    /// Sends `batch` (change-set lines, each ending with a newline) on the stream, opening one with
    /// `open` when none is open, and returns the peer's answer as the same push request's would be:
    /// 200 with the batch's ``ApplyReport``, or the status and error of its refusal (401 or 403 when
    /// the stream itself was refused for the token).
    /// - Returns: nil when the stream cannot carry this push (send it as a request instead).
    /// - Throws: the failure to reach the peer when opening; `unreachable` when the answer has not
    ///   come within ``answerLimit``.
    func push(_ batch: Data, open: () async throws(PeerError) -> PeerStreamChannel?) async throws(PeerError) -> PeerResponse? {
        let taken: Connection?? = state.withLock { state in
            guard !state.busy, !state.unsupported else { return .none }
            state.busy = true
            if let connection = state.connection, !connection.isUsable {
                connection.close(abort: true)
                state.connection = nil
            }
            return .some(state.connection)
        }
        guard case .some(let existing) = taken else { return nil }
        var connection = existing
        defer { release(connection) }
        if connection == nil {
            switch try await self.open(with: open) {
            case .opened(let opened): connection = opened
            case .refused(let answer): return answer
            case .unavailable: return nil
            }
        }
        guard let connection else { return nil }
        var piece = batch
        piece.append(0x0A)  // the empty line that ends the batch
        let exchanged = await withTaskCancellationHandler {
            await connection.exchange(piece)
        } onCancel: {
            connection.close(abort: true)
        }
        let answer: Data
        switch exchanged {
        case .answer(let line): answer = line
        case .cut: return nil  // cut before the answer: the request sends it again
        case .timedOut:
            throw .unreachable("POST /v1/changesets/stream: no answer to a push within \(answerLimit); the stream was closed")
        }
        if let status = Self.refusalStatus(of: answer) {
            connection.close(abort: false)  // (the peer ends its answer after a refusal)
            return PeerResponse(status: status, body: answer)
        }
        return PeerResponse(status: 200, body: answer)
    }

    /// What opening a stream gave.
    private enum Opening {
        case opened(Connection)
        /// The token was refused (401, 403): the push fails as its request would.
        case refused(PeerResponse)
        /// No stream now: the peer does not offer them, or refused this one in a way its request will say again.
        case unavailable
    }

    private func open(with open: () async throws(PeerError) -> PeerStreamChannel?) async throws(PeerError) -> Opening {
        guard let channel = try await open() else {
            state.withLock { $0.unsupported = true }
            return .unavailable
        }
        if channel.status == 200 {
            let connection = Connection(channel, idleLimit: idleLimit, answerLimit: answerLimit)
            state.withLock { $0.connection = connection }
            return .opened(connection)
        }
        channel.close(true)
        switch channel.status {
        case 404, 405, 501:
            state.withLock { $0.unsupported = true }
            return .unavailable
        case 401, 403:
            return .refused(PeerResponse(status: channel.status, body: Data()))
        default:
            // (503 while the peer's store is not open, 429, …: the request is answered the same, and says why.)
            return .unavailable
        }
    }

    /// Lets go of the stream after a push; a stream that ended, or is old, is dropped.
    private func release(_ connection: Connection?) {
        let dropped: Connection? = state.withLock { state in
            state.busy = false
            guard let current = state.connection, current === connection else { return nil }
            guard !current.isUsable || current.age > Self.longestLife else { return nil }
            state.connection = nil
            return current
        }
        dropped?.close(abort: false)
    }

    /// How an error line starts (a report line starts otherwise: `{"applied"…`).
    private static let errorLineStart = Data(#"{"error""#.utf8)

    /// The status an answer line stands for when it is a refusal (`{"error":{"message":…,"status":N}}`); nil for a report.
    static func refusalStatus(of line: Data) -> Int? {
        guard line.starts(with: errorLineStart), let message = try? WireJSON.decode(ErrorMessage.self, from: line) else { return nil }
        return message.error.status ?? 500
    }
}

/// What a push on a stream got.
private enum Exchange {
    /// The peer's answer line.
    case answer(Data)
    /// The stream ended first (lost, dropped, or busy): the push can go as a request.
    case cut
    /// No answer came within the answer limit: the stream was closed.
    case timedOut
}

/// One open push stream: sends a batch, waits for its answer line.
private final class Connection: Sendable {
    private struct State {
        /// The push waiting for its answer line, and since when.
        var waiting: (continuation: CheckedContinuation<Exchange, Never>, since: ContinuousClock.Instant)?
        var ended = false
        /// When the stream last had nothing to do: its opening, or the last answer. Set with `waiting`
        /// cleared, under one lock, so that the idle watch never sees a stream just answered as idle
        /// since before its push.
        var lastUse = ContinuousClock.now
    }

    private let channel: PeerStreamChannel
    private let state = Mutex(State())
    private let opened = ContinuousClock.now

    init(_ channel: PeerStreamChannel, idleLimit: Duration, answerLimit: Duration) {
        self.channel = channel
        // Reads the answer line by line; closes the stream once it has been idle for idleLimit, or
        // once a push has waited answerLimit for its answer (checked by the same timer, so that a
        // push starts no task of its own).
        Task { [self] in await readAnswers() }
        Task { [self] in await watch(idleLimit: idleLimit, answerLimit: answerLimit) }
    }

    /// Whether the stream can take a push.
    var isUsable: Bool { !state.withLock { $0.ended } }

    /// How long ago it was opened.
    var age: Duration { ContinuousClock.now - opened }

    /// Sends `piece` and waits for the next answer line.
    func exchange(_ piece: Data) async -> Exchange {
        await withCheckedContinuation { continuation in
            let accepted = state.withLock { state in
                guard !state.ended, state.waiting == nil else { return false }
                state.waiting = (continuation, .now)
                return true
            }
            guard accepted else {
                continuation.resume(returning: .cut)
                return
            }
            channel.send(piece)
        }
    }

    /// Ends the stream (with `abort`, drops the request at once); a push waiting gets `cut`.
    func close(abort: Bool) {
        end()
        channel.close(abort)
    }

    private func end(_ outcome: Exchange = .cut) {
        let waiting = state.withLock { state in
            state.ended = true
            defer { state.waiting = nil }
            return state.waiting
        }
        waiting?.continuation.resume(returning: outcome)
    }

    private func readAnswers() async {
        var pending = Data()
        do {
            for try await chunk in channel.answer {
                pending.append(chunk)
                while let newline = pending.firstIndex(of: 0x0A) {
                    let line = pending[pending.startIndex..<newline]
                    pending.removeSubrange(pending.startIndex...newline)
                    guard deliver(Data(line)) else {
                        // A line no push waited for: not the protocol; this stream is not used again.
                        close(abort: true)
                        return
                    }
                }
            }
        } catch {
            // The connection was lost, or the request dropped: the push waiting (if any) gets nil.
        }
        end()
    }

    private func deliver(_ line: Data) -> Bool {
        let waiting = state.withLock { state in
            defer {
                state.waiting = nil
                state.lastUse = .now
            }
            return state.waiting
        }
        waiting?.continuation.resume(returning: .answer(line))
        return waiting != nil
    }

    /// Closes the stream once it has gone `idleLimit` without a push, or once a push has waited
    /// `answerLimit` for its answer (that push then gets `timedOut`); looks every half of the
    /// shorter, so a push waits at most half as long again.
    private func watch(idleLimit: Duration, answerLimit: Duration) async {
        while true {
            try? await Task.sleep(for: min(idleLimit, answerLimit) / 2)
            let (ended, idle, unanswered) = state.withLock { state in
                let now = ContinuousClock.now
                return (state.ended, state.waiting == nil && now - state.lastUse >= idleLimit,
                        state.waiting.map { now - $0.since >= answerLimit } ?? false)
            }
            if ended { return }
            if unanswered {
                end(.timedOut)
                channel.close(true)
                return
            }
            if idle {
                close(abort: false)
                return
            }
        }
    }
}
