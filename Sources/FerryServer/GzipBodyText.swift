import Foundation
import CompressNIO
import NIOCore

/// A large gzip push body unpacked straight into its text, a window at a time.
///
/// Unpacking with CompressNIO's `decompress(with:maxSize:)` inflates into buffers of 1.5, 3, 4.5…
/// times the packed size and then copies them into one, and the lines are then copied out of that:
/// a relay taking one change set of 14.1 MB grew by 30 MB (docs/PERFORMANCE.md). The gzip trailer
/// records the unpacked length, so the text's one buffer can be made first and filled as zlib goes.
enum GzipBodyText {
    /// Bodies that unpack to fewer bytes than this are left to the usual unpacking (small pushes,
    /// which are most, keep the path they were measured on).
    static let smallestDirect = 1 << 20

    /// Bytes inflated at a time before they are copied into the text.
    static let windowBytes = 64 << 10

    /// The unpacked length a gzip body records in its last 4 bytes (ISIZE: the length modulo 2^32,
    /// of its last member); nil for a body that does not start as gzip (magic bytes and deflate) or is
    /// too short to be it. Only a claim until the body is unpacked.
    static func recordedLength(of packed: ByteBuffer) -> Int? {
        // (A 10-byte header and an 8-byte trailer at least.)
        guard packed.readableBytes >= 18, packed.getBytes(at: packed.readerIndex, length: 3) == [0x1F, 0x8B, 0x08] else { return nil }
        return packed.getInteger(at: packed.writerIndex - 4, endianness: .little, as: UInt32.self).map(Int.init)
    }

    /// The text of `packed`, one gzip member that unpacks to exactly `length` bytes (its trailer's
    /// check sums verified by zlib), without its trailing newlines; nil when the body is anything
    /// else (cut short, damaged, longer or shorter than `length`, more than one member): the caller
    /// then unpacks it the usual way, which says what is wrong with it.
    static func text(of packed: ByteBuffer, length: Int) -> String? {
        guard length > 0, let decompressor = try? startedDecompressor() else { return nil }
        defer { try? decompressor.finishStream() }
        var input = packed
        var window = ByteBuffer()
        window.reserveCapacity(windowBytes)
        return try? String(unsafeUninitializedCapacity: length) { text throws(NotThisBody) -> Int in
            var written = 0
            /// Copies what the window holds into the text; throws when it would pass `length`.
            func take() throws(NotThisBody) {
                let count = window.readableBytes
                guard written + count <= length else { throw NotThisBody() }
                window.withUnsafeReadableBytes { bytes in
                    UnsafeMutableRawBufferPointer(rebasing: UnsafeMutableRawBufferPointer(text)[written...]).copyMemory(from: bytes)
                }
                written += count
                window.clear()
            }
            while true {
                do {
                    try input.decompressStream(to: &window, with: decompressor)
                } catch let error as CompressNIOError where error == .bufferOverflow {
                    try take()  // the window is full
                    continue
                } catch {
                    throw NotThisBody()  // cut short (`inputBufferOverflow`), damaged, or failed
                }
                try take()
                // A return without an error is the stream's end, or all the input taken before it:
                // one more call with nothing left tells them apart (zlib answers the end again, or
                // that it wants more). Bytes after the end are another member.
                guard input.readableBytes == 0 else { throw NotThisBody() }
                do {
                    try input.decompressStream(to: &window, with: decompressor)
                } catch {
                    throw NotThisBody()
                }
                guard window.readableBytes == 0, written == length else { throw NotThisBody() }
                break
            }
            while written > 0, text[written - 1] == UInt8(ascii: "\n") { written -= 1 }
            return written
        }
    }

    /// A body ``text(of:length:)`` leaves to the usual unpacking (only ever swallowed by its `try?`).
    private struct NotThisBody: Error {}

    private static func startedDecompressor() throws -> any NIODecompressor {
        let decompressor = CompressionAlgorithm.gzip().decompressor
        try decompressor.startStream()
        return decompressor
    }
}
