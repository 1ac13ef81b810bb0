// libFuzzer target: the change-set decoder (FerryStore's ChangeSetCodec).
// Built and run by ./scripts/fuzz; see docs/RELIABILITY.md.
import Foundation
import FerryModel
import FerryStore

/// The sample models, read once (the decoder checks names and types against them).
let models: [ManagedObjectModel] = FuzzModels.load(["OrgChart", "Company", "Orders"])

/// Any bytes: decoding returns or throws a typed error; whatever decodes re-encodes to a
/// canonical form that decodes to the same thing; and the canonical reader (no JSON tree)
/// takes only what the general reader decodes, to the same change set. A violation traps,
/// which libFuzzer reports.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzChangeSetDecoder(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let text = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    for model in models {
        if case .changeSet(let fast)? = ChangeSetCodec.decodeCanonical(text, model: model, versionHash: nil) {
            guard case .changeSet(let general)? = try? ChangeSetCodec.decodeTree(text, model: model, versionHash: nil), general == fast else {
                fatalError("the canonical reader and the general one disagree on: \(text)")
            }
        }
        guard case .changeSet(let changeSet)? = try? ChangeSetCodec.decode(text, model: model) else { continue }
        let canonical = ChangeSetCodec.encode(changeSet)
        guard case .changeSet(let again)? = try? ChangeSetCodec.decode(canonical, model: model),
              ChangeSetCodec.encode(again) == canonical else {
            fatalError("the canonical form of a decoded change set is not a fixed point: \(canonical)")
        }
    }
    return 0
}
