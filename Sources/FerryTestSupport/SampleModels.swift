import Foundation
import FerryModel
import FerryStore
import FerrySQLite

/// Paths to the repository's sample models and real model files, found from
/// this file's location so tests work from any working directory.
public enum SampleModels {
    /// The repository's root folder.
    public static let repositoryRoot: String = {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path
    }()

    /// `config/models/NAME.xcdatamodeld`.
    public static func path(_ name: String) -> String {
        "\(repositoryRoot)/config/models/\(name).xcdatamodeld"
    }

    /// Real model files from public projects, copied verbatim with their licences
    /// (`Tests/Fixtures/models`, whose INDEX.md names each file's source).
    public static let realModelsDirectory: String = "\(repositoryRoot)/Tests/Fixtures/models"

    /// Loads a sample model (OrgChart, Orders, Company).
    public static func load(_ name: String) throws -> ManagedObjectModel {
        try XcodeModelReader.read(at: path(name))
    }
}

/// Where a test container keeps its objects.
public enum TestStoreKind: String, Sendable, CaseIterable, CustomStringConvertible {
    case memory, sqlite
    public var description: String { rawValue }
}

/// A container on a fresh store, and the folder that holds its file.
public struct TestContainer {
    /// The container.
    public let container: PersistentContainer
    /// The folder (kept alive as long as this value).
    public let directory: TemporaryDirectory
    /// The SQLite file, for `.sqlite` stores.
    public let storePath: String?

    /// A new context.
    public func context() -> ManagedObjectContext { container.newContext() }

    /// Creates a container for `model` on a new store of `kind`.
    public init(model: ManagedObjectModel, kind: TestStoreKind, classes: [String: ManagedObject.Type] = [:],
                validators: [EntityValidator] = []) throws {
        directory = TemporaryDirectory()
        let store: any PersistentStore
        switch kind {
        case .memory:
            store = InMemoryStore(model: model)
            storePath = nil
        case .sqlite:
            let path = directory.file("store.sqlite")
            store = try SQLiteStore(path: path, model: model)
            storePath = path
        }
        container = try PersistentContainer(store: store, classes: classes, validators: validators)
    }
}
