import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A port of 127.0.0.1 that refuses every connection for as long as this value lives: a socket
/// bound to it but not listening. Unlike a port merely found free, no other test running in
/// parallel can start a server on it meanwhile, so "nothing listens there" stays true.
public final class RefusingPort: Sendable {
    /// The port.
    public let port: Int
    /// An `http://` URL of it.
    public var url: URL {
        // A literal URL of a valid port: it always parses.
        URL(string: "http://127.0.0.1:\(port)") ?? URL(fileURLWithPath: "/")
    }
    private let descriptor: Int32

    public init() throws {
        (descriptor, port) = try LoopbackSocket.bound(listening: nil)
    }

    deinit {
        close(descriptor)
    }
}
