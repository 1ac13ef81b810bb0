import Foundation
import FerryModel

/// A sum of attribute values, converted to the derived attribute's type: exact for integers
/// and decimals, and for floating-point values added in increasing order, so that replicas
/// whose to-many lists its members in another order compute the same bits.
package struct DerivedSum {
    package init(integer: Int64 = 0) { self.integer = integer }

    var integer: Int64
    var decimal = Decimal(0)
    var doubles: [Double] = []
    var sawDecimal = false
    var sawFloating: Bool { !doubles.isEmpty }
    var double: Double { doubles.sorted().reduce(0, +) }

    package mutating func add(_ value: AttributeValue?) {
        switch value {
        case .integer(let number)?: integer = integer.addingReportingOverflow(number).partialValue
        case .decimal(let number)?:
            decimal += number
            sawDecimal = true
        case .double(let number)?: doubles.append(number)
        case .float(let number)?: doubles.append(Double(number))
        default: break
        }
    }

    package func value(as type: AttributeType) -> AttributeValue? {
        let double = self.double
        switch type {
        case .integer16, .integer32, .integer64:
            let total = Double(integer) + double + NSDecimalNumber(decimal: decimal).doubleValue
            guard sawFloating || sawDecimal else { return .integer(integer) }
            return total.isFinite && abs(total) < 9.2e18 ? .integer(Int64(total.rounded(.towardZero))) : nil
        case .decimal: return .decimal(decimal + Decimal(integer) + Decimal(double))
        case .double: return .double(Double(integer) + double + NSDecimalNumber(decimal: decimal).doubleValue)
        case .float: return .float(Float(Double(integer) + double + NSDecimalNumber(decimal: decimal).doubleValue))
        default: return nil
        }
    }
}
