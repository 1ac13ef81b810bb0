/// Builds the text of a JSON array to pass many values to SQL as one argument
/// (read back with `json_each`), so that one cached statement serves any number
/// of values instead of one statement per value.
struct JSONArgument {
    private(set) var text = "["

    init(capacity: Int) {
        text.reserveCapacity(capacity)
    }

    /// An array of `strings`.
    init<Strings: Sequence<String>>(strings: Strings, capacity: Int) {
        self.init(capacity: capacity)
        for string in strings {
            separate()
            appendString(string)
        }
    }

    /// Starts the next element.
    mutating func separate() {
        if text.utf8.count > 1 { text += "," }
    }

    /// Appends `value` as a JSON string.
    mutating func appendString(_ value: String) {
        text += "\""
        if value.utf8.contains(where: { $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") || $0 < 0x20 }) {
            for scalar in value.unicodeScalars {
                let needsEscape = scalar == "\"" || scalar == "\\" || scalar.value < 0x20
                text += needsEscape ? String(scalar.value, radix: 16).leftPadded(to: 4, prefix: "\\u") : String(scalar)
            }
        } else {
            text += value
        }
        text += "\""
    }

    /// Appends raw JSON (a number, or brackets of a nested array).
    mutating func appendRaw(_ json: String) {
        text += json
    }

    /// The finished array.
    var json: String { text + "]" }
}

private extension String {
    /// `self` padded with zeros to `width` digits, after `prefix`.
    func leftPadded(to width: Int, prefix: String) -> String {
        prefix + String(repeating: "0", count: max(0, width - count)) + self
    }
}
