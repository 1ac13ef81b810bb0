import Foundation
import GRDB
import CompressNIO
import NIOCore

/// How a change set's body is kept in `Z_FERRY_CHANGESET.Z_BODY`: a body of at least
/// ``smallestCompressed`` bytes as a BLOB of its length (4 bytes, big-endian: a stream cut short
/// inflates without an error, and the length tells) and its zlib stream (fastest level: W1's change sets
/// shrink about 20×, at some 700 MB/s), a shorter one as TEXT. Stores written before
/// compression hold TEXT only, and read the same. A local save's body is compressed in its
/// transaction (the text is written there); a replayed one before the replay takes the writer
/// (``compressed(_:)-(String)``), so the application's saves do not wait for it.
enum StoredBody {
    /// Bodies shorter than this stay text: a zlib stream of a few hundred bytes saves little.
    static let smallestCompressed = 512

    private static let algorithm = CompressionAlgorithm.zlib(configuration: ZlibConfiguration(windowSize: 15, compressionLevel: 1, memoryLevel: 8))

    /// The zlib stream to store for `body`; nil when it is short enough to stay text.
    static func compressed(_ body: UnsafeBufferPointer<UInt8>) throws -> [UInt8]? {
        guard body.count >= smallestCompressed, let length = UInt32(exactly: body.count) else { return nil }
        var input = ByteBuffer(bytes: body)
        let stream = try input.compress(with: algorithm)
        var stored: [UInt8] = []
        stored.reserveCapacity(4 + stream.readableBytes)
        stored.append(contentsOf: [UInt8(length >> 24), UInt8((length >> 16) & 0xFF), UInt8((length >> 8) & 0xFF), UInt8(length & 0xFF)])
        stored.append(contentsOf: stream.readableBytesView)
        return stored
    }

    /// The zlib stream to store for a received change set's `body`; nil when it stays text.
    static func compressed(_ body: String) throws -> [UInt8]? {
        var body = body
        return try body.withUTF8 { try compressed($0) }
    }

    /// The body's text from the column's value.
    /// - Throws: ``StoredBodyError`` when a BLOB does not inflate to UTF-8 text (a damaged file).
    static func text(_ value: DatabaseValue) throws -> String {
        switch value.storage {
        case .string(let text):
            return text
        case .blob(let data):
            guard data.count > 4 else { throw StoredBodyError() }
            let length = data.prefix(4).reduce(0) { $0 << 8 | Int($1) }
            var input = ByteBuffer(bytes: data.dropFirst(4))
            let inflated: ByteBuffer
            do {
                inflated = try input.decompress(with: algorithm, maxSize: length + 1)
            } catch {
                throw StoredBodyError()
            }
            guard inflated.readableBytes == length,
                  let text = String(validating: inflated.readableBytesView, as: UTF8.self) else { throw StoredBodyError() }
            return text
        default:
            throw StoredBodyError()
        }
    }
}

/// A stored change-set body that cannot be read back (the file was damaged).
struct StoredBodyError: Error, CustomStringConvertible {
    var description: String {
        "a change set's stored body does not inflate to text: the store file is damaged; restore it from a backup or a peer"
    }
}
