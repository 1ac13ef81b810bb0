import Foundation
import Synchronization

/// A TCP proxy on 127.0.0.1 that stands between two daemons and misbehaves on
/// purpose: it delays traffic, drops connections without an answer, cuts
/// requests and responses off mid-body, resets connections, and can cut a
/// link entirely (a partition). Each request (a chunk from the client that
/// starts with an HTTP method) draws one fault from the current ``FaultPlan``
/// (seeded, so a run can be replayed): connections are kept alive across
/// many requests, so drawing per connection would hardly ever fire.
///
/// Plain blocking sockets, two threads per connection: it only has to carry a
/// test's traffic, and being simple matters more here than scale.
public final class FaultProxy: Sendable {
    /// How often each fault happens, per request (the rest pass untouched).
    public struct FaultPlan: Sendable {
        /// Probability that a request and its response are held back before each chunk.
        public var delay: Double
        /// The longest such hold-back, in seconds.
        public var maxDelay: TimeInterval
        /// Probability that a request is swallowed and its connection closed without any answer.
        public var drop: Double
        /// Probability that a request is cut off at a random byte (the proxy closes both sides).
        public var truncateRequest: Double
        /// Probability that a response is cut off at a random byte of its body.
        public var truncateResponse: Double
        /// Probability that a response is cut off inside its header block.
        public var truncateHeaders: Double
        /// Probability that the connection is reset (TCP RST) part-way through the response.
        public var reset: Double

        /// Creates a plan.
        public init(delay: Double = 0, maxDelay: TimeInterval = 0.2, drop: Double = 0, truncateRequest: Double = 0,
                    truncateResponse: Double = 0, truncateHeaders: Double = 0, reset: Double = 0) {
            self.delay = delay
            self.maxDelay = maxDelay
            self.drop = drop
            self.truncateRequest = truncateRequest
            self.truncateResponse = truncateResponse
            self.truncateHeaders = truncateHeaders
            self.reset = reset
        }

        /// Every connection passes untouched.
        public static let none = FaultPlan()
    }

    /// The fault drawn for one request (``partitioned``: a connection refused by a cut link).
    public enum Fault: String, Sendable, CaseIterable {
        case none, delay, drop, truncateRequest, truncateResponse, truncateHeaders, reset, partitioned
    }

    private struct State {
        var plan: FaultPlan
        var random: SeededGenerator
        var partitioned = false
        var counts: [Fault: Int] = [:]
        var open: Set<Int32> = []
        var running = true
    }

    /// The port the proxy listens on.
    public let port: Int
    private let upstreamPort: Int
    private let listener: Int32
    private let state: Mutex<State>

    /// Runs on each accepted connection's thread before it is served (tests of the proxy hold it there).
    private let beforeServing: (@Sendable () -> Void)?

    /// Starts a proxy on a free port of 127.0.0.1 that forwards to `upstreamPort` there.
    public convenience init(upstreamPort: Int, plan: FaultPlan = .none, seed: UInt64) throws {
        try self.init(upstreamPort: upstreamPort, plan: plan, seed: seed, beforeServing: nil)
    }

    /// The same, with `beforeServing` run on each accepted connection's thread before it is served.
    package init(upstreamPort: Int, plan: FaultPlan = .none, seed: UInt64, beforeServing: (@Sendable () -> Void)?) throws {
        self.upstreamPort = upstreamPort
        self.beforeServing = beforeServing
        self.state = Mutex(State(plan: plan, random: SeededGenerator(seed: seed)))
        let (descriptor, port) = try LoopbackSocket.bound(listening: 64, reuseAddress: true)
        self.port = port
        self.listener = descriptor
        let thread = Thread { [self] in acceptLoop() }
        thread.start()
    }

    /// The URL peers use to reach the upstream daemon through the proxy.
    public var url: String { "http://127.0.0.1:\(port)" }

    /// Replaces the fault plan for connections accepted from now on.
    public func setPlan(_ plan: FaultPlan) {
        state.withLock { $0.plan = plan }
    }

    /// Cuts the link (`true`): open connections are reset and new ones closed at once; or heals it.
    public func setPartitioned(_ partitioned: Bool) {
        let open = state.withLock { state -> Set<Int32> in
            state.partitioned = partitioned
            return partitioned ? state.open : []
        }
        for descriptor in open { shutdown(descriptor, Int32(SHUT_RDWR)) }
    }

    /// Counts a cut or a reset that changed the bytes of a request or a response.
    private func recordApplied(_ fault: Fault) {
        state.withLock { $0.counts[fault, default: 0] += 1 }
    }

    /// How many requests each fault really changed so far (a cut or a reset is counted only
    /// when it cut bytes off; ``Fault/partitioned``: connections refused).
    public var counts: [Fault: Int] { state.withLock { $0.counts } }

    /// Stops accepting and closes every open connection (once: a second call does nothing, so the
    /// listening descriptor, whose number may have been reused since, is never closed twice).
    public func stop() {
        let (wasRunning, open) = state.withLock { state -> (Bool, Set<Int32>) in
            defer { state.running = false }
            return (state.running, state.open)
        }
        guard wasRunning else { return }
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
        for descriptor in open { shutdown(descriptor, Int32(SHUT_RDWR)) }
    }

    deinit { stop() }

    // MARK: - Connections

    private func acceptLoop() {
        while state.withLock({ $0.running }) {
            let client = accept(listener, nil, nil)
            if client < 0 {
                if errno == EINTR { continue }
                return
            }
            // Tracked under the same lock that cuts the link: a connection accepted just before a
            // partition is reset by it (tracked later, on its own thread, it once escaped the cut and
            // carried a partitioned daemon's pushes across).
            let refused = state.withLock { state -> Bool in
                if state.partitioned {
                    state.counts[.partitioned, default: 0] += 1
                    return true
                }
                state.open.insert(client)
                return false
            }
            if refused {
                close(client)
                continue
            }
            Thread { [self] in serve(client: client) }.start()
        }
    }

    /// The next request's fault, the hold-back for a delay, and a random byte count for cuts.
    private func draw() -> (fault: Fault, hold: TimeInterval, cut: Int) {
        state.withLock { state in
            var roll = Double.random(in: 0..<1, using: &state.random)
            var fault = Fault.none
            let plan = state.plan
            let weights = [(Fault.delay, plan.delay), (.drop, plan.drop), (.truncateRequest, plan.truncateRequest),
                           (.truncateResponse, plan.truncateResponse), (.truncateHeaders, plan.truncateHeaders), (.reset, plan.reset)]
            for (candidate, probability) in weights {
                if roll < probability {
                    fault = candidate
                    break
                }
                roll -= probability
            }
            // The first faulty requests go through every kind the plan has once, so a short run
            // still sees each of them; after that the weights alone decide.
            if fault != .none, let unseen = weights.first(where: { $0.1 > 0 && state.counts[$0.0, default: 0] == 0 }) {
                fault = unseen.0
            }
            // A delay and a drop take effect on the request's first chunk, at once; a cut or a reset
            // is counted only once it has cut something (a request shorter than its cut passes whole).
            if fault == .none || fault == .delay || fault == .drop { state.counts[fault, default: 0] += 1 }
            return (fault, Double.random(in: 0.001...max(plan.maxDelay, 0.001), using: &state.random),
                    Int.random(in: 1...8192, using: &state.random))
        }
    }

    /// Serves an accepted connection (`client`, tracked already).
    private func serve(client: Int32) {
        defer { untrack(client); close(client) }
        beforeServing?()
        let upstream = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard upstream >= 0 else { return }
        defer { close(upstream) }
        // Not connected at all once the link is cut: the client's side was reset by the cut.
        guard trackUnlessPartitioned(upstream) else { return }
        defer { untrack(upstream) }
        var address = LoopbackSocket.address(port: upstreamPort)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(upstream, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { return }
        let connection = ConnectionFaults()
        let upwardFinished = DispatchSemaphore(value: 0)
        Thread { [self] in
            forwardRequests(from: client, to: upstream, connection: connection)
            finish(client: client, upstream: upstream, reset: false, connection: connection)
            upwardFinished.signal()
        }.start()
        let reset = forwardResponses(from: upstream, to: client, connection: connection)
        finish(client: client, upstream: upstream, reset: reset, connection: connection)
        // Wait for the other direction before the descriptors close.
        upwardFinished.wait()
    }

    /// Client to daemon: draws a fault at the start of each request and applies its request side.
    private func forwardRequests(from client: Int32, to upstream: Int32, connection: ConnectionFaults) {
        var buffer = [UInt8](repeating: 0, count: 16_384)
        var requestBudget = Int.max
        var delay: TimeInterval = 0
        while true {
            let count = read(client, &buffer, buffer.count)
            if count <= 0 || isPartitioned { return }
            if Self.startsRequest(buffer[0..<count]) {
                let (fault, hold, cut) = draw()
                delay = fault == .delay ? hold : 0
                connection.setResponseFaults(fault: fault, cut: cut, delay: delay)
                switch fault {
                case .drop:
                    // Swallow the request, answer nothing for a moment, then close.
                    Thread.sleep(forTimeInterval: 0.3)
                    return
                case .truncateRequest:
                    // Somewhere inside this request (its head and the body its Content-Length
                    // announces, or this first chunk), so that even a short request is cut.
                    let length = HTTPHead(in: buffer[0..<count]).map { $0.end + ($0.contentLength ?? count - $0.end) } ?? count
                    requestBudget = cut % max(length, 1)
                default:
                    requestBudget = Int.max
                }
            }
            if delay > 0 { Thread.sleep(forTimeInterval: delay) }
            let allowed = min(count, requestBudget)
            guard Self.writeAll(buffer[0..<allowed], to: upstream) else { return }
            if allowed < count {
                recordApplied(.truncateRequest)
                return
            }
            if requestBudget != Int.max {
                requestBudget -= allowed
                if requestBudget == 0 { return }
            }
        }
    }

    /// Daemon to client: applies the current request's response faults. Returns whether to reset.
    private func forwardResponses(from upstream: Int32, to client: Int32, connection: ConnectionFaults) -> Bool {
        var buffer = [UInt8](repeating: 0, count: 16_384)
        while true {
            let count = read(upstream, &buffer, buffer.count)
            if count <= 0 || isPartitioned { return false }
            let (allowed, reset, delay, fault) = connection.takeResponseBytes(buffer[0..<count])
            if delay > 0 { Thread.sleep(forTimeInterval: delay) }
            guard Self.writeAll(buffer[0..<allowed], to: client) else { return false }
            if allowed < count {
                recordApplied(fault)
                return reset
            }
        }
    }

    private static let methods = ["GET ", "POST ", "PUT ", "HEAD ", "DELETE ", "PATCH ", "OPTIONS "].map { Array($0.utf8) }

    private static func startsRequest(_ bytes: ArraySlice<UInt8>) -> Bool {
        methods.contains { bytes.starts(with: $0) }
    }

    private static func writeAll(_ bytes: ArraySlice<UInt8>, to target: Int32) -> Bool {
        var offset = bytes.startIndex
        while offset < bytes.endIndex {
            // MSG_NOSIGNAL: a peer that went away must not end the test process with SIGPIPE.
            let written = bytes[offset...].withUnsafeBytes { send(target, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if written <= 0 { return false }
            offset += written
        }
        return true
    }

    /// Ends a connection: both sides shut (the first direction to finish ends the exchange), with a reset if asked.
    private func finish(client: Int32, upstream: Int32, reset: Bool, connection: ConnectionFaults) {
        guard connection.claimFinish() else { return }
        if reset {
            // With a zero linger time, the close that follows sends RST instead of FIN;
            // shutting only the read side wakes the other thread without sending anything.
            var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
            setsockopt(client, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
            shutdown(client, Int32(SHUT_RD))
        } else {
            shutdown(client, Int32(SHUT_RDWR))
        }
        shutdown(upstream, Int32(SHUT_RDWR))
    }

    /// Whether the link is cut: bytes read from either side then go nowhere (a cut shuts the
    /// connection's sockets too, but bytes already read, or already queued, would still pass).
    private var isPartitioned: Bool { state.withLock { $0.partitioned } }

    /// Tracks `descriptor` (a partition then shuts it); false, untracked, when the link is cut.
    private func trackUnlessPartitioned(_ descriptor: Int32) -> Bool {
        state.withLock { state in
            guard !state.partitioned else { return false }
            state.open.insert(descriptor)
            return true
        }
    }

    private func untrack(_ descriptor: Int32) {
        state.withLock { _ = $0.open.remove(descriptor) }
    }

}

/// What the current request of one connection does to its response, and whether
/// the connection was ended (the two directions race to end it; the first wins).
private final class ConnectionFaults: Sendable {
    /// Where a cut may fall relative to the response's header block. The cut is placed once the
    /// response's first chunk shows its head, within the bytes the response is known to have (its
    /// head and the body its Content-Length announces, or what the first chunk holds of a chunked
    /// body), so that a short answer is cut too and every drawn cut really changes bytes.
    enum Headers {
        /// Already placed, or no cut: the budget counts down from here.
        case count
        /// Anywhere in the response, head or body.
        case anywhere
        /// In the body, after the header block.
        case skip
        /// Inside the header block.
        case cutInside
    }

    private struct Response {
        var fault = FaultProxy.Fault.none
        var budget = Int.max
        var headers = Headers.count
        var reset = false
        var delay: TimeInterval = 0
        var finished = false
    }

    private let response = Mutex(Response())

    /// The current request's fault: a cut or reset `cut` bytes in (counted from where `fault`
    /// says: the first byte, the end of the headers, or inside them), and a hold-back per chunk.
    func setResponseFaults(fault: FaultProxy.Fault, cut: Int, delay: TimeInterval) {
        response.withLock { state in
            state.fault = fault
            state.budget = [.truncateResponse, .truncateHeaders, .reset].contains(fault) ? cut : Int.max
            state.reset = fault == .reset
            state.headers = switch fault {
            case .truncateHeaders: .cutInside
            case .truncateResponse: .skip
            case .reset: .anywhere
            default: .count
            }
            state.delay = delay
        }
    }

    /// How many of the response bytes `chunk` may pass, whether to reset after a cut, the
    /// hold-back, and the fault a cut would apply.
    func takeResponseBytes(_ chunk: ArraySlice<UInt8>) -> (allowed: Int, reset: Bool, delay: TimeInterval, fault: FaultProxy.Fault) {
        response.withLock { state in
            let count = chunk.count
            if state.budget != Int.max, state.headers != .count, let head = HTTPHead(in: chunk) {
                // The first chunk of a cut response: place the cut inside its headers, in its body, or anywhere.
                let body = head.contentLength ?? count - head.end
                switch state.headers {
                case .cutInside: state.budget = 1 + state.budget % max(head.end - 1, 1)
                case .skip: state.budget = head.end + (body > 0 ? state.budget % body : state.budget)
                case .anywhere: state.budget %= max(head.end + body, 1)
                case .count: break
                }
                state.headers = .count
            }
            let allowed = min(count, state.budget)
            if state.budget != Int.max { state.budget -= allowed }
            return (allowed, state.reset, state.delay, state.fault)
        }
    }

    /// True for the first caller only.
    func claimFinish() -> Bool {
        response.withLock { state in
            defer { state.finished = true }
            return !state.finished
        }
    }
}
