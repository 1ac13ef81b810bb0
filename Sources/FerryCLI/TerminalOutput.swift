import Foundation
import FerryStore

/// Standard output written in 64 KB blocks (one `write` per block, not per line): what a
/// command printing a line per object needs to keep up with the store.
struct BufferedOutput {
    private var buffer: [UInt8] = []
    private static let blockSize = 1 << 16

    init() { buffer.reserveCapacity(Self.blockSize + 4096) }

    /// Appends `line` and a newline; writes the block when it is full.
    mutating func line(_ line: String) {
        buffer.append(contentsOf: line.utf8)
        buffer.append(0x0A)
        if buffer.count >= Self.blockSize { flush() }
    }

    /// Appends a page's `line` and a newline; a large one a piece at a time, never held whole.
    /// - Throws: ``FerryStore/LinePiecesError`` when its pieces are not its length in bytes (the
    ///   store's stored form is damaged); what was written of it stays written.
    mutating func line(_ line: ChangeSetPage.Line) throws {
        if let text = line.text { return self.line(text) }
        var pieces = line.pieces()
        var written = 0
        while let piece = try pieces.next(maximumBytes: Self.blockSize) {
            written += piece.count
            buffer.append(contentsOf: piece)
            if buffer.count >= Self.blockSize { flush() }
        }
        guard written == line.byteCount else {
            throw LinePiecesError(detail: "\(written) bytes where \(line.byteCount) were stored")
        }
        buffer.append(0x0A)
        if buffer.count >= Self.blockSize { flush() }
    }

    /// Appends `text` as it is (no newline).
    mutating func append(_ text: String) {
        buffer.append(contentsOf: text.utf8)
        if buffer.count >= Self.blockSize { flush() }
    }

    /// Appends `text` as a JSON string (quoted, escaped where it must be).
    mutating func appendQuoted(_ text: String) {
        if text.utf8.contains(where: { $0 < 0x20 || $0 == 0x22 || $0 == 0x5C }) {
            var quoted = ""
            JSONValue.appendQuoted(text, to: &quoted)
            buffer.append(contentsOf: quoted.utf8)
        } else {
            buffer.append(0x22)
            buffer.append(contentsOf: text.utf8)
            buffer.append(0x22)
        }
        if buffer.count >= Self.blockSize { flush() }
    }

    /// Appends an object's URI as a JSON string (a URI needs no escapes).
    mutating func appendQuoted(_ objectID: ObjectID) {
        buffer.append(0x22)
        objectID.appendURI(to: &buffer)
        buffer.append(0x22)
        if buffer.count >= Self.blockSize { flush() }
    }

    /// Appends one byte (punctuation).
    mutating func append(byte: UInt8) {
        buffer.append(byte)
    }

    /// Writes what is buffered.
    mutating func flush() {
        guard !buffer.isEmpty else { return }
        FileHandle.standardOutput.write(Data(buffer))
        buffer.removeAll(keepingCapacity: true)
    }
}

/// Progress of a long run on standard error, when it is a terminal (never into a pipe or a log):
/// one line rewritten in place, cleared at the end.
struct TerminalProgress: Sendable {
    let label: String
    let isShown = isatty(FileHandle.standardError.fileDescriptor) != 0

    func update(_ count: Int, of total: Int? = nil) {
        guard isShown else { return }
        let text = total.map { "\(label): \(count) of \($0)" } ?? "\(label): \(count)"
        FileHandle.standardError.write(Data("\r\(text)\u{1B}[K".utf8))
    }

    /// Shows `text` after the label.
    func show(_ text: String) {
        guard isShown else { return }
        FileHandle.standardError.write(Data("\r\(label): \(text)\u{1B}[K".utf8))
    }

    func finish() {
        guard isShown else { return }
        FileHandle.standardError.write(Data("\r\u{1B}[K".utf8))
    }
}
