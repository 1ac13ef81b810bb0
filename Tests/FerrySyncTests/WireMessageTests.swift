import Foundation
import Testing
import FerryStore
@testable import FerrySync

/// The control messages (state, apply report, sync answer, status document) are one
/// `Codable` type each, written and read through ``WireJSON`` by the server, the client
/// and the command line alike.
@Suite("Wire messages")
struct WireMessageTests {
    static let a = UUID(uuidString: "11111111-2222-3333-4444-555555555555")!
    static let b = UUID(uuidString: "AAAAAAAA-BBBB-CCCC-DDDD-EEEEEEEEEEEE")!

    @Test("A state reads back as written, in the documented form")
    func state() throws {
        let state = HistoryState(store: Self.a, modelHash: "abc", vector: [Self.a: 3, Self.b: 12])
        let stateJSON = #"{"model":"abc","store":"11111111-2222-3333-4444-555555555555","# +
            #""vector":{"11111111-2222-3333-4444-555555555555":3,"AAAAAAAA-BBBB-CCCC-DDDD-EEEEEEEEEEEE":12}}"#
        #expect(state.json == stateJSON)
        #expect(try WireJSON.decode(HistoryState.self, from: Data(state.json.utf8)) == state)
        #expect(state.json == WireJSON.encode(state), "the fast path and the Codable form differ")
    }

    @Test("An apply report reads back as written, with every count")
    func applyReport() throws {
        var report = ApplyReport()
        report.applied = 2
        report.waiting = 1
        report.vector = [Self.b: 7]
        #expect(report.json == #"{"applied":2,"duplicate":0,"quarantined":0,"vector":{"AAAAAAAA-BBBB-CCCC-DDDD-EEEEEEEEEEEE":7},"waiting":1}"#)
        #expect(try WireJSON.decode(ApplyReport.self, from: Data(report.json.utf8)) == report)
        #expect(report.json == WireJSON.encode(report), "the fast path and the Codable form differ")
    }

    @Test("A sync answer says null for the error of a round that succeeded, and reads back")
    func syncAnswer() throws {
        var ok = PeerSyncResult(peer: "b")
        ok.pulled.applied = 4
        var failed = PeerSyncResult(peer: "c")
        failed.error = .notListening("GET /v1/state: connection refused")
        let answer = SyncNowAnswer([ok, failed])
        let text = WireJSON.encode(answer)
        #expect(text.contains(#"{"error":null,"ok":true,"peer":"b","pulled":{"applied":4,"#), "\(text)")
        #expect(!answer.succeeded)
        let read = try WireJSON.decode(SyncNowAnswer.self, from: Data(text.utf8))
        #expect(read == answer)
        #expect(read.peers[1].summary == failed.summary)
        #expect(read.peers[0].summary
                == "b: ok; pulled 4 applied, 0 duplicate, 0 waiting, 0 quarantined; pushed 0 applied, 0 duplicate, 0 waiting, 0 quarantined")
    }

    @Test("A status document keeps unreadable counts as null, and a store problem without counts")
    func statusDocument() throws {
        var peer = StatusDocument.Peer(name: "b", url: "http://127.0.0.1:1/", state: "idle")
        peer.consecutiveFailures = 0
        var open = StatusDocument(store: Self.a, model: "abc", peers: [peer])
        open.readError = "could not read the version vector"
        let text = open.json
        for member in [#""vector":null"#, #""waiting":null"#, #""quarantined":null"#, #""last_success":null"#, #""to_pull":null"#] {
            #expect(text.contains(member), "\(member) missing from \(text)")
        }
        #expect(try WireJSON.decode(StatusDocument.self, from: Data(text.utf8)) == open)

        let since = Date(timeIntervalSince1970: 1_800_000_000)
        let shut = StatusDocument(storeError: .init(message: "read-only file system", since: since, readOnlyView: true),
                                  peers: [StatusDocument.Peer(name: "b", url: "http://127.0.0.1:1/", state: "waiting for the store")])
        let shutText = shut.json
        #expect(!shutText.contains(#""store":"#) && !shutText.contains("last_attempt"), "\(shutText)")
        #expect(shutText.contains(#""store_error":{"message":"read-only file system","read_only_view":true,"since":"2027-01-15T08:00:00Z"}"#), "\(shutText)")
        #expect(try WireJSON.decode(StatusDocument.self, from: Data(shutText.utf8)) == shut)
    }

    @Test("A message of the wrong shape is an error that names the type and shows the start of the text")
    func wrongShape() {
        #expect(throws: WireError.self) { try WireJSON.decode(HistoryState.self, from: Data(#"{"store":"x"}"#.utf8)) }
        do {
            _ = try WireJSON.decode(ApplyReport.self, from: Data(#"{"applied":1,"duplicate":0,"waiting":0,"quarantined":0,"vector":{"not-a-uuid":1}}"#.utf8))
            Issue.record("a vector keyed by something other than store UUIDs was accepted")
        } catch {
            #expect(error.description.contains("ApplyReport") && error.description.contains("not-a-uuid"), "\(error)")
        }
        #expect(PeerClient.errorMessage(Data(#"{"error":{"message":"nope"}}"#.utf8)) == "nope")
        #expect(PeerClient.errorMessage(Data("plain text".utf8)) == "plain text")
    }
}
