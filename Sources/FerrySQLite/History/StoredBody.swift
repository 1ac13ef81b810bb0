import Foundation
import GRDB
import CompressNIO
import NIOCore
import FerryStore

/// How a change set's body is kept in `Z_FERRY_CHANGESET.Z_BODY`: a body of at least
/// ``smallestCompressed`` bytes as a BLOB of its length (4 bytes, big-endian: a stream cut short
/// inflates without an error, and the length tells) and its zlib stream (fastest level: W1's change sets
/// shrink about 20×, at some 700 MB/s), a shorter one as TEXT. Stores written before
/// compression hold TEXT only, and read the same. A local save's body is compressed in its
/// transaction (the text is written there), most of it ahead of time when its inserts' text was
/// (``CompressedPrefix``); a replayed one before the replay takes the writer
/// (``compressed(_:)-(String)``), so the application's saves do not wait for it.
enum StoredBody {
    /// Bodies shorter than this stay text: a zlib stream of a few hundred bytes saves little.
    static let smallestCompressed = 512

    static let algorithm = CompressionAlgorithm.zlib(configuration: ZlibConfiguration(windowSize: 15, compressionLevel: 1, memoryLevel: 8))

    /// The zlib stream to store for `body`; nil when it is short enough to stay text.
    static func compressed(_ body: UnsafeBufferPointer<UInt8>) throws -> [UInt8]? {
        guard body.count >= smallestCompressed, let length = UInt32(exactly: body.count) else { return nil }
        let compressor = algorithm.compressor
        try compressor.startStream()
        var stream = ByteBuffer()
        try deflate(body, into: &stream, with: compressor, finish: true)
        try compressor.finishStream()
        return stored(stream, length: length)
    }

    /// The column's value for a zlib stream of a body `length` bytes long: the length, then the stream.
    static func stored(_ stream: ByteBuffer, length: UInt32) -> [UInt8] {
        var stored: [UInt8] = []
        stored.reserveCapacity(4 + stream.readableBytes)
        stored.append(contentsOf: [UInt8(length >> 24), UInt8((length >> 16) & 0xFF), UInt8((length >> 8) & 0xFF), UInt8(length & 0xFF)])
        stored.append(contentsOf: stream.readableBytesView)
        return stored
    }

    /// Bytes of text handed to zlib at a time by ``deflate(_:into:with:finish:)``.
    static let deflateSliceBytes = 256 << 10

    /// Deflates `input` into `output` (growing it as needed) a slice of ``deflateSliceBytes`` at a
    /// time, ending the stream when `finish` is set. What it holds beyond `output` is one slice's
    /// copy: not a copy of the whole body, and not an output sized for the whole body by zlib's bound
    /// (about the body's length, where the stream is some 20 times shorter). Compressing a received
    /// change set of 21 MB in one step held 67 MB beside the replay's own memory (docs/PERFORMANCE.md).
    static func deflate(_ input: UnsafeBufferPointer<UInt8>, into output: inout ByteBuffer, with compressor: NIOCompressor,
                        finish: Bool) throws {
        var start = 0
        var slice = ByteBuffer()
        repeat {
            let end = min(start + deflateSliceBytes, input.count)
            slice.clear()
            slice.writeBytes(UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(input)[start..<end]))
            try deflateAll(&slice, into: &output, with: compressor, flush: finish && end == input.count ? .finish : .no)
            start = end
        } while start < input.count
    }

    /// Deflates all of `input` into `output`, growing it as needed.
    private static func deflateAll(_ input: inout ByteBuffer, into output: inout ByteBuffer, with compressor: NIOCompressor,
                                   flush: CompressNIOFlush) throws {
        while true {
            output.reserveCapacity(minimumWritableBytes: max(compressor.maxSize(from: input), 4096))
            do {
                try compressor.streamDeflate(from: &input, to: &output, flush: flush)
                if flush == .finish || input.readableBytes == 0 { return }
            } catch let error as CompressNIOError where error == .bufferOverflow {
                continue  // (what was consumed and written is kept; go on with more room)
            }
        }
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
            guard let length = recordedLength(data) else { throw StoredBodyError() }
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

    /// The length of the body's text, read without inflating it: a compressed body records it.
    /// - Throws: ``StoredBodyError`` for a body that is neither text nor a compressed stream.
    static func length(_ value: DatabaseValue) throws -> Int {
        switch value.storage {
        case .string(let text): return text.utf8.count
        case .blob(let data):
            guard let length = recordedLength(data) else { throw StoredBodyError() }
            return length
        default: throw StoredBodyError()
        }
    }

    /// The inflated length a compressed body records in its first 4 bytes; nil when it is too short
    /// to hold them and a stream.
    private static func recordedLength(_ data: Data) -> Int? {
        guard data.count > 4 else { return nil }
        return data.prefix(4).reduce(0) { $0 << 8 | Int($1) }
    }

    /// Bodies at least this long (inflated) are read in pieces when a page is served
    /// (``line(_:)``): a pull answer's size, past which such a change set goes alone.
    static let piecewiseLength = 1 << 20

    /// The body as a page's line: a compressed body of at least ``piecewiseLength`` bytes stays
    /// compressed, inflated a piece at a time as it is read (``InflatingPieces``); any other is text.
    /// - Throws: ``StoredBodyError`` for a body that is neither text nor a compressed stream.
    static func line(_ value: DatabaseValue) throws -> ChangeSetPage.Line {
        guard case .blob(let data) = value.storage, let length = recordedLength(data), length >= piecewiseLength else {
            return ChangeSetPage.Line(try text(value))
        }
        let stream = ByteBuffer(bytes: data.dropFirst(4))
        return ChangeSetPage.Line(byteCount: length) { InflatingPieces(stream: stream, length: length) }
    }
}

/// A compressed body's text, inflated a piece at a time: what a reading holds is zlib's state
/// (some 40 KB), the compressed bytes it is inflating (64 KB at most, copied from the stored form,
/// which readings share and never change) and the piece not yet taken.
struct InflatingPieces: LinePieces {
    /// The stored form (zlib stream), shared with every other reading of the line.
    private let stream: ByteBuffer
    private let length: Int
    private var decompressor: (any NIODecompressor)?
    /// How much of `stream` went into `input` so far.
    private var consumed = 0
    /// Compressed bytes being inflated (a copy, so that inflating does not copy `stream` whole).
    private var input = ByteBuffer()
    /// Inflated bytes not given yet.
    private var pending = ByteBuffer()
    /// Bytes inflated so far.
    private var inflated = 0

    /// Compressed bytes copied into `input` at a time.
    private static let inputBytes = 64 << 10

    init(stream: ByteBuffer, length: Int) {
        self.stream = stream
        self.length = length
    }

    mutating func next(maximumBytes: Int) throws -> [UInt8]? {
        let wanted = max(maximumBytes, 1)
        var piece: [UInt8] = []
        while piece.count < wanted {
            if pending.readableBytes == 0 {
                guard inflated < length else {
                    try checkNothingFollows()
                    break
                }
                pending.clear()
                pending.reserveCapacity(min(wanted - piece.count, length - inflated))
                try inflateIntoPending()
                inflated += pending.readableBytes
                guard pending.readableBytes > 0 else {
                    throw LinePiecesError(detail: "its compressed form ends after \(inflated) of \(length) bytes")
                }
                guard inflated <= length else {
                    throw LinePiecesError(detail: "its compressed form inflates past the \(length) bytes recorded")
                }
            }
            let taken = min(wanted - piece.count, pending.readableBytes)
            pending.withUnsafeReadableBytes { piece.append(contentsOf: $0.prefix(taken)) }
            pending.moveReaderIndex(forwardBy: taken)
        }
        return piece.isEmpty ? nil : piece
    }

    /// Inflates into `pending` until it is full or the stored form is used up.
    private mutating func inflateIntoPending() throws {
        let decompressor = try startedDecompressor()
        while pending.writableBytes > 0 {
            if input.readableBytes == 0 {
                guard takeInput() else { return }
            }
            do {
                try input.decompressStream(to: &pending, with: decompressor)
                if input.readableBytes > 0 { return }  // the stream's end, with bytes after it
            } catch let error as CompressNIOError where error == .bufferOverflow {
                return  // `pending` is full
            } catch let error as CompressNIOError where error == .inputBufferOverflow {
                // `input` is used up: take more.
            } catch {
                throw LinePiecesError(detail: "its compressed form does not inflate after \(inflated + pending.readableBytes) of \(length) bytes (\(error))")
            }
        }
    }

    /// Copies the next compressed bytes into `input`; false when none are left.
    private mutating func takeInput() -> Bool {
        let count = min(Self.inputBytes, stream.readableBytes - consumed)
        guard count > 0, let slice = stream.getSlice(at: stream.readerIndex + consumed, length: count) else { return false }
        input.clear()
        input.writeImmutableBuffer(slice)
        consumed += count
        return true
    }

    /// Once the recorded length is given: no byte may follow it.
    private mutating func checkNothingFollows() throws {
        guard input.readableBytes > 0 || consumed < stream.readableBytes else { return }
        pending.clear()
        pending.reserveCapacity(16)
        try inflateIntoPending()
        guard pending.readableBytes == 0 else {
            throw LinePiecesError(detail: "its compressed form inflates past the \(length) bytes recorded")
        }
    }

    private mutating func startedDecompressor() throws -> any NIODecompressor {
        if let decompressor { return decompressor }
        let started = StoredBody.algorithm.decompressor
        try started.startStream()
        decompressor = started
        return started
    }
}

/// A body compressed in two steps: its beginning ahead of the write transaction, the rest in it.
///
/// A local save's body is its inserts' text (written by ``InsertTextInAdvance`` on a thread of its
/// own while the rows are written) and a short tail known only in the transaction (clock,
/// sequence). Compressing the inserts beside the writes leaves only the tail for the transaction,
/// which the application's next save waits for. The stored form is ``StoredBody``'s, and it
/// inflates to the same text as one-step compression.
final class CompressedPrefix: @unchecked Sendable {
    // (@unchecked: made on one thread and handed to the saving thread through the semaphore of
    // `InsertTextInAdvance`; never used by two threads at once.)
    private let compressor: NIOCompressor
    private var stream: ByteBuffer
    /// How many bytes of the body are compressed already.
    let prefixLength: Int

    /// Compresses `prefix`, the beginning of a body; nil when it is too short to be worth it (a
    /// body that short may stay text, see ``StoredBody/smallestCompressed``).
    init?(_ prefix: UnsafeBufferPointer<UInt8>) throws {
        guard prefix.count >= StoredBody.smallestCompressed else { return nil }
        compressor = StoredBody.algorithm.compressor
        try compressor.startStream()
        stream = ByteBuffer()
        try StoredBody.deflate(prefix, into: &stream, with: compressor, finish: false)
        prefixLength = prefix.count
    }

    /// The stored form of `body`, whose first ``prefixLength`` bytes must be the prefix given at
    /// the start (nil when they are not: the caller then compresses the body in one step). Call once.
    func finish(_ body: UnsafeBufferPointer<UInt8>) throws -> [UInt8]? {
        guard body.count >= prefixLength, let length = UInt32(exactly: body.count) else { return nil }
        try StoredBody.deflate(UnsafeBufferPointer(rebasing: body[prefixLength...]), into: &stream, with: compressor, finish: true)
        try compressor.finishStream()
        return StoredBody.stored(stream, length: length)
    }
}

/// A stored change-set body that cannot be read back (the file was damaged).
struct StoredBodyError: Error, CustomStringConvertible {
    var description: String {
        "a change set's stored body does not inflate to text: the store file is damaged; restore it from a backup or a peer"
    }
}
