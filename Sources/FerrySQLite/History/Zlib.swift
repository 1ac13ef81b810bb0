import CFerryZlib
import FerryModel

/// One zlib stream (RFC 1950) being made: the system's zlib, at the settings of ``StoredBody``
/// (fastest level, 32 KB window, default memory level and strategy).
///
/// A class, so that zlib's `z_stream`, which must not move while the stream lives, has one
/// address; not for sharing: one thread uses it at a time.
final class ZlibDeflater {
    private let stream: UnsafeMutablePointer<z_stream>

    /// - Throws: ``ZlibError`` when zlib cannot start a stream (out of memory).
    init(level: Int32 = 1) throws(ZlibError) {
        stream = try ZlibStream.started("deflateInit2") { CFerryZlib_deflateInit2($0, level, 15, 8) }
    }

    deinit {
        ZlibStream.end(stream, with: deflateEnd)
    }

    /// Deflates all of `input`, appending what zlib writes to `output`; `finish` ends the stream.
    /// `output` grows with the stream (zlib writes into a buffer of ``outputChunk`` bytes at a
    /// time), never by a bound on the input's size.
    func deflate(_ input: UnsafeRawBufferPointer, into output: inout [UInt8], finish: Bool) throws(ZlibError) {
        var start = 0
        repeat {
            // (zlib counts in 32 bits: a larger input goes in slices.)
            let end = input.count - start > Int(UInt32.max) ? start + Int(UInt32.max) : input.count
            let last = end == input.count
            try deflateSlice(UnsafeRawBufferPointer(rebasing: input[start..<end]), into: &output, finish: finish && last)
            start = end
        } while start < input.count
    }

    /// Bytes zlib writes at a time before they are appended to the output.
    static let outputChunk = 64 << 10

    private func deflateSlice(_ input: UnsafeRawBufferPointer, into output: inout [UInt8], finish: Bool) throws(ZlibError) {
        stream.pointee.next_in = UnsafeMutablePointer(mutating: input.baseAddress?.assumingMemoryBound(to: Bytef.self))
        stream.pointee.avail_in = UInt32(input.count)
        defer {
            stream.pointee.next_in = nil
            stream.pointee.avail_in = 0
        }
        let flush = finish ? Z_FINISH : Z_NO_FLUSH
        var chunk = [UInt8](repeating: 0, count: Self.outputChunk)
        while true {
            let (code, written) = chunk.withUnsafeMutableBufferPointer { buffer -> (Int32, Int) in
                stream.pointee.next_out = buffer.baseAddress
                stream.pointee.avail_out = UInt32(buffer.count)
                let code = CFerryZlib.deflate(stream, flush)
                let written = buffer.count - Int(stream.pointee.avail_out)
                stream.pointee.next_out = nil
                stream.pointee.avail_out = 0
                return (code, written)
            }
            output.append(contentsOf: chunk[..<written])
            switch code {
            case Z_STREAM_END:
                return
            case Z_OK, Z_BUF_ERROR:
                // Done with this input unless zlib filled the chunk (it may have more to write) or
                // the stream is to end and has not yet.
                if written < chunk.count && stream.pointee.avail_in == 0 && !finish { return }
            default:
                throw ZlibError(operation: "deflate", result: code)
            }
        }
    }
}

/// One zlib stream (RFC 1950) being read, with the system's zlib. A class for the same reason as
/// ``ZlibDeflater``; one thread uses it at a time.
final class ZlibInflater {
    private let stream: UnsafeMutablePointer<z_stream>
    /// Whether the stream's end was read.
    private(set) var ended = false

    /// - Throws: ``ZlibError`` when zlib cannot start a stream (out of memory).
    init() throws(ZlibError) {
        stream = try ZlibStream.started("inflateInit2") { CFerryZlib_inflateInit2($0, 15) }
    }

    deinit {
        ZlibStream.end(stream, with: inflateEnd)
    }

    /// Inflates from `input` into `output` until `output` is full, `input` is used up or the
    /// stream ends (``ended``). Returns how many bytes of `input` were read and of `output` written.
    /// - Throws: ``ZlibError`` when the input is not a zlib stream, or its data or checksum is wrong.
    func inflate(_ input: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer) throws(ZlibError) -> (read: Int, written: Int) {
        guard !ended, !output.isEmpty else { return (0, 0) }
        let inputCount = min(input.count, Int(UInt32.max))
        let outputCount = min(output.count, Int(UInt32.max))
        stream.pointee.next_in = UnsafeMutablePointer(mutating: input.baseAddress?.assumingMemoryBound(to: Bytef.self))
        stream.pointee.avail_in = UInt32(inputCount)
        stream.pointee.next_out = output.baseAddress?.assumingMemoryBound(to: Bytef.self)
        stream.pointee.avail_out = UInt32(outputCount)
        defer {
            stream.pointee.next_in = nil
            stream.pointee.avail_in = 0
            stream.pointee.next_out = nil
            stream.pointee.avail_out = 0
        }
        let code = CFerryZlib.inflate(stream, Z_NO_FLUSH)
        let read = inputCount - Int(stream.pointee.avail_in)
        let written = outputCount - Int(stream.pointee.avail_out)
        switch code {
        case Z_STREAM_END:
            ended = true
        case Z_OK, Z_BUF_ERROR:
            break  // (Z_BUF_ERROR: no progress possible without more input or room)
        default:
            throw ZlibError(operation: "inflate", result: code)
        }
        return (read, written)
    }
}

/// A `z_stream` at an address of its own, started and ended for ``ZlibDeflater`` and ``ZlibInflater``.
enum ZlibStream {
    /// A new stream, started by `start` (`deflateInit2` or `inflateInit2`, named by `operation`).
    static func started(_ operation: String, _ start: (z_streamp) -> Int32) throws(ZlibError) -> UnsafeMutablePointer<z_stream> {
        let stream = UnsafeMutablePointer<z_stream>.allocate(capacity: 1)
        stream.initialize(to: z_stream())
        let code = start(stream)
        guard code == Z_OK else {
            stream.deinitialize(count: 1)
            stream.deallocate()
            throw ZlibError(operation: operation, result: code)
        }
        return stream
    }

    /// Ends `stream` (`deflateEnd` or `inflateEnd`) and frees it.
    static func end(_ stream: UnsafeMutablePointer<z_stream>, with end: (z_streamp) -> Int32) {
        _ = end(stream)
        stream.deinitialize(count: 1)
        stream.deallocate()
    }
}

/// zlib refused a stream: the operation and zlib's result code (`Z_DATA_ERROR` for a damaged stream).
struct ZlibError: FerryError, CustomStringConvertible {
    /// The kinds of ``ZlibError``, by zlib's result code.
    enum Code: String, Hashable, Sendable {
        /// `Z_DATA_ERROR`: the stream or its checksum is damaged.
        case damagedStream
        /// `Z_MEM_ERROR`: zlib ran out of memory.
        case outOfMemory
        /// `Z_STREAM_ERROR`: the stream's state is inconsistent (a fault of the caller).
        case badStreamState
        /// `Z_NEED_DICT`: the stream needs a preset dictionary.
        case needsDictionary
        /// Any other result code zlib gave.
        case other
    }

    /// The zlib function that failed (`deflateInit2`, `deflate`, `inflateInit2`, `inflate`).
    let operation: String
    /// zlib's result code (`Z_DATA_ERROR`, `Z_MEM_ERROR`, …).
    let result: Int32

    var code: Code {
        switch result {
        case Z_DATA_ERROR: .damagedStream
        case Z_MEM_ERROR: .outOfMemory
        case Z_STREAM_ERROR: .badStreamState
        case Z_NEED_DICT: .needsDictionary
        default: .other
        }
    }

    var description: String {
        let name = switch result {
        case Z_DATA_ERROR: "Z_DATA_ERROR: the stream or its checksum is damaged"
        case Z_MEM_ERROR: "Z_MEM_ERROR: out of memory"
        case Z_STREAM_ERROR: "Z_STREAM_ERROR"
        case Z_NEED_DICT: "Z_NEED_DICT: the stream needs a preset dictionary"
        default: "code \(result)"
        }
        return "zlib's \(operation) failed (\(name))"
    }
}
