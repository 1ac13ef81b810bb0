import Foundation

/// Newline-delimited JSON (one change set per line) cut into lines by bytes.
///
/// `String.split(separator: "\n")` walks Characters (grapheme clusters), which
/// on a multi-megabyte pull answer cost more than applying it; lines are cut
/// at the byte 0x0A instead (it never occurs inside a UTF-8 sequence). Empty
/// lines are left out.
public enum JSONLines {
    /// The lines of `bytes`.
    public static func split(_ bytes: UnsafeRawBufferPointer) -> [String] {
        var lines: [String] = []
        guard let base = bytes.baseAddress else { return lines }
        var start = 0
        while start < bytes.count {
            let remaining = bytes.count - start
            let end: Int
            if let found = memchr(base + start, 0x0A, remaining) {
                end = base.distance(to: UnsafeRawPointer(found))
            } else {
                end = bytes.count
            }
            if end > start {
                lines.append(String(decoding: UnsafeRawBufferPointer(rebasing: bytes[start..<end]), as: UTF8.self))
            }
            start = end + 1
        }
        return lines
    }

    /// The lines of `text`: `text` itself when it holds one line and no newline (not copied: a
    /// large push body unpacked straight into its text is usually one change set).
    public static func split(_ text: String) -> [String] {
        let utf8 = text.utf8
        let oneLine = utf8.withContiguousStorageIfAvailable { !$0.contains(UInt8(ascii: "\n")) } ?? false
        if oneLine { return text.isEmpty ? [] : [text] }
        return utf8.withContiguousStorageIfAvailable { split(UnsafeRawBufferPointer($0)) } ?? split(Data(utf8))
    }

    /// The lines of `data`.
    public static func split(_ data: Data) -> [String] {
        data.withUnsafeBytes { split($0) }
    }
}
