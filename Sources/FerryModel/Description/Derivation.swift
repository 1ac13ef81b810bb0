import Foundation

/// How a derived attribute (Xcode's `derived="YES"` with a `derivationExpression`)
/// gets its value: computed by the store at every save, never set by the app.
///
/// The forms are those Xcode's model editor offers for an SQLite store:
///
/// | expression | form | value |
/// |---|---|---|
/// | `name` | ``Form/value(_:)`` | an attribute of the same object |
/// | `owner.name` | ``Form/value(_:)`` | an attribute of the object a to-one points at |
/// | `uppercase:(name)`, `lowercase:(name)` | ``Form/uppercase(_:)``, ``Form/lowercase(_:)`` | a string attribute, case changed |
/// | `canonical:(name)` | ``Form/canonical(_:)`` | a string attribute without case and diacritics |
/// | `items.@count` | ``Form/count(relationship:)`` | how many objects a to-many holds |
/// | `items.@sum.price` | ``Form/sum(relationship:attribute:)`` | the sum of a number attribute over a to-many |
/// | `now()` | ``Form/now`` | the time of the save that last changed the object |
///
/// Anything else (string concatenation `++`, key paths of more than one
/// relationship, other functions) has no ``form``: a model holding it does not build,
/// and the error names the expression.
public struct Derivation: Sendable, Hashable {
    /// A key path of one or two steps: an attribute, or a to-one relationship and an attribute of its destination.
    public struct KeyPath: Sendable, Hashable, CustomStringConvertible {
        /// The to-one relationship followed first, if any.
        public var relationship: String?
        /// The attribute read (on the object, or on the relationship's destination).
        public var attribute: String

        /// A key path `attribute` or `relationship.attribute`.
        public init(relationship: String? = nil, attribute: String) {
            self.relationship = relationship
            self.attribute = attribute
        }

        public var description: String { relationship.map { "\($0).\(attribute)" } ?? attribute }
    }

    /// What the value is computed from.
    public enum Form: Sendable, Hashable {
        /// The value at a key path.
        case value(KeyPath)
        /// A string at a key path, upper-cased.
        case uppercase(KeyPath)
        /// A string at a key path, lower-cased.
        case lowercase(KeyPath)
        /// A string at a key path with case and diacritics removed (for searching).
        case canonical(KeyPath)
        /// The number of objects in a to-many relationship.
        case count(relationship: String)
        /// The sum of a number attribute over the objects of a to-many relationship.
        case sum(relationship: String, attribute: String)
        /// The time of the save.
        case now

        /// For the string forms, the string computed from `text`; nil for the others.
        /// (One definition for every place that derives: a save, a migration.)
        public func transform(_ text: String) -> String? {
            switch self {
            case .uppercase: text.uppercased()
            case .lowercase: text.lowercased()
            case .canonical: text.folding(options: [.caseInsensitive, .diacriticInsensitive, .widthInsensitive], locale: nil)
            case .value, .count, .sum, .now: nil
            }
        }
    }

    /// The expression as written in the model.
    public let expression: String
    /// What it computes; nil for an expression Ferry cannot compute (see ``problem``).
    public let form: Form?
    /// Why the expression cannot be computed, naming it; nil when it can.
    public let problem: String?

    /// Reads an expression as Xcode writes it. An unsupported one is kept with its
    /// ``problem``: building a model that holds it fails with that message.
    public init(expression: String) {
        self.expression = expression
        switch Self.parse(expression.trimmingCharacters(in: .whitespaces)) {
        case .form(let form):
            self.form = form
            self.problem = nil
        case .problem(let problem):
            self.form = nil
            self.problem = problem
        }
    }

    /// Whether every replica computes the value itself from the values it holds (every form
    /// but `now()`): such a value is a function of replicated state, so it is not replicated
    /// itself. A `now()` value is the time of one save on one store: it replicates as a plain
    /// attribute, so that replicas agree on it.
    public var isComputedOnEveryReplica: Bool { form != .now }

    /// The relationship the value reads through, if any.
    public var relationship: String? {
        switch form {
        case .value(let path)?, .uppercase(let path)?, .lowercase(let path)?, .canonical(let path)?: path.relationship
        case .count(let relationship)?, .sum(let relationship, _)?: relationship
        case .now?, nil: nil
        }
    }

    /// The attribute read on the object or its destinations (nil for `@count` and `now()`).
    public var sourceAttribute: String? {
        switch form {
        case .value(let path)?, .uppercase(let path)?, .lowercase(let path)?, .canonical(let path)?: path.attribute
        case .sum(_, let attribute)?: attribute
        case .count?, .now?, nil: nil
        }
    }

    static let supportedForms = "a key path (name, or relationship.name through a to-one), uppercase:(…), lowercase:(…) or canonical:(…) of one, " +
        "relationship.@count, relationship.@sum.attribute and now()"

    private enum Parsed {
        case form(Form)
        case problem(String)
    }

    private static func parse(_ text: String) -> Parsed {
        func refuse(_ why: String) -> Parsed {
            .problem("derivationExpression '\(text)' is not supported (\(why)); Ferry derives \(supportedForms)")
        }
        if text.replacingOccurrences(of: " ", with: "") == "now()" { return .form(.now) }
        let functions: [(String, (KeyPath) -> Form)] = [("uppercase:", Form.uppercase), ("lowercase:", Form.lowercase), ("canonical:", Form.canonical)]
        for (prefix, make) in functions {
            guard text.hasPrefix(prefix) else { continue }
            var argument = text.dropFirst(prefix.count).trimmingCharacters(in: .whitespaces)
            guard argument.hasPrefix("("), argument.hasSuffix(")") else { return refuse("\(prefix) takes one key path in parentheses") }
            argument = String(argument.dropFirst().dropLast()).trimmingCharacters(in: .whitespaces)
            guard let path = keyPath(argument) else { return refuse("\(prefix) takes a key path of an attribute") }
            return .form(make(path))
        }
        let steps = text.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        guard steps.allSatisfy({ isName($0) || $0 == "@count" || $0 == "@sum" }) else {
            return refuse(text.contains("++") ? "string concatenation" : "not a key path, nor a function Ferry knows")
        }
        switch steps.count {
        case 2 where steps[1] == "@count" && isName(steps[0]):
            return .form(.count(relationship: steps[0]))
        case 3 where steps[1] == "@sum" && isName(steps[0]) && isName(steps[2]):
            return .form(.sum(relationship: steps[0], attribute: steps[2]))
        default:
            guard let path = keyPath(text) else {
                return refuse(steps.count > 2 ? "a key path through more than one relationship" : "an aggregate other than @count and @sum, or misplaced")
            }
            return .form(.value(path))
        }
    }

    private static func keyPath(_ text: String) -> KeyPath? {
        let steps = text.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        guard steps.allSatisfy(isName) else { return nil }
        switch steps.count {
        case 1: return KeyPath(attribute: steps[0])
        case 2: return KeyPath(relationship: steps[0], attribute: steps[1])
        default: return nil
        }
    }

    private static func isName(_ text: String) -> Bool { ManagedObjectModel.isIdentifier(text) }
}
