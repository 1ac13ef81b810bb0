import Foundation

/// The head of an HTTP message at the start of a chunk: where its header block ends (through the
/// blank line) and the body length its Content-Length header announces, if any.
struct HTTPHead {
    let end: Int
    let contentLength: Int?

    /// Nil when the chunk does not hold a whole header block.
    init?(in chunk: ArraySlice<UInt8>) {
        let bytes = Array(chunk)
        guard bytes.count >= 4,
              let index = (0...(bytes.count - 4)).first(where: { bytes[$0] == 13 && bytes[$0 + 1] == 10 && bytes[$0 + 2] == 13 && bytes[$0 + 3] == 10 })
        else { return nil }
        end = index + 4
        let head = String(decoding: bytes[0..<index], as: UTF8.self)
        contentLength = head.split(separator: "\r\n").lazy.compactMap { line -> Int? in
            let parts = line.split(separator: ":", maxSplits: 1)
            guard parts.count == 2, parts[0].lowercased() == "content-length" else { return nil }
            return Int(parts[1].trimmingCharacters(in: .whitespaces))
        }.first
    }
}
