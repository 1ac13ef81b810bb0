import Foundation
import Testing
import FerryModel
import FerryStore
import FerrySQLite
@testable import FerrySync
import FerryTestSupport

/// Decoding a batch on two threads gives what decoding it line by line gives.
@Suite("Replay: a batch's lines decoded on two threads")
struct LineDecodingTests {
    static let model = try! SampleModels.load("OrgChart")

    /// Lines of `count` change sets of three people each.
    static func lines(_ count: Int) throws -> [String] {
        let origin = try Replica(model: model)
        for set in 0..<count {
            for person in 0..<3 { try origin.context.make("Person", ["id": Int64(set * 3 + person), "name": "P\(set)-\(person)"]) }
            try origin.context.save()
        }
        return try origin.store.changeSetLines()
    }

    @Test("Same change sets in the same order, empty lines left out, whichever way it is cut")
    func sameOutcome() throws {
        var lines = try Self.lines(9)
        lines.insert("", at: 4)
        lines.insert("  ", at: 0)
        let serial = try LineDecoding.decode(lines, model: Self.model, parallelThreshold: .max)
        #expect(serial.count == 9)
        for threshold in [0, 1, lines[1].utf8.count * 3] {
            let parallel = try LineDecoding.decode(lines, model: Self.model, parallelThreshold: threshold)
            #expect(parallel.map(\.line) == serial.map(\.line))
            #expect(parallel.compactMap { if case .changeSet(let set) = $0.decoded { set } else { nil } }
                    == serial.compactMap { if case .changeSet(let set) = $0.decoded { set } else { nil } })
        }
    }

    @Test("A bad line is reported by its number from 1, the first one when both halves have one")
    func firstBadLine() throws {
        let good = try Self.lines(8)
        for bad in [[2], [7], [1, 6], [6, 8]] {
            var lines = good
            for index in bad { lines[index - 1] = #"{"format":1,"origin":"nope"}"# }
            for threshold in [0, Int.max] {
                let error = #expect(throws: ReplayError.self) { try LineDecoding.decode(lines, model: Self.model, parallelThreshold: threshold) }
                guard case .malformed(let line, _)? = error else { Issue.record("\(String(describing: error))"); continue }
                #expect(line == bad[0], "bad lines \(bad), threshold \(threshold)")
            }
        }
    }

    @Test("Off the shared pool (what a pull does with its next batch): the same outcome, and the same first bad line")
    func offPool() async throws {
        // Enough change sets to pass the threshold, so the batch goes to a thread of its own.
        var lines = try Self.lines(1)
        let copies = LineDecoding.offPoolThreshold / lines[0].utf8.count + 1
        lines = (0..<copies).map { index in lines[0].replacingOccurrences(of: "\"seq\":1", with: "\"seq\":\(index + 1)") }
        #expect(lines.reduce(0) { $0 + $1.utf8.count } >= LineDecoding.offPoolThreshold)
        let versionHash = Self.model.versionHash
        let serial = try LineDecoding.decode(lines, model: Self.model, parallelThreshold: .max)
        let offPool = try await LineDecoding.decodeOffPool(lines, model: Self.model, versionHash: versionHash)
        #expect(offPool.map(\.line) == serial.map(\.line))
        #expect(offPool.compactMap { if case .changeSet(let set) = $0.decoded { set } else { nil } }
                == serial.compactMap { if case .changeSet(let set) = $0.decoded { set } else { nil } })
        lines[copies / 2] = #"{"format":1,"origin":"nope"}"#
        do {
            _ = try await LineDecoding.decodeOffPool(lines, model: Self.model, versionHash: versionHash)
            Issue.record("a bad line was accepted")
        } catch {
            guard case .malformed(let line, _) = error else { Issue.record("\(error)"); return }
            #expect(line == copies / 2 + 1)
        }
        // Small batches (an idle peer's empty answer too) are decoded at once, with the same outcome.
        #expect(try await LineDecoding.decodeOffPool([], model: Self.model, versionHash: versionHash).isEmpty)
        #expect(try await LineDecoding.decodeOffPool(Array(serial.prefix(2).map(\.line)), model: Self.model, versionHash: versionHash).count == 2)
    }
}
