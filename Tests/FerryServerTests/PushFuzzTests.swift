import Foundation
import Testing
import Hummingbird
import HummingbirdTesting
import FerryModel
import FerryStore
import FerrySQLite
import FerrySync
import FerryTestSupport
@testable import FerryServer

/// The push path fuzzed with a valid peer token (issue 19): genuine change sets,
/// mutated the ways a hostile peer would (flipped and cut bytes, extreme clocks and
/// sequence numbers, other origins and namespaces, huge strings, repeated lines) under
/// stand-in origins, pushed
/// through the real routes. Every answer is a 200 report or a 4xx/503 with a short error,
/// never a 500 or a crash; afterwards the store still saves at its wall clock, and every
/// genuine change set still applies. Seeded (`FERRY_SEED`); `FERRY_PUSH_FUZZ_SECONDS`
/// runs longer than the default 3 s.
@Suite("Push path fuzzing")
struct PushFuzzTests {
    static let peerToken = "peer-token-0123456789abcdef"

    @Test("Mutated pushes get a report or a short 4xx/503, never a 500; the store keeps its clock and takes every genuine change set")
    func fuzzPushes() async throws {
        let environment = ProcessInfo.processInfo.environment
        let seed = environment["FERRY_SEED"].flatMap(UInt64.init) ?? UInt64.random(in: 1...999_999)
        let seconds = environment["FERRY_PUSH_FUZZ_SECONDS"].flatMap(Double.init) ?? 3
        var random = SeededGenerator(seed: seed)
        let model = try SampleModels.load("OrgChart")
        let directory = TemporaryDirectory()
        let origin = try SQLiteStore(path: directory.file("origin.sqlite"), model: model)
        let context = try PersistentContainer(store: origin).newContext()
        var people: [ManagedObject] = []
        for round in 0..<6 {
            for index in 0..<3 {
                let person = try context.make("Person", ["id": Int64(round * 10 + index), "name": "P\(round)-\(index)"])
                if let manager = people.last { try person.setValue(manager, forKey: "manager") }
                people.append(person)
            }
            if round % 2 == 1, let first = people.first { try first.setValue("renamed \(round)", forKey: "name") }
            try context.save()
        }
        let genuine = try origin.changeSetLines(after: [:], limit: nil)
        let receiver = try SQLiteStore(path: directory.file("receiver.sqlite"), model: model)
        let api = FerryAPI(endpoint: try ReplicationEndpoint(store: receiver), tokens: AccessTokens([(Self.peerToken, .peer)]), maxBodyBytes: 1 << 20)
        let app = Application(router: api.router())
        let receiverID = receiver.identifier.uuidString

        // Mutants go under stand-in origins (three, so their sequences build up): a change set forged under
        // the genuine origin would take its (origin, sequence) before the genuine one, which only signed
        // change sets can prevent (docs/RELIABILITY.md, "Hostile peers").
        let standIns = (0..<3).map { _ in UUID().uuidString }
        func mutate(_ line: String, _ random: inout SeededGenerator) -> String {
            var text = line.replacingOccurrences(of: origin.identifier.uuidString, with: standIns.randomElement(using: &random) ?? "")
            switch Int.random(in: 0..<11, using: &random) {
            case 0:  // flip bytes
                var bytes = Array(text.utf8)
                for _ in 0..<Int.random(in: 1...4, using: &random) where !bytes.isEmpty {
                    bytes[Int.random(in: 0..<bytes.count, using: &random)] = UInt8.random(in: 0...255, using: &random)
                }
                text = String(decoding: bytes, as: UTF8.self)
            case 1:  // cut
                text = String(text.prefix(Int.random(in: 0...text.count, using: &random)))
            case 2:  // extreme clocks
                let value = ["9223372036854775807", "-1", "0", "18446744073709551616", "1e400", "\"now\""].randomElement(using: &random) ?? "0"
                text = text.replacing(#/"hlc":\d+/#, with: "\"hlc\":\(value)")
            case 3:  // extreme sequence numbers
                let value = ["9223372036854775807", "-5", "0", "1.5", "99999999999999999999"].randomElement(using: &random) ?? "0"
                text = text.replacing(#/"seq":\d+/#, with: "\"seq\":\(value)")
            case 4:  // another origin (its inserts then name another store)
                text = text.replacing(#/"origin":"[0-9A-F-]+"/#, with: "\"origin\":\"\(UUID().uuidString)\"")
            case 5:  // the receiver's own origin, or its namespace
                text = Bool.random(using: &random)
                    ? text.replacing(#/"origin":"[0-9A-F-]+"/#, with: "\"origin\":\"\(receiverID)\"")
                    : text.replacingOccurrences(of: origin.identifier.uuidString, with: receiverID)
            case 6:  // huge strings
                text = text.replacingOccurrences(of: "\"name\":\"",
                                                 with: "\"name\":\"" + String(repeating: "x", count: Int.random(in: 1_000...200_000, using: &random)))
            case 7:  // unknown names
                text = text.replacingOccurrences(of: "\"Person\"", with: "\"\(String(repeating: "Q", count: Int.random(in: 1...5_000, using: &random)))\"")
            case 8:  // deep nesting where a value goes
                text = text.replacingOccurrences(of: "\"name\":", with: "\"name\":" + String(repeating: "[", count: Int.random(in: 10...3_000, using: &random)))
            case 9:  // a change set emptied of its changes
                text = text.replacing(#/"changes":\[.*\],"format"/#, with: "\"changes\":[],\"format\"")
            default:  // as it is
                break
            }
            return text
        }

        var statuses: [Int: Int] = [:]
        var requests = 0
        let deadline = Date().addingTimeInterval(seconds)
        let token = Self.peerToken
        while Date() < deadline {
            // Fifty bodies at a time, made here (the test client's closure cannot take the generator).
            let bodies = (0..<50).map { _ in
                (0..<Int.random(in: 1...4, using: &random)).map { _ in mutate(genuine.randomElement(using: &random) ?? "", &random) }.joined(separator: "\n")
            }
            let answers = try await app.test(.router) { client in
                var answers: [(body: String, status: Int, answer: String, bytes: Int)] = []
                for body in bodies {
                    let answer = try await client.execute(uri: "/v1/changesets", method: .post, headers: [.authorization: "Bearer \(token)"],
                                                          body: ByteBuffer(string: body))
                    answers.append((body, Int(answer.status.code), String(buffer: answer.body), answer.body.readableBytes))
                }
                return answers
            }
            for answer in answers {
                statuses[answer.status, default: 0] += 1
                requests += 1
                #expect([200, 400, 413, 415, 503].contains(answer.status),
                        "seed \(seed): \(answer.status) for \(answer.body.prefix(300)): \(answer.answer.prefix(300))")
                if answer.status != 200 {
                    #expect(answer.bytes < 2_000, "seed \(seed): a \(answer.bytes)-byte error answer")
                }
            }
        }
        // Every genuine change set still applies (or was already taken in), in one push.
        let all = genuine.joined(separator: "\n")
        let last = try await app.test(.router) { client in
            try await client.execute(uri: "/v1/changesets", method: .post, headers: [.authorization: "Bearer \(token)"], body: ByteBuffer(string: all))
        }
        #expect(last.status == .ok, "seed \(seed): \(String(buffer: last.body).prefix(300))")
        #expect(try receiver.historyState().vector[origin.identifier] == Int64(genuine.count), "seed \(seed)")
        var dump: [String] = []
        try StoreDump(store: receiver).write { dump.append($0) }
        for person in people {
            #expect(dump.contains { $0.contains(person.objectID.uriString) }, "seed \(seed): \(person.objectID.uriString) missing")
        }
        // The receiver's clock was not moved by anything it was sent: its own save is stamped near now.
        let local = try PersistentContainer(store: receiver).newContext()
        try local.make("Person", ["name": "after the fuzz"])
        try local.save()
        let own = try #require(try receiver.changeSets(after: [:]).last { $0.origin == receiver.identifier })
        #expect(own.timestamp <= HybridTimestamp.latestAccepted(), "seed \(seed): clock \(own.timestamp)")
        print("push fuzz: \(requests) requests in \(seconds) s " +
              "(\(statuses.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }.joined(separator: ", "))); seed \(seed)")
    }
}
