import Foundation
import Testing
import FerryModel
import FerryStore
@testable import FerrySync

/// The vector a pull expects after a batch, read from the lines without decoding them.
@Suite("Pull: the vector after a batch, forecast from its lines")
struct VectorForecastTests {
    static let a = UUID(uuidString: "0A000000-0000-4000-8000-000000000001")!
    static let b = UUID(uuidString: "0B000000-0000-4000-8000-000000000002")!

    /// A canonical line whose values use the keys `origin` and `seq` too (they come before the top-level ones).
    func line(origin: UUID, sequence: Int64) -> String {
        let change = ObjectChange(kind: .insert, uri: "x-coredata://\(origin.uuidString)/Thing/p\(sequence)", entity: "Thing",
                                  values: ["origin": .attribute(.string(Self.b.uuidString)), "seq": .attribute(.integer(987_654))])
        return ChangeSetCodec.encode(ChangeSet(origin: origin, sequence: sequence, timestamp: HybridTimestamp(rawValue: 5),
                                               modelHash: "hash", dependencies: [Self.b: 42], changes: [change]))
    }

    @Test("Each line raises its origin's entry to its sequence number; other entries stay")
    func forecast() throws {
        let lines = [line(origin: Self.a, sequence: 3), line(origin: Self.a, sequence: 4), line(origin: Self.b, sequence: 1)]
        #expect(lines[0].contains(#""seq":987654"#) && lines[0].contains(#""origin":""# + Self.b.uuidString), "the values use the same keys")
        #expect(VectorForecast.originAndSequence(of: lines[0]).map { [$0.0: $0.1] } == [Self.a: 3])
        let other = UUID()
        #expect(VectorForecast.vector([Self.a: 2, other: 9], takingIn: lines) == [Self.a: 4, Self.b: 1, other: 9])
        #expect(VectorForecast.vector([Self.a: 7], takingIn: lines) == [Self.a: 7, Self.b: 1], "never lowers an entry")
        #expect(VectorForecast.vector([:], takingIn: []) == [:])
    }

    @Test("A line that does not show its origin and sequence gives no forecast (the pull then asks with the store's vector)")
    func unreadable() {
        for bad in ["", "{}", #"{"origin":"not-a-uuid","seq":1}"#, #"{"origin":"\#(Self.a.uuidString)","seq":x}"#, #"{"origin":"\#(Self.a.uuidString)"}"#] {
            #expect(VectorForecast.vector([:], takingIn: [line(origin: Self.a, sequence: 1), bad]) == nil, "\(bad)")
        }
    }
}
