import Foundation
import FerryModel
import FerryStore

/// Reads change sets made with an earlier version of a store's model in the store's version
/// (``ChangeSetTranslation``): a fleet upgrading one replica at a time keeps applying what the
/// replicas not yet upgraded send, instead of holding it for good.
struct VersionTranslator: Sendable {
    private let mappings: [String: ModelVersionMapping]

    /// For `store`'s model and the earlier versions it knows.
    init(store: any ReplicaStore) {
        var mappings: [String: ModelVersionMapping] = [:]
        for model in store.earlierModels where model.versionHash != store.modelVersionHash {
            mappings[model.versionHash] = ModelVersionMapping(from: model, to: store.model)
        }
        self.mappings = mappings
    }

    /// What became of a line made with the model version `hash`.
    enum Outcome {
        /// Read and translated.
        case translated(ChangeSet)
        /// A version the store knows, but the change set cannot be read in the store's (why).
        case refused(String)
        /// A version the store does not know (a later one, or a stranger): it waits.
        case unknownVersion
    }

    /// `line` (made with the model version `hash`) read in the store's version.
    func translate(_ line: String, madeWith hash: String) -> Outcome {
        guard let mapping = mappings[hash] else { return .unknownVersion }
        do {
            guard case .changeSet(let changeSet) = try ChangeSetCodec.decode(line, model: mapping.source, versionHash: hash) else {
                return .unknownVersion
            }
            return .translated(try ChangeSetTranslation.translate(changeSet, by: mapping))
        } catch let refusal as ChangeSetTranslation.Refusal {
            return .refused(refusal.description)
        } catch {
            return .refused("it does not decode with its own model version: \(error)")
        }
    }
}
