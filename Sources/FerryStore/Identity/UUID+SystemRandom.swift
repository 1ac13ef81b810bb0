import Foundation

extension UUID {
    /// A random UUID (version 4, RFC 9562) from the system's random number generator.
    ///
    /// Foundation's `UUID()` on Linux opens, reads and closes `/dev/urandom` for each UUID: 40 µs
    /// when the process has just woken, against 6 µs for this one `getrandom` call, on the VM of
    /// docs/PERFORMANCE.md. A replayed change set makes one for its
    /// temporary IDs, on the path from a peer's save to this store's commit.
    package static func systemRandom() -> UUID {
        var generator = SystemRandomNumberGenerator()
        var bytes: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        withUnsafeMutableBytes(of: &bytes) { raw in
            raw.storeBytes(of: generator.next() as UInt64, toByteOffset: 0, as: UInt64.self)
            raw.storeBytes(of: generator.next() as UInt64, toByteOffset: 8, as: UInt64.self)
            raw[6] = raw[6] & 0x0F | 0x40  // version 4: random
            raw[8] = raw[8] & 0x3F | 0x80  // the RFC's variant
        }
        return UUID(uuid: bytes)
    }
}
