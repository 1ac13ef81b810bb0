import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
import CompressNIO
import NIOCore
import FerryTestSupport

/// The HTTP API of a real `ferry run` process: authentication, limits, errors,
/// and that a refused request applies nothing.
@Suite("HTTP API", .serialized)
struct HTTPAPITests {
    /// A running daemon with two change sets of history (stopped when the test's value goes).
    let peer: DaemonPeer

    init() throws {
        peer = try DaemonPeer(name: "api", model: ReplicationTests.model, pullInterval: 3600)
        try peer.start()
        try peer.put("[\(ReplicationTests.person("ann", 1, "Ann")), \(ReplicationTests.person("bob", 2, "Bob", manager: "ann"))]")
        try peer.put("[\(ReplicationTests.person("cid", 3, "Cid"))]")
    }

    struct Answer {
        let status: Int
        let body: String
        let headers: [AnyHashable: Any]
    }

    func request(_ method: String, _ path: String, token: String? = nil, body: Data? = nil, headers: [String: String] = [:]) async throws -> Answer {
        var request = URLRequest(url: try #require(URL(string: peer.url + path)))
        request.httpMethod = method
        request.httpBody = body
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        if let token { request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
        let (data, response) = try await URLSession.shared.data(for: request)
        let http = try #require(response as? HTTPURLResponse)
        return Answer(status: http.statusCode, body: String(decoding: data, as: UTF8.self), headers: http.allHeaderFields)
    }

    var peerToken: String { peer.peerToken }
    var adminToken: String { peer.adminToken }

    @Test("healthz needs no token; every /v1 route needs one: 401 without detail")
    func authentication() async throws {
        #expect(try await request("GET", "/healthz").status == 200)
        for (method, path) in [("GET", "/v1/state"), ("GET", "/v1/changesets"), ("POST", "/v1/changesets"), ("GET", "/v1/status"), ("POST", "/v1/sync")] {
            for token in [nil, "wrong-token-0123456789", peerToken + "x", String(peerToken.dropLast())] {
                let answer = try await request(method, path, token: token)
                #expect(answer.status == 401, "\(method) \(path)")
                #expect(answer.body == #"{"error":{"message":"unauthorized"}}"#)
            }
        }
        #expect(try await request("GET", "/v1/state", token: peerToken).status == 200)
    }

    @Test("A peer token cannot trigger a sync round: 403; an admin token can")
    func adminOnly() async throws {
        let refused = try await request("POST", "/v1/sync", token: peerToken)
        #expect(refused.status == 403 && refused.body.contains("admin token"))
        let accepted = try await request("POST", "/v1/sync", token: adminToken)
        #expect(accepted.status == 200 && accepted.body == #"{"peers":[]}"#)
        #expect(try await request("GET", "/v1/state", token: adminToken).status == 200)
    }

    @Test("Pull streams the change sets the caller lacks, as JSON lines, up to the limit")
    func pull() async throws {
        let all = try await request("GET", "/v1/changesets", token: peerToken)
        #expect(all.status == 200)
        #expect((all.headers["Content-Type"] as? String) == "application/x-ndjson")
        let lines = all.body.split(separator: "\n")
        #expect(lines.count == 2)
        let limited = try await request("GET", "/v1/changesets?limit=1", token: peerToken)
        #expect(limited.body.split(separator: "\n").count == 1)
        let state = try await request("GET", "/v1/state", token: peerToken).body
        let object = try #require(try JSONSerialization.jsonObject(with: Data(state.utf8)) as? [String: Any])
        let store = try #require(object["store"] as? String)
        let after = #"{"\#(store)":1}"#.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""
        let rest = try await request("GET", "/v1/changesets?after=\(after)", token: peerToken)
        #expect(rest.body.split(separator: "\n").count == 1 && rest.body.contains(#""seq":2"#))
        for bad in ["/v1/changesets?limit=0", "/v1/changesets?limit=many", "/v1/changesets?after=%7Bnope", "/v1/changesets?limit=10001"] {
            let answer = try await request("GET", bad, token: peerToken)
            #expect(answer.status == 400 && answer.body.contains(#""message""#), "\(bad): \(answer.body)")
        }
    }

    @Test("An answer ends near 1 MiB whatever the limit; asking again after the new vector brings the rest, each change set once")
    func pullAnswersAreBounded() async throws {
        // Sixteen change sets of 1,200 objects (≈ 170 KB each) after the two small ones, then twenty small ones.
        for save in 0..<16 {
            try peer.put("[" + (0..<1200).map { ReplicationTests.person("s\(save)-\($0)", save * 10_000 + $0, "Person \(save)-\($0)") }
                .joined(separator: ",") + "]")
        }
        for save in 0..<20 { try peer.put("[\(ReplicationTests.person("t\(save)", 100_000 + save, "Small \(save)"))]") }
        let state = try await request("GET", "/v1/state", token: peerToken).body
        let store = try #require((try JSONSerialization.jsonObject(with: Data(state.utf8)) as? [String: Any])?["store"] as? String)
        func sequences(_ body: String) -> [Int] {
            body.split(separator: "\n").compactMap { line in
                (try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])?["seq"] as? Int
            }
        }
        var seen: [Int] = []
        var answers: [(lines: Int, bytes: Int)] = []
        while true {
            let after = #"{"\#(store)":\#(seen.max() ?? 0)}"#.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""
            let answer = try await request("GET", "/v1/changesets?limit=10000&after=\(after)", token: peerToken)
            #expect(answer.status == 200)
            let got = sequences(answer.body)
            if got.isEmpty { break }
            answers.append((got.count, answer.body.utf8.count))
            seen += got
            try #require(answers.count < 30, "no end to the answers: \(answers)")
        }
        #expect(seen == Array(1...38), "\(seen)")
        // The big change sets take several answers, each past 1 MiB by less than a chunk of them.
        #expect(answers.count >= 3, "\(answers)")
        #expect(answers.dropLast().allSatisfy { $0.bytes >= 1 << 20 } && answers.allSatisfy { $0.bytes < 2 << 20 }, "\(answers)")
    }

    @Test("A malformed push is refused whole with 400, and nothing of it is applied")
    func malformedPush() async throws {
        let origin = UUID().uuidString
        let good = #"{"changes":[{"entity":"Person","op":"insert","uri":"x-coredata://\#(origin)/Person/p1","values":{"name":"Eve"}}],"format":1,"hlc":113000000000000001,"model":"MODEL","origin":"\#(origin)","seq":1}"#
        let model = try #require(try JSONSerialization.jsonObject(with: Data(FerryProcess.run(["state", "--store", peer.store]).standardOutput.utf8)) as? [String: Any])["model"] as? String
        let valid = good.replacingOccurrences(of: "MODEL", with: model ?? "")
        let before = try peer.dump()
        let answer = try await request("POST", "/v1/changesets", token: peerToken, body: Data((valid + "\n{\"format\":1,\n").utf8))
        #expect(answer.status == 400 && answer.body.contains("line 2"), "\(answer.body)")
        #expect(try peer.dump() == before)
        let wrongType = try await request("POST", "/v1/changesets", token: peerToken, body: Data(valid.replacingOccurrences(of: #""name":"Eve""#, with: #""name":7"#).utf8))
        #expect(wrongType.status == 400 && wrongType.body.contains("name"), "\(wrongType.body)")
        #expect(try peer.dump() == before)
        // The valid line alone applies, once; sent again it is a duplicate.
        let applied = try await request("POST", "/v1/changesets", token: peerToken, body: Data(valid.utf8))
        #expect(applied.status == 200 && applied.body.contains(#""applied":1"#), "\(applied.body)")
        let again = try await request("POST", "/v1/changesets", token: peerToken, body: Data(valid.utf8))
        #expect(again.body.contains(#""applied":0"#) && again.body.contains(#""duplicate":1"#))
    }

    @Test("A known path with a method it does not take gets 405 and the methods it takes; an empty push gets 400")
    func methodNotAllowed() async throws {
        let answer = try await request("DELETE", "/v1/changesets", token: peerToken)
        #expect(answer.status == 405 && answer.body.contains("takes GET, POST"), "\(answer.status) \(answer.body)")
        #expect((answer.headers["Allow"] as? String) == "GET, POST", "\(answer.headers)")
        #expect(try await request("PUT", "/v1/sync", token: adminToken).status == 405)
        #expect(try await request("GET", "/v1/nothing-here", token: peerToken).status == 404)
        let empty = try await request("POST", "/v1/changesets", token: peerToken, body: Data("\n\n".utf8))
        #expect(empty.status == 400 && empty.body.contains("no change sets"), "\(empty.body)")
    }

    @Test("A body over server.max_body_bytes gets 413")
    func tooLarge() async throws {
        let answer = try await request("POST", "/v1/changesets", token: peerToken, body: Data(repeating: UInt8(ascii: " "), count: (64 << 20) + 1))
        #expect(answer.status == 413 && answer.body.contains("max_body_bytes"))
    }

    @Test("Status reports the store, its backlog and its peers")
    func status() async throws {
        let answer = try await request("GET", "/v1/status", token: peerToken)
        #expect(answer.status == 200)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(answer.body.utf8)) as? [String: Any])
        #expect(object["waiting"] as? Int == 0 && object["quarantined"] as? Int == 0)
        #expect((object["peers"] as? [Any])?.isEmpty == true)
        #expect(object["vector"] is [String: Any])
    }

    @Test("Pulls are gzip-compressed for callers that take gzip; pushes may be gzip; other encodings get 415")
    func gzip() async throws {
        let compressed = try await request("GET", "/v1/changesets", token: peerToken, headers: ["Accept-Encoding": "gzip"])
        #expect(compressed.status == 200)
        #expect((compressed.headers["Content-Encoding"] as? String) == "gzip")
        #expect(compressed.body.split(separator: "\n").count == 2, "URLSession unpacks it: \(compressed.body.prefix(80))")
        let plain = try await request("GET", "/v1/changesets", token: peerToken, headers: ["Accept-Encoding": "identity"])
        #expect(plain.headers["Content-Encoding"] == nil && plain.body == compressed.body)

        let before = try peer.dump()
        let garbage = try await request("POST", "/v1/changesets", token: peerToken, body: Data("not gzip".utf8), headers: ["Content-Encoding": "gzip"])
        #expect(garbage.status == 400 && garbage.body.contains("not valid gzip"))
        let brotli = try await request("POST", "/v1/changesets", token: peerToken, body: Data("x".utf8), headers: ["Content-Encoding": "br"])
        #expect(brotli.status == 415)
        // A small body that unpacks past server.max_body_bytes is refused, not unpacked.
        var spaces = ByteBuffer(repeating: UInt8(ascii: " "), count: (64 << 20) + 1)
        let bomb = Data(try spaces.compress(with: .gzip()).readableBytesView)
        #expect(bomb.count < 200_000)
        let refused = try await request("POST", "/v1/changesets", token: peerToken, body: bomb, headers: ["Content-Encoding": "gzip"])
        #expect(refused.status == 413, "\(refused.body)")
        #expect(try peer.dump() == before)
    }
}
