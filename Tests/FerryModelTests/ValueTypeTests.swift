import Foundation
import Testing
@testable import FerryModel

@Suite("Attribute types and values")
struct ValueTypeTests {
    @Test("Raw values are Core Data's NSAttributeType and NSDeleteRule numbers")
    func coreDataNumbers() {
        #expect(AttributeType.integer16.rawValue == 100)
        #expect(AttributeType.string.rawValue == 700)
        #expect(AttributeType.binaryData.rawValue == 1000)
        #expect(AttributeType.transformable.rawValue == 1800)
        #expect(DeleteRule.noAction.rawValue == 0)
        #expect(DeleteRule.nullify.rawValue == 1)
        #expect(DeleteRule.cascade.rawValue == 2)
        #expect(DeleteRule.deny.rawValue == 3)
    }

    @Test("Xcode spellings round-trip", arguments: AttributeType.allCases)
    func xcodeNames(type: AttributeType) {
        #expect(AttributeType(xcodeName: type.xcodeName) == type)
    }

    @Test func deleteRuleSpellings() {
        #expect(DeleteRule.allCases.map(\.xcodeName) == ["No Action", "Nullify", "Cascade", "Deny"])
        #expect(DeleteRule(xcodeName: "No Action") == .noAction)
        #expect(DeleteRule(xcodeName: "nullify") == nil)
        #expect(AttributeType(xcodeName: "Composite") == nil)
    }

    @Test("Integers are range-checked per width")
    func integerCoercion() {
        #expect(AttributeValue.coerce(32767, to: .integer16) == .integer(32767))
        #expect(AttributeValue.coerce(32768, to: .integer16) == nil)
        #expect(AttributeValue.coerce(Int64.max, to: .integer64) == .integer(Int64.max))
        #expect(AttributeValue.coerce(Int64(Int32.max) + 1, to: .integer32) == nil)
        #expect(AttributeValue.coerce(3.0, to: .integer32) == .integer(3))
        #expect(AttributeValue.coerce(3.5, to: .integer32) == nil)
        #expect(AttributeValue.coerce("3", to: .integer32) == nil)
    }

    @Test func otherCoercions() {
        #expect(AttributeValue.coerce(2, to: .double) == .double(2))
        #expect(AttributeValue.coerce(Float(1.5), to: .double) == .double(1.5))
        #expect(AttributeValue.coerce(1.5, to: .float) == .float(1.5))
        #expect(AttributeValue.coerce(Decimal(string: "1.25")!, to: .decimal) == .decimal(Decimal(string: "1.25")!))
        #expect(AttributeValue.coerce(true, to: .boolean) == .boolean(true))
        #expect(AttributeValue.coerce(1, to: .boolean) == nil)
        #expect(AttributeValue.coerce(Data([1]), to: .transformable) == .transformable(Data([1])))
        #expect(AttributeValue.coerce("x", to: .uuid) == nil)
    }

    @Test("Model-file strings parse per type, as Xcode writes them")
    func modelStrings() {
        #expect(AttributeValue(modelString: "YES", type: .boolean) == .boolean(true))
        #expect(AttributeValue(modelString: "NO", type: .boolean) == .boolean(false))
        #expect(AttributeValue(modelString: "0", type: .integer16) == .integer(0))
        #expect(AttributeValue(modelString: "0.0", type: .integer64) == .integer(0))
        #expect(AttributeValue(modelString: "70000", type: .integer16) == nil)
        #expect(AttributeValue(modelString: "0.0", type: .decimal) == .decimal(0))
        #expect(AttributeValue(modelString: "100", type: .date) == .date(Date(timeIntervalSinceReferenceDate: 100)))
        #expect(AttributeValue(modelString: "abc", type: .double) == nil)
        #expect(AttributeValue(modelString: "Set From Core Data Model Editor", type: .string) == .string("Set From Core Data Model Editor"))
    }

    @Test("Strings order by UTF-8 bytes, like SQLite's BINARY collation")
    func stringOrder() {
        #expect(AttributeValue.compare(.string("B"), .string("a")) == .orderedAscending)
        #expect(AttributeValue.compare(.string("é"), .string("z")) == .orderedDescending)
        #expect(AttributeValue.compare(.integer(2), .double(2.5)) == .orderedAscending)
        #expect(AttributeValue.compare(.string("1"), .integer(1)) == nil)
    }

    @Test func uuidBytesRoundTrip() {
        let uuid = UUID()
        #expect(UUID(bytes: uuid.bytes) == uuid)
        #expect(UUID(bytes: [1, 2, 3]) == nil)
    }

    @Test("SHA-256 matches the FIPS 180-4 test vectors")
    func sha256() {
        #expect(SHA256.hexDigest(Array("abc".utf8)) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(SHA256.hexDigest([UInt8]()) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(SHA256.hexDigest(Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8))
                == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        #expect(SHA256.hexDigest([UInt8](repeating: 0x61, count: 1_000_000)) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }
}
