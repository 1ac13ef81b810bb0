import FerryModel

/// Why a batch of operations (`ferry put`) or a value could not be read.
public enum InterchangeError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The text is not valid JSON.
    case malformedJSON(line: Int?, reason: String)
    /// The JSON is valid but not an operation batch.
    case malformedBatch(line: Int?, reason: String)
    /// An operation is wrong: unknown entity, key, ref or value.
    case invalidOperation(save: Int, operation: Int, reason: String)

    public var description: String {
        switch self {
        case .malformedJSON(let line, let reason):
            (line.map { "line \($0): " } ?? "") + "not valid JSON: \(reason)"
        case .malformedBatch(let line, let reason):
            (line.map { "line \($0): " } ?? "") + reason
        case .invalidOperation(let save, let operation, let reason):
            "save \(save), operation \(operation): \(reason)"
        }
    }
}

extension InterchangeError: FerryError {
    /// The kinds of ``InterchangeError``: its cases.
    public enum Code: String, Hashable, Sendable {
        /// ``InterchangeError/malformedJSON(line:reason:)``
        case malformedJSON
        /// ``InterchangeError/malformedBatch(line:reason:)``
        case malformedBatch
        /// ``InterchangeError/invalidOperation(save:operation:reason:)``
        case invalidOperation
    }

    public var code: Code {
        switch self {
        case .malformedJSON: .malformedJSON
        case .malformedBatch: .malformedBatch
        case .invalidOperation: .invalidOperation
        }
    }
}
