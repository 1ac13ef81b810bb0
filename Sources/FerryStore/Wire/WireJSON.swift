import Foundation
import FerryModel

/// How Ferry's control messages (state, apply report, sync answer, status) are
/// written and read: JSON with sorted keys, dates as ISO 8601 text, version
/// vectors as `{"STORE-UUID": SEQ, …}`. One coder for the server, the client
/// and the command line, so the three cannot drift apart.
///
/// (Change sets have a codec of their own, ``ChangeSetCodec``: canonical bytes,
/// measured and fuzzed.)
public enum WireJSON {
    /// `value` as compact JSON text with sorted keys.
    public static func encode<Value: Encodable>(_ value: Value) -> String {
        do {
            return String(decoding: try encoder.encode(value), as: UTF8.self)
        } catch {
            // Only a value that cannot be JSON (a non-finite number) fails; no wire type holds one.
            preconditionFailure("\(Value.self) could not be written as JSON: \(error)")
        }
    }

    /// A `Value` read from `data`.
    /// - Throws: ``WireError`` naming the type and what did not fit.
    public static func decode<Value: Decodable>(_ type: Value.Type, from data: Data) throws(WireError) -> Value {
        do {
            return try decoder.decode(type, from: data)
        } catch {
            throw WireError(cause: error, expected: "\(type)", detail: "\(error)", excerpt: String(decoding: data.prefix(200), as: UTF8.self))
        }
    }

    private static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .iso8601
        return encoder
    }()

    private static let decoder: JSONDecoder = {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        return decoder
    }()
}

/// A control message that did not read as the type it should be.
public struct WireError: FerryError, Sendable {
    /// A message fails to read one way; what did not fit is in ``detail`` and ``cause``.
    public enum Code: String, Hashable, Sendable {
        /// The message is not the JSON of the type expected.
        case unexpectedMessage
    }

    public var code: Code { .unexpectedMessage }
    /// The decoder's error.
    public var cause: (any Error)? = nil
    /// The type that was expected.
    public let expected: String
    /// What did not fit (the decoder's words).
    public let detail: String
    /// The start of the text, for a person to look at.
    public let excerpt: String

    public var description: String {
        "expected a \(expected) message (\(detail)); the answer began: \(excerpt)"
    }
}

/// Version vectors in control messages: a JSON object from store UUID to sequence number,
/// checked as ``ChangeSetCodec/vector(_:)`` checks the vectors of change sets and pulls.
public struct WireVector: Codable, Sendable, Hashable {
    /// The vector.
    public var vector: VersionVector

    /// Wraps `vector`.
    public init(_ vector: VersionVector) {
        self.vector = vector
    }

    public init(from decoder: any Decoder) throws {
        let members = try decoder.singleValueContainer().decode([String: Int64].self)
        do {
            vector = try ChangeSetCodec.vector(members.map { ($0.key, Optional($0.value)) })
        } catch {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: error.description))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(Dictionary(uniqueKeysWithValues: vector.map { ($0.key.uuidString, $0.value) }))
    }
}

/// The body of every error answer: `{"error":{"message":…}}`.
public struct ErrorMessage: Codable, Sendable, Equatable {
    /// The inner object.
    public struct Detail: Codable, Sendable, Equatable {
        /// What happened, why, and what to do.
        public var message: String
        /// The HTTP status the error stands for, where the answer's own status cannot say it: an
        /// error line of a push stream (`POST /v1/changesets/stream`), whose answer began with 200.
        public var status: Int?
    }

    /// The error.
    public var error: Detail

    /// An error answer saying `message`.
    public init(_ message: String, status: Int? = nil) {
        error = Detail(message: message, status: status)
    }
}
