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
package enum LineDecoding {
    /// Below this many bytes a batch is decoded on the calling thread (a thread hop costs more).
    package static let parallelThreshold = 1 << 20

    /// The decoded non-empty lines, in order, each with its text.
    /// - Throws: ``ReplayError/malformed(line:_:)`` for the first bad line (numbered from 1).
    package static func decode(_ lines: [String], model: ManagedObjectModel,
                       parallelThreshold: Int = parallelThreshold) throws(ReplayError) -> [(decoded: ChangeSetCodec.Decoded, line: String)] {
        let bytes = lines.reduce(0) { $0 + $1.utf8.count }
        guard lines.count > 1, bytes >= parallelThreshold else { return try decode(lines, range: lines.indices, model: model).get() }
        // Two halves of about equal bytes.
        var half = 0
        var seen = 0
        while half < lines.count - 1, seen + lines[half].utf8.count <= bytes / 2 {
            seen += lines[half].utf8.count
            half += 1
        }
        let ranges = [0..<max(half, 1), max(half, 1)..<lines.count]
        let outcomes = Mutex<[Int: Result<[(decoded: ChangeSetCodec.Decoded, line: String)], ReplayError>]>([:])
        DispatchQueue.concurrentPerform(iterations: ranges.count) { part in
            let outcome = decode(lines, range: ranges[part], model: model)
            outcomes.withLock { $0[part] = outcome }
        }
        let finished = outcomes.withLock { $0 }
        var result: [(decoded: ChangeSetCodec.Decoded, line: String)] = []
        result.reserveCapacity(lines.count)
        for part in ranges.indices {
            // The first half's error comes first: it is the earlier line.
            guard let outcome = finished[part] else { continue }
            result += try outcome.get()
        }
        return result
    }

    private static func decode(_ lines: [String], range: Range<Int>, model: ManagedObjectModel)
        -> Result<[(decoded: ChangeSetCodec.Decoded, line: String)], ReplayError> {
        var result: [(decoded: ChangeSetCodec.Decoded, line: String)] = []
        result.reserveCapacity(range.count)
        for index in range where !lines[index].allSatisfy(\.isWhitespace) {
            do {
                result.append((try ChangeSetCodec.decode(lines[index], model: model), lines[index]))
            } catch {
                return .failure(.malformed(line: index + 1, error))
            }
        }
        return .success(result)
    }
}
