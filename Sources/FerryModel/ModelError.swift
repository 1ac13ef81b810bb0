/// Why a model could not be built or read.
///
/// Every error names what it is about: the file (and line) for model files,
/// the entity and property for inconsistencies, and says what to change.
public struct ModelError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The kind of problem.
    public enum Code: String, Sendable, Hashable {
        /// The path does not exist.
        case fileNotFound
        /// The file exists but cannot be read.
        case unreadableFile
        /// The file is not well-formed XML.
        case malformedXML
        /// The file is a kind of model Ferry does not read (e.g. a binary `elements` file).
        case unsupportedFormat
        /// An element has a missing or invalid attribute.
        case invalidElement
        /// The model's parts do not fit together (unknown destination, bad inverse, …).
        case inconsistentModel
    }

    /// The kind of problem.
    public let code: Code
    /// What is wrong and how to fix it.
    public let message: String
    /// The model file, when the model was read from one.
    public var file: String?
    /// The 1-based line in ``file``, when known.
    public var line: Int?
    /// The element concerned, e.g. `<attribute name="age">` in entity `Person`.
    public var element: String?
    /// The error met reading the file (the XML or property-list parser's), when there was one.
    public var cause: (any Error)?

    /// Creates an error.
    public init(_ code: Code, _ message: String, file: String? = nil, line: Int? = nil, element: String? = nil,
                cause: (any Error)? = nil) {
        self.code = code
        self.message = message
        self.file = file
        self.line = line
        self.element = element
        self.cause = cause
    }

    /// Errors are equal when they say the same of the same place (causes are not compared).
    public static func == (lhs: ModelError, rhs: ModelError) -> Bool {
        (lhs.code, lhs.message, lhs.file, lhs.line, lhs.element) == (rhs.code, rhs.message, rhs.file, rhs.line, rhs.element)
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(code)
        hasher.combine(message)
        hasher.combine(file)
        hasher.combine(line)
        hasher.combine(element)
    }

    public var description: String {
        var location = ""
        if let file {
            location = file
            if let line { location += ":\(line)" }
            location += ": "
        }
        if let element { location += "\(element): " }
        return location + message
    }
}
