import FerryModel
/// One page of a store's history (``ReplicaStore/changeSetPage(after:cursor:limit:)``).
public struct ChangeSetPage: Sendable {
    /// The change sets, as canonical JSON lines.
    public var lines: [Line]
    /// Where the next page starts.
    public var cursor: Int64

    public init(lines: [Line], cursor: Int64) {
        self.lines = lines
        self.cursor = cursor
    }

    /// The page's lines whole (a large one is put together from its pieces).
    /// - Throws: what a large line's pieces throw (its stored form is damaged).
    public func texts() throws -> [String] {
        try lines.map { try $0.wholeText() }
    }
}

extension ChangeSetPage {
    /// One change set of a page, as its canonical JSON line: held whole, or, for a large one, kept
    /// as the store holds it (compressed, some 15–20 times smaller) and made a piece at a time as
    /// it is read. A server that sends a large change set to many slow peers at once then holds the
    /// stored form and one piece for each, not a copy of the whole line (docs/RELIABILITY.md).
    public struct Line: Sendable {
        /// The line's length in bytes (UTF-8), without a newline.
        public let byteCount: Int
        private let source: Source

        private enum Source: Sendable {
            case text(String)
            case pieces(@Sendable () -> any LinePieces)
        }

        /// A line held whole.
        public init(_ text: String) {
            byteCount = text.utf8.count
            source = .text(text)
        }

        /// A line of `byteCount` bytes made in pieces: `makePieces` starts a new reading from its
        /// first byte each time it is called. For stores, which know how they keep a large line.
        public init(byteCount: Int, pieces makePieces: @escaping @Sendable () -> any LinePieces) {
            self.byteCount = byteCount
            source = .pieces(makePieces)
        }

        /// The line, when the page holds it whole; nil for a large one, read with ``pieces()``.
        public var text: String? {
            if case .text(let text) = source { return text }
            return nil
        }

        /// The line whole: ``text``, or a large line put together from its pieces.
        /// - Throws: ``LinePiecesError`` when the pieces are not the line's ``byteCount`` bytes of
        ///   UTF-8, or what the pieces throw (the stored form is damaged).
        public func wholeText() throws -> String {
            if let text { return text }
            var bytes: [UInt8] = []
            bytes.reserveCapacity(byteCount)
            var reading = pieces()
            while let piece = try reading.next(maximumBytes: 1 << 20) { bytes.append(contentsOf: piece) }
            guard bytes.count == byteCount else { throw LinePiecesError(detail: "\(bytes.count) bytes where \(byteCount) were stored") }
            guard let text = String(validating: bytes, as: UTF8.self) else { throw LinePiecesError(detail: "not UTF-8 text") }
            return text
        }

        /// A reading of the line's bytes from its first, a piece at a time.
        public func pieces() -> any LinePieces {
            switch source {
            case .text(let text): return TextPieces(text: text)
            case .pieces(let makePieces): return makePieces()
            }
        }
    }
}

/// The bytes of a ``ChangeSetPage/Line``, from its first, a piece at a time.
public protocol LinePieces {
    /// The next bytes of the line, at most `maximumBytes` (more than zero) of them; nil once every
    /// byte was given.
    /// - Throws: when the line cannot be read on (its stored form is damaged); no piece follows.
    mutating func next(maximumBytes: Int) throws -> [UInt8]?
}

/// A large line's pieces did not make the line the store recorded: its stored form is damaged.
public struct LinePiecesError: FerryError {
    /// A line's pieces fail one way; what was wrong is in ``detail`` and ``cause``.
    public enum Code: String, Hashable, Sendable {
        /// The stored form of a line is damaged.
        case damagedLine
    }

    /// What was wrong.
    public let detail: String
    /// The error met reading the stored form (zlib's), when there was one.
    public let cause: (any Error)?
    public var code: Code { .damagedLine }

    public init(detail: String, cause: (any Error)? = nil) {
        self.detail = detail
        self.cause = cause
    }

    public var description: String {
        "a change set's stored body could not be read: \(detail); the store file is damaged: restore it from a backup or a peer"
    }
}

/// The pieces of a line held whole.
private struct TextPieces: LinePieces {
    let text: String
    var offset = 0

    mutating func next(maximumBytes: Int) throws -> [UInt8]? {
        let utf8 = text.utf8
        guard offset < utf8.count else { return nil }
        let start = utf8.index(utf8.startIndex, offsetBy: offset)
        let end = utf8.index(start, offsetBy: min(max(maximumBytes, 1), utf8.count - offset))
        offset += utf8.distance(from: start, to: end)
        return Array(utf8[start..<end])
    }
}
