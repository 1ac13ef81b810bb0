import Foundation
import Synchronization
import FerryModel
import FerryStore

/// Checks and decodes a batch of change-set lines before any is applied.
///
/// Decoding is a quarter of a replay's work and needs nothing but the model,
/// so a large batch is cut in two halves decoded on two threads (this machine
/// class has two cores; the store's writes that follow are one thread's work
/// anyway). The outcome is the same as decoding line by line: the lines in
/// order, and for a bad batch the error of its first bad line.
///
/// The second half runs on a thread of its own, not on Dispatch's or Swift
/// concurrency's shared pool: the caller (a replay, synchronous on an actor)
/// already holds one of that pool's threads, and on a two-core machine taking
/// the other one too left nothing for the daemon's other tasks — its systemd
/// watchdog pings stopped for as long as a large batch took to decode.
package enum LineDecoding {
    /// Below this many bytes a batch is decoded on the calling thread (a thread hop costs more).
    package static let parallelThreshold = 1 << 20

    /// The decoded non-empty lines, in order, each with its text. `versionHash` is the
    /// model's (a store has it at hand; otherwise it is worked out here, once).
    /// - Throws: ``ReplayError/malformed(line:_:)`` for the first bad line (numbered from 1).
    package static func decode(_ lines: [String], model: ManagedObjectModel, versionHash: String? = nil,
                       verifier: ChangeSetVerifier = .acceptingAll,
                       parallelThreshold: Int = parallelThreshold) throws(ReplayError) -> [(decoded: ChangeSetCodec.Decoded, line: String)] {
        let versionHash = versionHash ?? model.versionHash
        let bytes = lines.reduce(0) { $0 + $1.utf8.count }
        guard lines.count > 1, bytes >= parallelThreshold else {
            return try decode(lines, range: lines.indices, model: model, versionHash: versionHash, verifier: verifier).get()
        }
        // Two halves of about equal bytes.
        var half = 0
        var seen = 0
        while half < lines.count - 1, seen + lines[half].utf8.count <= bytes / 2 {
            seen += lines[half].utf8.count
            half += 1
        }
        let split = max(half, 1)
        let secondHalf = DedicatedThreads.spawn(named: "ferry-decode") {
            decode(lines, range: split..<lines.count, model: model, versionHash: versionHash, verifier: verifier)
        }
        let firstHalf = decode(lines, range: 0..<split, model: model, versionHash: versionHash, verifier: verifier)
        let second = secondHalf.join()
        // The first half's error comes first: it is the earlier line.
        var result = try firstHalf.get()
        result += try second.get()
        return result
    }

    /// Below this many bytes ``decodeOffPool(_:model:versionHash:)`` decodes on the calling
    /// task (well under a millisecond's work: a thread would cost more than it saves).
    package static let offPoolThreshold = 64 << 10

    /// ``decode(_:model:versionHash:parallelThreshold:)`` on a thread of its own, so that the
    /// awaiting task holds no thread of the shared pool meanwhile (a pull decodes its next
    /// batch so while the store applies this one on the other). Small batches, and the
    /// empty answers of an idle peer, are decoded at once.
    package static func decodeOffPool(_ lines: [String], model: ManagedObjectModel, versionHash: String,
                                      verifier: ChangeSetVerifier = .acceptingAll)
        async throws(ReplayError) -> [(decoded: ChangeSetCodec.Decoded, line: String)] {
        guard lines.reduce(0, { $0 + $1.utf8.count }) >= offPoolThreshold else {
            return try decode(lines, model: model, versionHash: versionHash, verifier: verifier)
        }
        let outcome = await DedicatedThreads.run(named: "ferry-check") {
            Result { () throws(ReplayError) in try decode(lines, model: model, versionHash: versionHash, verifier: verifier) }
        }
        return try outcome.get()
    }

    /// An object's URI names the store it was inserted in: an insert under another store's
    /// namespace (a forged change set taking over the receiver's rows, or a third store's
    /// objects) is refused before anything of its batch applies.
    static func checkInsertsNameTheirOrigin(_ changeSet: ChangeSet) throws(ChangeSetError) {
        for (number, change) in changeSet.changes.enumerated() where change.kind == .insert {
            guard case .success(let parts) = ObjectURIComponents.parse(change.uri), parts.store == changeSet.origin else {
                throw .badURI(place: "change \(number + 1)",
                              message: "an insert must name an object of its change set's origin \(changeSet.origin.uuidString); "
                                  + "\(change.uri.prefix(120)) does not")
            }
        }
    }

    private static func decode(_ lines: [String], range: Range<Int>, model: ManagedObjectModel, versionHash: String,
                               verifier: ChangeSetVerifier) -> Result<[(decoded: ChangeSetCodec.Decoded, line: String)], ReplayError> {
        var result: [(decoded: ChangeSetCodec.Decoded, line: String)] = []
        result.reserveCapacity(range.count)
        let verifies = !verifier.checksNothing
        for index in range where !lines[index].allSatisfy(\.isWhitespace) {
            let decoded: ChangeSetCodec.Decoded
            do {
                decoded = try ChangeSetCodec.decode(lines[index], model: model, versionHash: versionHash)
                if case .changeSet(let changeSet) = decoded { try checkInsertsNameTheirOrigin(changeSet) }
            } catch {
                return .failure(.malformed(line: index + 1, error))
            }
            if verifies, let refusal = verify(lines[index], decoded, with: verifier) {
                return .failure(.untrusted(line: index + 1, refusal))
            }
            result.append((decoded, lines[index]))
        }
        return .success(result)
    }

    /// Whether `verifier` refuses `line` (decoded as `decoded`), and why.
    static func verify(_ line: String, _ decoded: ChangeSetCodec.Decoded, with verifier: ChangeSetVerifier) -> TrustRefusal? {
        switch decoded {
        case .changeSet(let changeSet):
            verifier.check(line, origin: changeSet.origin, sequence: changeSet.sequence, timestamp: changeSet.timestamp)
        case .otherModel(let origin, let sequence, _, let timestamp):
            verifier.check(line, origin: origin, sequence: sequence, timestamp: timestamp)
        }
    }
}
