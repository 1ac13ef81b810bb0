import Foundation
import Testing
import Hummingbird
import HummingbirdTesting
import NIOCore
import FerryStore
import FerrySync
import FerryTestSupport

/// A snapshot upload to a peer that stops taking its body (a relay whose process or machine
/// stopped) fails once the client has asked for no chunk of the file for its timeout: uploads have
/// no deadline (a snapshot may take long on a slow link) and the read timeout only starts once the
/// body is sent, so before that bound the upload waited for ever.
@Suite("Stalled snapshot upload")
struct StalledUploadTests {
    /// Answers nothing and reads nothing until `release` ends.
    struct Stalling: HTTPResponder {
        let release: AsyncStream<Void>

        func respond(to request: Request, context: BasicRequestContext) async throws -> Response {
            for await _ in release {}
            return Response(status: .gone)
        }
    }

    @Test("An upload the peer stops reading fails as unreachable after the timeout")
    func uploadFailsWhenThePeerStopsReading() async throws {
        // Larger than what loopback's socket buffers hold, so the client's writes stop.
        let directory = TemporaryDirectory()
        let path = directory.file("snapshot.sqlite")
        try Data(count: 64 << 20).write(to: URL(fileURLWithPath: path))
        let handle = try FileHandle(forReadingFrom: URL(fileURLWithPath: path))
        defer { try? handle.close() }
        let (release, releaser) = AsyncStream<Void>.makeStream()
        let app = Application(responder: Stalling(release: release))
        try await app.test(.live) { client in
            defer { releaser.finish() }
            let port = try #require(client.port)
            let peer = PeerClient(baseURL: try #require(URL(string: "http://127.0.0.1:\(port)")), token: "peer-token", timeout: 1)
            let (outcome, waited) = await BoundedWaiting.outcome(within: .seconds(15)) {
                try await peer.uploadSnapshot(SnapshotFile(handle: handle, size: 64 << 20), of: UUID())
            }
            guard case .failure(PeerError.unreachable(let detail, _)) = outcome else {
                Issue.record("the stalled upload ended with \(outcome) after \(waited)")
                return
            }
            #expect(!detail.contains("cancelled"), "\(detail)")
            #expect(waited < .seconds(8), "the timeout is 1 s without a byte written: \(waited)")
        }
    }
}
