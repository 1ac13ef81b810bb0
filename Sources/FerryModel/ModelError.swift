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

    /// Creates an error.
    public init(_ code: Code, _ message: String, file: String? = nil, line: Int? = nil, element: String? = nil) {
        self.code = code
        self.message = message
        self.file = file
        self.line = line
        self.element = element
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
