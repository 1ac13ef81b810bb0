import Foundation
import Testing
import Hummingbird
import NIOCore
import FerryStore
@testable import FerryServer

/// A pull's query, read one way for the daemon and the relay (``PullRequest``).
@Suite("Pull requests")
struct PullRequestTests {
    static let origin = UUID(uuidString: "6C1B6D1E-0F7A-4D52-9B8E-2E0B7F5B1A11") ?? UUID()

    static func request(_ method: HTTPRequest.Method, _ path: String, body: String = "") -> Request {
        let buffer = ByteBuffer(string: body)
        var fields = HTTPFields()
        fields[.contentLength] = String(buffer.readableBytes)
        let head = HTTPRequest(method: method, scheme: "http", authority: "peer", path: path, headerFields: fields)
        return Request(head: head, body: RequestBody(buffer: buffer))
    }

    static func status(of error: any Error) -> Int? {
        (error as? APIError).map { Int($0.status.code) }
    }

    @Test("A POST body: every member optional; a relay's wait and store read too")
    func body() async throws {
        let empty = try await PullRequest.fromBody(of: Self.request(.post, "/v1/changesets/pull", body: "{}"))
        #expect(empty == PullRequest())
        let text = #"{"after":{"\#(Self.origin.uuidString)":12},"limit":7,"wait_ms":250,"store":"\#(Self.origin.uuidString)"}"#
        let full = try await PullRequest.fromBody(of: Self.request(.post, "/v1/changesets/pull", body: text))
        #expect(full == PullRequest(after: [Self.origin: 12], limit: 7, waitMilliseconds: 250, store: Self.origin))
    }

    @Test("A GET query: the vector as JSON, its spaces possibly written as '+', and the limit")
    func query() throws {
        let vector = #"{"\#(Self.origin.uuidString)":+3}"#.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""
        let pull = try PullRequest.fromQuery(of: Self.request(.get, "/v1/changesets?after=\(vector)&limit=9"))
        #expect(pull == PullRequest(after: [Self.origin: 3], limit: 9))
        #expect(try PullRequest.fromQuery(of: Self.request(.get, "/v1/changesets")) == PullRequest())
    }

    @Test("Bad pulls are 400s that say what is expected, whichever form carries them",
          arguments: [
            (#"{"limit":0}"#, "'limit' must be a whole number from 1 to 10000"),
            (#"{"limit":10001}"#, "'limit' must be a whole number from 1 to 10000"),
            (#"{"wait_ms":-1}"#, "'wait_ms' must be 0 or more milliseconds"),
            (#"{"after":null}"#, "a pull's body must be"),
            (#"{"store":"not a uuid"}"#, "a pull's body must be"),
            ("[1,2]", "a pull's body must be"),
          ])
    func badBodies(body: String, message: String) async {
        do {
            _ = try await PullRequest.fromBody(of: Self.request(.post, "/v1/changesets/pull", body: body))
            Issue.record("\(body) was taken")
        } catch {
            #expect(Self.status(of: error) == 400 && "\(error)".contains(message), "\(body): \(error)")
        }
    }

    @Test("Bad queries are 400s", arguments: ["after=%7Bnot", "limit=ten", "limit=0", "limit=10001"])
    func badQueries(query: String) {
        #expect(throws: APIError.self) { try PullRequest.fromQuery(of: Self.request(.get, "/v1/changesets?\(query)")) }
    }

    @Test("A body past the bound is a 413")
    func tooLarge() async {
        let body = #"{"after":{},"pad":""# + String(repeating: "x", count: PullRequest.maximumRequestBytes) + #""}"#
        do {
            _ = try await PullRequest.fromBody(of: Self.request(.post, "/v1/changesets/pull", body: body))
            Issue.record("an oversized body was taken")
        } catch {
            #expect(Self.status(of: error) == 413, "\(error)")
        }
    }
}
