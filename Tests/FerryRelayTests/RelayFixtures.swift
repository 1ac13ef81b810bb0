import Foundation
import Testing
import FerryTestSupport

/// What the relay tests share: a model, PostgreSQL clusters, and peers made and pinned at relays.
enum RelayFixtures {
    static let model = SampleModels.path("OrgChart")

    /// A cluster with a fresh database `ferry`.
    static func cluster() throws -> PostgresCluster {
        let cluster = try PostgresCluster()
        try cluster.createDatabase("ferry")
        return cluster
    }

    /// `count` peers with stores made (`ferry init`), not started; their identities.
    static func peers(_ names: [String], pullInterval: Double = 30) throws -> [DaemonPeer] {
        try names.map { name in
            let peer = try DaemonPeer(name: name, model: model, pullInterval: pullInterval, maxBackoff: 2)
            let result = try peer.ferry(["init"])
            guard result.status == 0 else { throw DaemonPeerError(description: "ferry init on \(name): \(result.standardError)") }
            return peer
        }
    }

    /// Peers "a" and "b" started and syncing through one relay (started, trusting both, with
    /// `server.max_body_bytes` when given) over a fresh cluster, which stops when it is released.
    static func pairThroughRelay(maxBodyBytes: Int? = nil, maxChangeSetBytes: Int? = nil) throws
        -> (cluster: PostgresCluster, relay: RelayProcess, a: DaemonPeer, b: DaemonPeer) {
        let cluster = try cluster()
        let peers = try peers(["a", "b"])
        let relay = try RelayProcess(name: "r1", cluster: cluster, database: "ferry", pinned: try keys(of: peers), maxBodyBytes: maxBodyBytes,
                                     maxChangeSetBytes: maxChangeSetBytes)
        try relay.start()
        for peer in peers {
            try peer.connect(name: "relay", urls: [relay.url], token: relay.peerToken)
            try peer.start()
        }
        return (cluster, relay, peers[0], peers[1])
    }

    /// The origins and keys of `peers`, for a relay's `trust.keys`.
    static func keys(of peers: [DaemonPeer]) throws -> [(origin: String, key: String)] {
        try peers.map { try $0.identity() }.map { (origin: $0.store, key: $0.key) }
    }

    /// Inserts one person named `name` on `peer`.
    static func save(_ name: String, on peer: DaemonPeer) throws {
        try peer.put(#"[{"op":"insert","entity":"Person","ref":"x","values":{"name":"\#(name)"}}]"#)
    }

    /// `POST /v1/changesets` of `body` to `relay` with its peer token.
    static func push(_ body: String, to relay: RelayProcess) throws -> (status: Int, body: String) {
        try FerryProcess.curl("POST", relay.url + "/v1/changesets", token: relay.peerToken, body: body)
    }

    /// `POST /v1/changesets/pull` of `body` to `relay`: its lines.
    static func pull(_ body: String = "{}", from relay: RelayProcess) throws -> (status: Int, lines: [String]) {
        let answer = try FerryProcess.curl("POST", relay.url + "/v1/changesets/pull", token: relay.peerToken, body: body)
        return (answer.status, answer.body.split(separator: "\n").map(String.init))
    }

    /// `GET /v1/state` of `relay`, as JSON.
    static func state(of relay: RelayProcess) throws -> [String: Any] {
        let answer = try FerryProcess.curl("GET", relay.url + "/v1/state", token: relay.peerToken)
        guard answer.status == 200, let json = try JSONSerialization.jsonObject(with: Data(answer.body.utf8)) as? [String: Any] else {
            throw DaemonPeerError(description: "GET /v1/state of \(relay.name): \(answer.status) \(answer.body)")
        }
        return json
    }

    /// How many rows the relays' table holds (per origin and sequence number, each change set once).
    static func storedRows(in cluster: PostgresCluster) throws -> Int {
        Int(try cluster.sql("SELECT count(*) FROM ferry_changesets", database: "ferry").trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
    }

    /// A blocking call (a process, a request by curl) started at once on a thread of its own, beside the
    /// test's own blocking waits (a long poll held up behind them would "answer late").
    final class Call<Value: Sendable>: @unchecked Sendable {
        private let done = DispatchSemaphore(value: 0)
        private var result: Result<Value, any Error>?

        init(_ body: @escaping @Sendable () throws -> Value) {
            Thread { [self] in
                result = Result { try body() }
                done.signal()
            }.start()
        }

        /// Waits for the call's end (at most `timeout` seconds) and returns what it gave.
        func value(timeout: TimeInterval = 120) throws -> Value {
            guard done.wait(timeout: .now() + timeout) == .success, let result else {
                throw DaemonPeerError(description: "a background call did not end within \(timeout) s")
            }
            return try result.get()
        }
    }

    /// `POST /v1/changesets/pull` with curl allowed `seconds` (a long poll outlasts curl's usual 10).
    static func longPoll(_ body: String, from relay: RelayProcess, seconds: Int) throws -> (status: Int, lines: [String]) {
        let result = try FerryProcess.run(executable: "/usr/bin/curl", ["-sS", "-m", "\(seconds)", "-X", "POST", "-w", "\n%{http_code}",
                                                                        "-H", "Authorization: Bearer \(relay.peerToken)", "--data-binary", body,
                                                                        relay.url + "/v1/changesets/pull"])
        var lines = result.standardOutput.split(separator: "\n").map(String.init)
        let status = Int(lines.popLast() ?? "") ?? -1
        return (status, lines)
    }
}
