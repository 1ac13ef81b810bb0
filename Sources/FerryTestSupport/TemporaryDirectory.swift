import Foundation

/// A fresh folder under the system's temporary directory, removed when the
/// value is deallocated. Each test gets its own, so tests can run in parallel.
public final class TemporaryDirectory: Sendable {
    /// The folder's path.
    public let path: String

    /// Creates the folder.
    public init(prefix: String = "ferry-test") {
        let base = FileManager.default.temporaryDirectory.path
        let path = "\(base)/\(prefix)-\(UUID().uuidString.prefix(8))"
        // Creating a folder under the temporary directory only fails if the disk is unusable;
        // the first store operation will then report the problem with the path.
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        self.path = path
    }

    /// A path inside the folder.
    public func file(_ name: String) -> String { "\(path)/\(name)" }

    deinit {
        try? FileManager.default.removeItem(atPath: path)
    }
}
