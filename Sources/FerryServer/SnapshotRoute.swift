import Foundation
import Hummingbird
import NIOPosix
import FerryStore
import FerrySync

/// `GET /v1/snapshot`: a consistent snapshot of the store (docs/SYNC.md, "Snapshots"), streamed
/// as the SQLite file it is (`application/vnd.sqlite3`, with its length), so that a new peer, or
/// one the history or the tombstone horizon left behind (410), starts from what this store holds.
///
/// The snapshot is written to a file next to the store (one read transaction: writers go on),
/// unlinked at once, and read in chunks on the I/O pool while the answer is sent, so memory stays
/// flat whatever the store's size. Authorized like a pull: any token of the tokens file.
struct SnapshotRoute: Sendable {
    let gate: StoreGate
    /// Bytes read from the file and written to the connection at a time.
    static let chunkBytes = 1 << 20

    func answer() async throws -> Response {
        let endpoint = try await gate.readableEndpointOrUnavailable()
        let file: SnapshotFile
        do {
            file = try await endpoint.writeSnapshot()
        } catch {
            throw APIError.unavailable("cannot take a snapshot of the store now: \(error)", cause: error)
        }
        let store = endpoint.storeIdentifier
        let body = ResponseBody(contentLength: Int(file.size)) { writer in
            defer { try? file.handle.close() }
            var sent: Int64 = 0
            while sent < file.size {
                let chunk = try await NIOThreadPool.singleton.runIfActive { try file.handle.read(upToCount: Self.chunkBytes) ?? Data() }
                guard !chunk.isEmpty else { break }
                try await writer.write(ByteBuffer(bytes: chunk))
                sent += Int64(chunk.count)
            }
            try await writer.finish(nil)
        }
        var headers: HTTPFields = [.contentType: "application/vnd.sqlite3"]
        if let name = HTTPFields.Element.Name("Ferry-Snapshot-Of") { headers[name] = store.uuidString }
        return Response(status: .ok, headers: headers, body: body)
    }
}
