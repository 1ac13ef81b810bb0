import Foundation
import CompressNIO
import NIOCore
import FerryStore

/// A push request's body made as it is sent: the lines, a newline after each, gzip-compressed a piece
/// at a time, a line the store gives in pieces (a large change set, ``ChangeSetPage/Line``) inflated
/// from the store's compressed form as it goes. A reading holds zlib's states, one piece of text and
/// its compressed form; the push as a whole, the store's form of the line (some 15–20 times smaller
/// than its text) — not the line, as a body made whole would, once for every peer it goes to.
struct PushBody: StreamedBodyReading {
    /// Bytes of text compressed into one piece of the body.
    static let pieceBytes = 256 << 10

    private let lines: [ChangeSetPage.Line]
    /// The next line to start.
    private var nextLine = 0
    /// The pieces of the line being sent, when it is one given in pieces.
    private var reading: (any LinePieces)?
    private var compressor: (any NIOCompressor)?
    private var ended = false

    init(lines: [ChangeSetPage.Line]) {
        self.lines = lines
    }

    /// The body as a request to be sent: a new reading from its first byte for each try.
    static func streamed(_ lines: [ChangeSetPage.Line]) -> StreamedBody {
        StreamedBody { PushBody(lines: lines) }
    }

    mutating func next() throws -> Data? {
        guard !ended else { return nil }
        let compressor = try startedCompressor()
        // (Each piece ends with a sync flush, so none is empty and the peer can unpack what it has.)
        if var text = try nextText() {
            return Data(try text.compressStream(with: compressor, flush: .sync).readableBytesView)
        }
        ended = true
        var end = ByteBuffer()
        let last = try end.compressStream(with: compressor, flush: .finish)
        try compressor.finishStream()
        return Data(last.readableBytesView)
    }

    /// Up to ``pieceBytes`` of the body's text (a line held whole goes at once); nil at its end.
    private mutating func nextText() throws -> ByteBuffer? {
        var text = ByteBuffer()
        while text.readableBytes < Self.pieceBytes {
            if var pieces = reading {
                // (Taken out while it is read, so that its buffers are not copied to be changed.)
                reading = nil
                if let piece = try pieces.next(maximumBytes: Self.pieceBytes - text.readableBytes) {
                    text.writeBytes(piece)
                    reading = pieces
                } else {
                    text.writeInteger(UInt8(ascii: "\n"))
                }
                continue
            }
            guard nextLine < lines.count else { break }
            let line = lines[nextLine]
            nextLine += 1
            if let whole = line.text {
                text.writeString(whole)
                text.writeInteger(UInt8(ascii: "\n"))
            } else {
                reading = line.pieces()
            }
        }
        return text.readableBytes == 0 ? nil : text
    }

    private mutating func startedCompressor() throws -> any NIOCompressor {
        if let compressor { return compressor }
        let started = CompressionAlgorithm.gzip(configuration: PeerClient.pushCompression).compressor
        try started.startStream()
        compressor = started
        return started
    }
}
