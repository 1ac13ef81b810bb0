import Foundation
import GRDB
import FerryModel
import FerryStore

/// How a change set's body is kept in `Z_FERRY_CHANGESET.Z_BODY`: a body of at least
/// ``smallestCompressed`` bytes as a BLOB of its length (4 bytes, big-endian: a stream cut short
/// inflates without an error, and the length tells) and its zlib stream (fastest level: W1's change sets
/// shrink about 20×, at some 700 MB/s), a shorter one as TEXT. Stores written before
/// compression hold TEXT only, and read the same. A local save's body is compressed in its
/// transaction (the text is written there), most of it ahead of time when its inserts' text was
/// (``CompressedPrefix``); a replayed one before the replay takes the writer
/// (``compressed(_:)-(String)``), so the application's saves do not wait for it.
///
/// zlib is the system's (``ZlibDeflater``, ``ZlibInflater``): a store-only application builds
/// no networking library for it.
enum StoredBody {
    /// Bodies shorter than this stay text: a zlib stream of a few hundred bytes saves little.
    static let smallestCompressed = 512

    /// The zlib stream to store for `body`; nil when it is short enough to stay text.
    static func compressed(_ body: UnsafeBufferPointer<UInt8>) throws -> [UInt8]? {
        guard body.count >= smallestCompressed, let length = UInt32(exactly: body.count) else { return nil }
        var stored = lengthPrefix(length)
        try ZlibDeflater().deflate(UnsafeRawBufferPointer(body), into: &stored, finish: true)
        return stored
    }

    /// The first 4 bytes of a compressed body's column: its text's length, big-endian.
    static func lengthPrefix(_ length: UInt32) -> [UInt8] {
        [UInt8(length >> 24), UInt8((length >> 16) & 0xFF), UInt8((length >> 8) & 0xFF), UInt8(length & 0xFF)]
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
            // Room for one byte more than recorded: a stream that inflates past its length is damaged.
            var inflated = [UInt8](repeating: 0, count: length + 1)
            var written = 0
            let inflater: ZlibInflater
            do {
                inflater = try ZlibInflater()
                try data.withUnsafeBytes { stored in
                    var input = UnsafeRawBufferPointer(rebasing: stored[4...])
                    try inflated.withUnsafeMutableBytes { output in
                        while !inflater.ended && written < output.count {
                            let step = try inflater.inflate(input, into: UnsafeMutableRawBufferPointer(rebasing: output[written...]))
                            input = UnsafeRawBufferPointer(rebasing: input[step.read...])
                            written += step.written
                            if step.read == 0 && step.written == 0 { break }  // cut short: the length or the missing end tells
                        }
                    }
                }
            } catch {
                throw StoredBodyError(cause: error)
            }
            // (The stream's end is where zlib checks its checksum: a stream cut before it is damaged too.)
            guard written == length, inflater.ended, let text = String(validating: inflated[..<length], as: UTF8.self) else { throw StoredBodyError() }
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
        let stream = data.dropFirst(4)
        return ChangeSetPage.Line(byteCount: length) { InflatingPieces(stream: stream, length: length) }
    }
}

/// A compressed body's text, inflated a piece at a time: what a reading holds is zlib's state
/// (some 40 KB) and the piece it gives; the compressed bytes are read where they are (the stored
/// form, which readings share and never change).
struct InflatingPieces: LinePieces {
    /// The stored form (zlib stream), shared with every other reading of the line.
    private let stream: Data
    private let length: Int
    private var inflater: ZlibInflater?
    /// How much of `stream` zlib has read so far.
    private var consumed = 0
    /// Bytes inflated so far.
    private var inflated = 0

    init(stream: Data, length: Int) {
        self.stream = stream
        self.length = length
    }

    mutating func next(maximumBytes: Int) throws -> [UInt8]? {
        guard inflated < length else {
            try checkNothingFollows()
            return nil
        }
        let wanted = min(max(maximumBytes, 1), length - inflated)
        var piece = [UInt8](repeating: 0, count: wanted)
        var written = 0
        try piece.withUnsafeMutableBytes { output in
            while written < wanted {
                let step = try inflate(into: UnsafeMutableRawBufferPointer(rebasing: output[written...]))
                written += step
                if step == 0 { break }
            }
        }
        inflated += written
        guard written == wanted else {
            throw LinePiecesError(detail: "its compressed form ends after \(inflated) of \(length) bytes")
        }
        return piece
    }

    /// Inflates what fits into `output` from where zlib stopped reading; returns how many bytes it wrote.
    private mutating func inflate(into output: UnsafeMutableRawBufferPointer) throws -> Int {
        let inflater = try startedInflater()
        let consumed = self.consumed
        let step: (read: Int, written: Int)
        do {
            step = try stream.withUnsafeBytes { bytes in
                try inflater.inflate(UnsafeRawBufferPointer(rebasing: bytes[consumed...]), into: output)
            }
        } catch {
            throw LinePiecesError(detail: "its compressed form does not inflate after \(inflated) of \(length) bytes (\(error))", cause: error)
        }
        self.consumed += step.read
        return step.written
    }

    /// Once the recorded length is given: no byte may follow it, and the stream must end there
    /// (its end is where zlib checks the checksum).
    private mutating func checkNothingFollows() throws {
        var probe: UInt8 = 0
        let inflater = try startedInflater()
        while !inflater.ended {
            let before = consumed
            let extra = try withUnsafeMutableBytes(of: &probe) { try inflate(into: $0) }
            guard extra == 0 else {
                throw LinePiecesError(detail: "its compressed form inflates past the \(length) bytes recorded")
            }
            guard consumed > before || inflater.ended else {
                throw LinePiecesError(detail: "its compressed form ends before its checksum, after all \(length) bytes")
            }
        }
    }

    private mutating func startedInflater() throws -> ZlibInflater {
        if let inflater { return inflater }
        let started: ZlibInflater
        do { started = try ZlibInflater() } catch { throw LinePiecesError(detail: "\(error)", cause: error) }
        inflater = started
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
    // (@unchecked: made on one thread and handed to the saving thread through
    // `InsertTextInAdvance`'s join; never used by two threads at once.)
    private let deflater: ZlibDeflater
    /// The stored form so far: 4 bytes for the length (written at the end), then the stream.
    private var stored: [UInt8]
    /// How many bytes of the body are compressed already.
    let prefixLength: Int

    /// Compresses `prefix`, the beginning of a body; nil when it is too short to be worth it (a
    /// body that short may stay text, see ``StoredBody/smallestCompressed``).
    init?(_ prefix: UnsafeBufferPointer<UInt8>) throws {
        guard prefix.count >= StoredBody.smallestCompressed else { return nil }
        deflater = try ZlibDeflater()
        stored = StoredBody.lengthPrefix(0)
        try deflater.deflate(UnsafeRawBufferPointer(prefix), into: &stored, finish: false)
        prefixLength = prefix.count
    }

    /// The stored form of `body`, whose first ``prefixLength`` bytes must be the prefix given at
    /// the start (nil when they are not: the caller then compresses the body in one step). Call once.
    func finish(_ body: UnsafeBufferPointer<UInt8>) throws -> [UInt8]? {
        guard body.count >= prefixLength, let length = UInt32(exactly: body.count) else { return nil }
        try deflater.deflate(UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(body)[prefixLength...]), into: &stored, finish: true)
        stored.replaceSubrange(0..<4, with: StoredBody.lengthPrefix(length))
        return stored
    }
}

/// A stored change-set body that cannot be read back (the file was damaged).
struct StoredBodyError: FerryError, CustomStringConvertible {
    /// The kinds of ``StoredBodyError``: one, whatever part of the stored form is wrong.
    enum Code: String, Hashable, Sendable {
        /// The stored body is neither text nor a compressed stream of its recorded length that inflates to UTF-8 text.
        case damaged
    }

    /// zlib's error when the stream does not inflate (a ``ZlibError``); nil when the stored form's shape is wrong.
    let cause: (any Error)?

    var code: Code { .damaged }

    init(cause: (any Error)? = nil) {
        self.cause = cause
    }

    var description: String {
        "a change set's stored body does not inflate to text: the store file is damaged; restore it from a backup or a peer"
    }
}
