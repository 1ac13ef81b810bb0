// libFuzzer target: the predicate format parser and binder (FerryStore's FetchPredicate).
// Built and run by ./scripts/fuzz; see docs/RELIABILITY.md.
import Foundation
import FerryModel
import FerryStore

let orgChart: ManagedObjectModel = FuzzModels.load(["OrgChart"])[0]

/// Any bytes as a predicate on Person: it binds or throws an error whose position lies inside it.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzPredicateParser(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let format = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    do {
        _ = try FetchPredicate(format: format, entity: "Person", model: orgChart)
    } catch {
        if error.position < 0 || error.position > format.count {
            fatalError("error position \(error.position) outside a predicate of \(format.count) characters")
        }
    }
    return 0
}
