import Foundation
import Testing
import FerryModel

/// Reading derived attributes (issue 22, point 4): the forms Xcode offers are read, written back
/// and hashed; anything else is refused with an error naming the expression.
@Suite("Derivations")
struct DerivationTests {
    func model(_ attributes: String, items: String = "") throws(ModelError) -> ManagedObjectModel {
        let xml = """
        <model>
            <entity name="Folder">
                <attribute name="title" optional="YES" attributeType="String"/>
                \(attributes)
                <relationship name="items" optional="YES" toMany="YES" destinationEntity="Item" inverseName="folder" inverseEntity="Item"/>
                <relationship name="oneWay" optional="YES" toMany="YES" destinationEntity="Item"/>
            </entity>
            <entity name="Item">
                <attribute name="price" optional="YES" attributeType="Decimal"/>
                \(items)
                <relationship name="folder" optional="YES" maxCount="1" destinationEntity="Folder" inverseName="items" inverseEntity="Folder"/>
            </entity>
        </model>
        """
        return try XcodeModelReader.read(xml: Data(xml.utf8), fileName: "M.xcdatamodel/contents")
    }

    @Test("The forms Xcode offers", arguments: [
        ("title", "String", Derivation.Form.value(.init(attribute: "title"))),
        ("uppercase:(title)", "String", .uppercase(.init(attribute: "title"))),
        ("lowercase:(title)", "String", .lowercase(.init(attribute: "title"))),
        ("canonical:(title)", "String", .canonical(.init(attribute: "title"))),
        ("items.@count", "Integer 32", .count(relationship: "items")),
        ("items.@sum.price", "Decimal", .sum(relationship: "items", attribute: "price")),
        ("now()", "Date", .now),
    ])
    func forms(expression: String, type: String, form: Derivation.Form) throws {
        let model = try model(#"<attribute name="d" optional="YES" attributeType="\#(type)" derived="YES" derivationExpression="\#(expression)"/>"#)
        let attribute = try #require(model.entity(named: "Folder")?.attribute(named: "d"))
        #expect(attribute.derivation?.form == form)
        #expect(attribute.isReplicated == (form == .now))
        // Written back as read.
        let written = XcodeModelWriter.contents(of: model)
        #expect(written.contains(#"derived="YES" derivationExpression="\#(expression)""#))
        #expect(try XcodeModelReader.read(xml: Data(written.utf8), fileName: "again").versionHash == model.versionHash)
    }

    @Test("A key path through a to-one")
    func toOnePath() throws {
        let model = try model("", items: #"<attribute name="where" optional="YES" attributeType="String" derived="YES" derivationExpression="folder.title"/>"#)
        #expect(model.entity(named: "Item")?.attribute(named: "where")?.derivation?.form == .value(.init(relationship: "folder", attribute: "title")))
    }

    @Test("What a derivation computes is part of the version hash")
    func hashed() throws {
        let plain = try model(#"<attribute name="d" optional="YES" attributeType="String"/>"#)
        let upper = try model(#"<attribute name="d" optional="YES" attributeType="String" derived="YES" derivationExpression="uppercase:(title)"/>"#)
        let lower = try model(#"<attribute name="d" optional="YES" attributeType="String" derived="YES" derivationExpression="lowercase:(title)"/>"#)
        #expect(Set([plain.versionHash, upper.versionHash, lower.versionHash]).count == 3)
    }

    @Test("Unsupported forms and misfits are refused, naming the expression", arguments: [
        (#"firstName ++ &quot; &quot; ++ lastName"#, "String", "string concatenation"),
        ("folder.items.@count", "Integer 64", "is not supported"),
        ("sum:(items.price)", "Decimal", "is not supported"),
        ("items.@avg.price", "Decimal", "is not supported"),
        ("items.@count", "String", "computes an Integer, and the attribute is String"),
        ("items.title", "String", "is to-many (use @count or @sum)"),
        ("oneWay.@count", "Integer 64", "has no inverse"),
        ("nothing", "String", "'nothing' is not an attribute of 'Folder'"),
        ("now()", "String", "computes a Date"),
        ("items.@sum.price", "String", "computes a number"),
    ])
    func refused(expression: String, type: String, message: String) throws {
        do {
            _ = try model(#"<attribute name="d" optional="YES" attributeType="\#(type)" derived="YES" derivationExpression="\#(expression)"/>"#)
            Issue.record("\(expression) was accepted")
        } catch {
            #expect(error.description.contains(message), "\(error.description)")
            #expect(error.description.contains("'d'") || error.description.contains("\"d\""), "\(error.description)")
        }
    }

    @Test("derived=YES without an expression is refused")
    func missingExpression() throws {
        #expect(throws: ModelError.self) { try model(#"<attribute name="d" optional="YES" attributeType="String" derived="YES"/>"#) }
    }

    @Test("The model builder declares derived attributes")
    func builder() throws {
        let model = try ManagedObjectModel {
            Entity("Tag") {
                Attribute("name", .string)
                Attribute("key", .string, derivedFrom: "canonical:(name)")
            }
        }
        #expect(model.entity(named: "Tag")?.attribute(named: "key")?.derivation?.form == .canonical(.init(attribute: "name")))
        #expect(throws: ModelError.self) {
            try ManagedObjectModel { Entity("Tag") { Attribute("a", .string); Attribute("bad", .string, derivedFrom: "a ++ a") } }
        }
    }
}
