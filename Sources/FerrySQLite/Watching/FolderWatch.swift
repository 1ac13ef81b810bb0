import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// One inotify instance watching a folder for some kinds of events (Linux only).
///
/// The commit watcher keeps two, so that it can stop hearing writes to the log while it already
/// follows one commit, and still hear that commit's announcement (``CommitAnnouncer``).
struct FolderWatch: Sendable {
    /// The inotify descriptor, non-blocking: poll it for `POLLIN`.
    let descriptor: Int32

    /// Writes to a file of the folder, and files created in it or moved into it.
    static var writesAndNewFiles: UInt32 {
        #if os(Linux)
        UInt32(IN_MODIFY) | UInt32(IN_CREATE) | UInt32(IN_MOVED_TO)
        #else
        0
        #endif
    }

    /// Changes of a file's times (what ``CommitAnnouncer`` makes) or other metadata.
    static var metadataChanges: UInt32 {
        #if os(Linux)
        UInt32(IN_ATTRIB)
        #else
        0
        #endif
    }

    /// A watch on `folder` for the events of `mask`; nil where inotify cannot be used.
    init?(folder: String, mask: UInt32) {
        #if os(Linux)
        let descriptor = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard descriptor >= 0 else { return nil }
        guard inotify_add_watch(descriptor, folder, mask) >= 0 else {
            Glibc.close(descriptor)
            return nil
        }
        self.descriptor = descriptor
        #else
        return nil
        #endif
    }

    func close() {
        #if os(Linux)
        Glibc.close(descriptor)
        #endif
    }

    /// Reads every pending event into `buffer` (the caller's, reused at every wake-up); true when
    /// one of them names the file `name` (or the kernel's queue overflowed, so that events may
    /// have been lost).
    func drain(mentioning name: [UInt8], buffer: inout [UInt8]) -> Bool {
        #if os(Linux)
        var mentioned = false
        while true {
            let count = read(descriptor, &buffer, buffer.count)
            guard count > 0 else { return mentioned }
            if Self.mentions(name, in: buffer, count: count) { mentioned = true }
        }
        #else
        return true
        #endif
    }

    /// Whether the inotify events in `buffer` name the file `name` or say events were lost.
    private static func mentions(_ name: [UInt8], in buffer: [UInt8], count: Int) -> Bool {
        #if os(Linux)
        let header = MemoryLayout<inotify_event>.size
        // (wd, mask, cookie, len: the name's length comes after three 32-bit fields.)
        let maskOffset = MemoryLayout<inotify_event>.offset(of: \.mask) ?? 4
        let lengthOffset = MemoryLayout<inotify_event>.offset(of: \.len) ?? 12
        var offset = 0
        while offset + header <= count {
            let (mask, length) = buffer.withUnsafeBytes { bytes in
                (bytes.loadUnaligned(fromByteOffset: offset + maskOffset, as: UInt32.self),
                 Int(bytes.loadUnaligned(fromByteOffset: offset + lengthOffset, as: UInt32.self)))
            }
            if mask & UInt32(IN_Q_OVERFLOW) != 0 { return true }
            let nameStart = offset + header
            let nameEnd = min(count, nameStart + length)
            if length > 0, buffer[nameStart..<nameEnd].prefix(while: { $0 != 0 }).elementsEqual(name) { return true }
            offset = nameStart + length
        }
        return false
        #else
        return true
        #endif
    }
}
