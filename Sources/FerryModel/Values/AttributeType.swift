/// The storage type of an attribute, spelled as Xcode spells `attributeType`.
///
/// The raw values are Core Data's `NSAttributeType` numbers, so tools that
/// compare with Core Data can line them up.
public enum AttributeType: Int, Sendable, CaseIterable, Codable {
    case integer16 = 100
    case integer32 = 200
    case integer64 = 300
    case decimal = 400
    case double = 500
    case float = 600
    case string = 700
    case boolean = 800
    case date = 900
    case binaryData = 1000
    case uuid = 1100
    case uri = 1200
    /// A value encoded by the application (Core Data's value transformers);
    /// Ferry stores and syncs the encoded bytes.
    case transformable = 1800

    /// The spelling Xcode writes in a model file's `attributeType` attribute.
    public var xcodeName: String {
        switch self {
        case .integer16: "Integer 16"
        case .integer32: "Integer 32"
        case .integer64: "Integer 64"
        case .decimal: "Decimal"
        case .double: "Double"
        case .float: "Float"
        case .string: "String"
        case .boolean: "Boolean"
        case .date: "Date"
        case .binaryData: "Binary"
        case .uuid: "UUID"
        case .uri: "URI"
        case .transformable: "Transformable"
        }
    }

    /// Parses Xcode's spelling (`"Integer 16"`, `"Binary"`, …); nil when unknown.
    public init?(xcodeName: String) {
        guard let match = AttributeType.allCases.first(where: { $0.xcodeName == xcodeName }) else { return nil }
        self = match
    }

    /// Whether the type is one of the three integer widths.
    public var isInteger: Bool { self == .integer16 || self == .integer32 || self == .integer64 }

    /// Whether min/max validation compares the value numerically.
    public var isNumeric: Bool { isInteger || self == .decimal || self == .double || self == .float }

    /// The closed range an integer attribute accepts, nil for other types.
    public var integerRange: ClosedRange<Int64>? {
        switch self {
        case .integer16: Int64(Int16.min)...Int64(Int16.max)
        case .integer32: Int64(Int32.min)...Int64(Int32.max)
        case .integer64: Int64.min...Int64.max
        default: nil
        }
    }
}

/// What happens to a relationship's destinations when its source is deleted.
///
/// Raw values are Core Data's `NSDeleteRule` numbers.
public enum DeleteRule: Int, Sendable, CaseIterable, Codable {
    /// Destinations keep pointing at the deleted object (the graph may dangle).
    case noAction = 0
    /// The deleted object is removed from each destination's inverse.
    case nullify = 1
    /// Destinations are deleted too, and their own rules apply in turn.
    case cascade = 2
    /// The save fails while the relationship still has a destination.
    case deny = 3

    /// The spelling Xcode writes in `deletionRule`.
    public var xcodeName: String {
        switch self {
        case .noAction: "No Action"
        case .nullify: "Nullify"
        case .cascade: "Cascade"
        case .deny: "Deny"
        }
    }

    /// Parses Xcode's spelling; nil when unknown.
    public init?(xcodeName: String) {
        guard let match = DeleteRule.allCases.first(where: { $0.xcodeName == xcodeName }) else { return nil }
        self = match
    }
}
