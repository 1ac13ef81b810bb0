/// Every version of a model, as an `.xcdatamodeld` bundle holds them: each `.xcdatamodel` in it,
/// and which one is current (`.xccurrentversion`). A store opened with the current version can
/// migrate from any of the others, and decode change sets made with any of them.
public struct ModelVersions: Sendable {
    /// One version: its folder name (without `.xcdatamodel`) and its model.
    public struct Version: Sendable {
        /// The version's folder name, without `.xcdatamodel` (`Model 2`).
        public var name: String
        /// The version's model.
        public var model: ManagedObjectModel
    }

    /// The versions, by folder name.
    public var versions: [Version]
    /// The name of the current version.
    public var currentName: String

    /// The current version's model.
    public var current: ManagedObjectModel {
        versions.first { $0.name == currentName }?.model ?? versions[versions.count - 1].model
    }

    /// The models of the other versions (a store made with one of them migrates to ``current``).
    public var earlier: [ManagedObjectModel] {
        versions.filter { $0.name != currentName }.map(\.model)
    }

    /// The version whose model has this version hash, if any.
    public func model(withVersionHash hash: String) -> ManagedObjectModel? {
        versions.first { $0.model.versionHash == hash }?.model
    }
}
