import Foundation

extension AttributeValue {
    /// Parses a default or bound value the way Xcode writes it in a model file
    /// (`defaultValueString`, `minValueString`): integers and decimals in
    /// decimal notation, booleans as `YES`/`NO` (also `true`/`false`, `1`/`0`),
    /// dates as seconds since 2001-01-01, UUIDs and URIs in their string form.
    /// Returns nil when the text is not a value of `type`.
    public init?(modelString text: String, type: AttributeType) {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        switch type {
        case .integer16, .integer32, .integer64:
            if let integer = Int64(trimmed), type.integerRange?.contains(integer) == true {
                self = .integer(integer)
            } else if let double = Double(trimmed), let integer = Int64(exactly: double),
                      type.integerRange?.contains(integer) == true {
                self = .integer(integer)
            } else {
                return nil
            }
        case .decimal:
            guard let decimal = Decimal(string: trimmed, locale: Locale(identifier: "en_US_POSIX")),
                  !trimmed.isEmpty else { return nil }
            self = .decimal(decimal)
        case .double:
            guard let double = Double(trimmed) else { return nil }
            self = .double(double)
        case .float:
            guard let float = Float(trimmed) else { return nil }
            self = .float(float)
        case .string:
            self = .string(text)
        case .boolean:
            switch trimmed.uppercased() {
            case "YES", "TRUE", "1": self = .boolean(true)
            case "NO", "FALSE", "0": self = .boolean(false)
            default: return nil
            }
        case .date:
            guard let seconds = Double(trimmed) else { return nil }
            self = .date(Date(timeIntervalSinceReferenceDate: seconds))
        case .uuid:
            guard let uuid = UUID(uuidString: trimmed) else { return nil }
            self = .uuid(uuid)
        case .uri:
            guard let url = URL(string: trimmed) else { return nil }
            self = .uri(url)
        case .binaryData, .transformable:
            return nil
        }
    }

    /// The inverse of ``init(modelString:type:)``: the text a model file would hold.
    public var modelString: String {
        switch self {
        case .integer(let v): String(v)
        case .decimal(let v): "\(v)"
        case .double(let v): "\(v)"
        case .float(let v): "\(v)"
        case .string(let v): v
        case .boolean(let v): v ? "YES" : "NO"
        case .date(let v): "\(v.timeIntervalSinceReferenceDate)"
        case .binaryData(let v), .transformable(let v): v.base64EncodedString()
        case .uuid(let v): v.uuidString
        case .uri(let v): v.absoluteString
        }
    }
}
