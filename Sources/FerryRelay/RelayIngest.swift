import Foundation
import NIOPosix
import FerryModel
import FerryStore
import FerrySync

/// Checks pushed lines as a relay can without a model: each must be a change set (``ChangeSetEnvelope``:
/// format, origin, sequence number, clock, model hash, dependencies), signed by its origin as the relay's
/// trust says (``ChangeSetVerifier``). One bad line refuses the whole push: nothing is stored.
enum RelayIngest {
    /// Why a push was refused.
    enum Refusal: FerryError, Sendable {
        /// Line `line` (from 1) is not a change set.
        case malformed(line: Int, ChangeSetError)
        /// Line `line` does not prove its origin.
        case untrusted(line: Int, TrustRefusal)

        /// The kinds of ``Refusal``: its cases.
        enum Code: String, Hashable, Sendable {
            /// ``Refusal/malformed(line:_:)``: a line is not a change set.
            case malformed
            /// ``Refusal/untrusted(line:_:)``: a line does not prove its origin.
            case untrusted
        }

        var message: String {
            switch self {
            case .malformed(let line, let error): "line \(line): \(error); nothing was stored"
            case .untrusted(let line, let refusal): "line \(line): \(refusal); nothing was stored"
            }
        }

        var description: String { message }

        var code: Code {
            switch self {
            case .malformed: .malformed
            case .untrusted: .untrusted
            }
        }

        /// The change set's decoding error, or the trust check's refusal.
        var cause: (any Error)? {
            switch self {
            case .malformed(_, let error): error
            case .untrusted(_, let refusal): refusal
            }
        }
    }

    /// Pushes of more bytes than this are checked on the I/O thread pool, not on the event loop.
    static let inlineBytes = 64 << 10

    /// The envelopes of `lines`, each checked against `verifier`.
    static func check(_ lines: [String], verifier: ChangeSetVerifier) async throws(Refusal) -> [(envelope: ChangeSetEnvelope, line: String)] {
        let bytes = lines.reduce(0) { $0 + $1.utf8.count }
        let outcome: Result<[(envelope: ChangeSetEnvelope, line: String)], Refusal>
        if bytes <= inlineBytes {
            outcome = checkNow(lines, verifier: verifier)
        } else {
            do {
                outcome = try await NIOThreadPool.singleton.runIfActive { checkNow(lines, verifier: verifier) }
            } catch {
                outcome = checkNow(lines, verifier: verifier)
            }
        }
        return try outcome.get()
    }

    private static func checkNow(_ lines: [String], verifier: ChangeSetVerifier) -> Result<[(envelope: ChangeSetEnvelope, line: String)], Refusal> {
        var entries: [(envelope: ChangeSetEnvelope, line: String)] = []
        entries.reserveCapacity(lines.count)
        for (index, line) in lines.enumerated() {
            let envelope: ChangeSetEnvelope
            do {
                envelope = try ChangeSetEnvelope(line: line)
            } catch {
                return .failure(.malformed(line: index + 1, error))
            }
            if let refusal = verifier.check(line, origin: envelope.origin, sequence: envelope.sequence, timestamp: envelope.timestamp) {
                return .failure(.untrusted(line: index + 1, refusal))
            }
            entries.append((envelope, line))
        }
        return .success(entries)
    }
}
