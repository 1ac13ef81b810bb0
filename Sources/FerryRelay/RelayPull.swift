import Foundation
import NIOCore
import FerryStore

/// Puts a page of stored change sets in an order that applies as is, for a caller holding `vector`:
/// a change set goes out only after its origin's previous one (held by the caller, or earlier in the
/// answer) and after every change set its `deps` name. Those whose turn does not come within the
/// page wait for a later answer; the caller asks again with its new vector.
enum RelayPull {
    /// `candidates` (in arrival order) that apply in this order after `vector`, cut after `maxBytes`
    /// (at least one, however large).
    static func causalOrder(_ candidates: [RelayDatabase.StoredChangeSet], after vector: VersionVector,
                            maxBytes: Int) -> [RelayDatabase.StoredChangeSet] {
        var covered = vector
        var pending = candidates[...]
        var answer: [RelayDatabase.StoredChangeSet] = []
        var bytes = 0
        // Arrival order is causal for almost every page, so one pass usually takes all; a change set that
        // arrived before what it depends on is taken in a later pass, once that one is.
        while !pending.isEmpty {
            var left: [RelayDatabase.StoredChangeSet] = []
            var progressed = false
            for changeSet in pending {
                let ready = covered[changeSet.origin, default: 0] == changeSet.sequence - 1
                    && changeSet.dependencies.allSatisfy { covered[$0.key, default: 0] >= $0.value }
                guard ready else {
                    left.append(changeSet)
                    continue
                }
                if !answer.isEmpty, bytes + changeSet.byteCount > maxBytes { return answer }
                answer.append(changeSet)
                bytes += changeSet.byteCount + 1
                covered[changeSet.origin] = changeSet.sequence
                progressed = true
            }
            guard progressed else { break }
            pending = left[...]
        }
        return answer
    }
}
