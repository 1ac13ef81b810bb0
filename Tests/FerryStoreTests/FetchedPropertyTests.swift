import Foundation
import Testing
import FerryModel
import FerryStore
import FerryTestSupport

@Suite("Fetched properties")
struct FetchedPropertyTests {
    /// A model file with fetched properties using `$FETCH_SOURCE`, `$FETCH_SOURCE.key`
    /// and `$FETCHED_PROPERTY.userInfo.key`, inherited by a subentity.
    static let xml = """
        <?xml version="1.0" encoding="UTF-8" standalone="yes"?>
        <model type="com.apple.IDECoreDataModeler.DataModel" documentVersion="1.0">
            <entity name="Member" representedClassName="Member" syncable="YES">
                <attribute name="name" optional="YES" attributeType="String"/>
                <attribute name="team" optional="YES" attributeType="String"/>
                <attribute name="level" optional="YES" attributeType="Integer 16" defaultValueString="0" usesScalarValueType="YES"/>
                <fetchedProperty name="teammates" optional="YES">
                    <fetchRequest name="fetchedPropertyFetchRequest" entity="Member" predicateString="team == $FETCH_SOURCE.team AND SELF != $FETCH_SOURCE"/>
                </fetchedProperty>
                <fetchedProperty name="juniors" optional="YES">
                    <fetchRequest name="fetchedPropertyFetchRequest" entity="Member" \
        predicateString="level &lt; $FETCH_SOURCE.level AND team == $FETCH_SOURCE.team"/>
                </fetchedProperty>
                <fetchedProperty name="blueTeam" optional="YES">
                    <fetchRequest name="fetchedPropertyFetchRequest" entity="Member" predicateString="team == $FETCHED_PROPERTY.userInfo.team"/>
                    <userInfo>
                        <entry key="team" value="blue"/>
                    </userInfo>
                </fetchedProperty>
                <fetchedProperty name="broken" optional="YES">
                    <fetchRequest name="fetchedPropertyFetchRequest" entity="Member" predicateString="team == $FETCH_SOURCE.nickname"/>
                </fetchedProperty>
            </entity>
            <entity name="Lead" representedClassName="Lead" parentEntity="Member" syncable="YES">
                <attribute name="budget" optional="YES" attributeType="Integer 32" defaultValueString="0" usesScalarValueType="YES"/>
            </entity>
        </model>
        """

    static let model = try! XcodeModelReader.read(xml: Data(xml.utf8), fileName: "Teams.xcdatamodel/contents")

    func names(_ objects: [ManagedObject]) throws -> [String] {
        try objects.compactMap { try $0.string("name") }.sorted()
    }

    @Test("The predicate is evaluated against the source object, for subentities too", arguments: TestStoreKind.allCases)
    func evaluation(kind: TestStoreKind) throws {
        let test = try TestContainer(model: Self.model, kind: kind)
        let context = test.context()
        let ann = try context.make("Member", ["name": "Ann", "team": "red", "level": Int16(3)])
        try context.make("Member", ["name": "Bob", "team": "red", "level": Int16(1)])
        try context.make("Member", ["name": "Cid", "team": "blue", "level": Int16(2)])
        let dee = try context.make("Lead", ["name": "Dee", "team": "blue", "level": Int16(5)])
        try context.make("Member", ["name": "Eve", "level": Int16(4)])
        try context.save()

        #expect(try names(context.fetchedProperty("teammates", of: ann)) == ["Bob"])
        #expect(try names(context.fetchedProperty("juniors", of: ann)) == ["Bob"])
        #expect(try names(context.fetchedProperty("teammates", of: dee)) == ["Cid"], "Lead inherits Member's fetched properties")
        #expect(try names(context.fetchedProperty("juniors", of: dee)) == ["Cid"])
        #expect(try names(context.fetchedProperty("blueTeam", of: ann)) == ["Cid", "Dee"])
        let eve = try #require(try context.fetch(FetchRequest(entityName: "Member", where: "name", equals: .string("Eve"))).first)
        #expect(try names(context.fetchedProperty("teammates", of: eve)) == [], "a nil team matches other nil teams only")

        // Evaluated at every call, with the context's unsaved changes.
        try context.make("Member", ["name": "Fay", "team": "red", "level": Int16(0)])
        try ann.setValue("blue", forKey: "team")
        #expect(try names(context.fetchedProperty("teammates", of: ann)) == ["Cid", "Dee"])
        #expect(try names(context.fetchedProperty("blueTeam", of: dee)) == ["Ann", "Cid", "Dee"])
    }

    @Test("Unknown fetched properties and predicates that do not bind are clear errors")
    func errors() throws {
        let test = try TestContainer(model: Self.model, kind: .memory)
        let context = test.context()
        let ann = try context.make("Member", ["name": "Ann", "team": "red"])
        #expect(throws: ContextError.unknownKey(entity: "Member", key: "colleagues")) {
            try context.fetchedProperty("colleagues", of: ann)
        }
        do {
            _ = try context.fetchedProperty("broken", of: ann)
            Issue.record("a predicate reading $FETCH_SOURCE.nickname bound")
        } catch let error as PredicateFormatError {
            #expect(error.code == .unknownKey)
            #expect(error.message.contains("$FETCH_SOURCE.nickname"), "\(error)")
            #expect(error.predicate == "team == $FETCH_SOURCE.nickname")
        }
        let other = test.context()
        #expect(throws: ContextError.objectFromAnotherContext(ann.objectID.uriString)) {
            try other.fetchedProperty("teammates", of: ann)
        }
    }
}
