import Foundation
import Testing
import FerryModel
import FerryTestSupport
#if canImport(FoundationXML)
import FoundationXML
#endif

@Suite("Xcode model reader")
struct XcodeModelReaderTests {
    // MARK: - Sample models, exactly as config/models holds them

    @Test func orgChart() throws {
        let model = try SampleModels.load("OrgChart")
        #expect(model.entities.map(\.name) == ["Organization", "Person"])
        let organization = try #require(model.entity(named: "Organization"))
        #expect(organization.attribute(named: "id")?.type == .integer16)
        #expect(organization.attribute(named: "name")?.type == .string)
        let leader = try #require(organization.relationship(named: "leader"))
        #expect(leader.destinationEntityName == "Person" && !leader.isToMany)
        let person = try #require(model.entity(named: "Person"))
        let employees = try #require(person.relationship(named: "employees"))
        #expect(employees.isToMany && employees.destinationEntityName == "Person" && employees.inverseName == "manager")
        #expect(person.relationship(named: "manager")?.inverseName == "employees")
        #expect(model.fetchRequestTemplate(named: "personByName")?.predicate == "name == $NAME")
    }

    @Test func orders() throws {
        let model = try SampleModels.load("Orders")
        #expect(model.entities.map(\.name) == ["Customer", "Order", "RowOfOrder", "Service"])
        let customer = try #require(model.entity(named: "Customer"))
        #expect(customer.attribute(named: "name")?.isOptional == false)
        #expect(customer.attribute(named: "info")?.isOptional == true)
        #expect(customer.relationship(named: "orders")?.deleteRule == .nullify)
        let order = try #require(model.entity(named: "Order"))
        #expect(order.attribute(named: "date")?.type == .date)
        #expect(order.attribute(named: "date")?.isOptional == false)
        #expect(order.attribute(named: "paid")?.defaultValue == .boolean(false))
        #expect(order.attribute(named: "made")?.defaultValue == .boolean(false))
        #expect(order.relationship(named: "rowsOfOrder")?.deleteRule == .cascade)
        #expect(order.relationship(named: "customer")?.inverseName == "orders")
        let row = try #require(model.entity(named: "RowOfOrder"))
        #expect(row.attribute(named: "sum")?.type == .float)
        #expect(row.relationship(named: "order")?.inverseName == "rowsOfOrder")
        #expect(row.relationship(named: "service")?.inverseName == "rowsOfOrders")
        #expect(model.entity(named: "Service")?.attribute(named: "name")?.isOptional == false)
    }

    @Test func company() throws {
        let model = try SampleModels.load("Company")
        let company = try #require(model.entity(named: "Company"))
        #expect(company.attributes.map(\.name) == ["inn", "name", "uid"])
        #expect(company.relationship(named: "employee")?.deleteRule == .cascade)
        #expect(company.relationship(named: "employee")?.isToMany == true)
        let employee = try #require(model.entity(named: "Employee"))
        #expect(employee.attributes.map(\.name) == ["firstName", "secondName"])
        #expect(employee.relationship(named: "company")?.deleteRule == .nullify)
    }

    // MARK: - Real model files from public projects

    static let fixtureFiles: [String] = {
        ((try? FileManager.default.contentsOfDirectory(atPath: SampleModels.realModelsDirectory)) ?? [])
            .filter { $0.hasSuffix(".contents") }.sorted()
    }()

    @Test func fixturesArePresent() {
        #expect(Self.fixtureFiles.count >= 10, "expected the real model files at \(SampleModels.realModelsDirectory)")
    }

    /// Reads each fixture with the reader and, independently, with `XMLDocument`, and compares.
    @Test("Every real model file reads, and the reader reports what the XML says", arguments: fixtureFiles)
    func fixture(file: String) throws {
        let path = "\(SampleModels.realModelsDirectory)/\(file)"
        let model = try XcodeModelReader.read(at: path)
        let document = try XMLDocument(contentsOf: URL(fileURLWithPath: path), options: [])
        let entityElements = try document.nodes(forXPath: "/model/entity").compactMap { $0 as? XMLElement }
        #expect(model.entities.count == entityElements.count)
        for element in entityElements {
            let name = try #require(element.attribute(forName: "name")?.stringValue)
            let entity = try #require(model.entity(named: name), "\(file): entity \(name)")
            #expect(entity.parentName == element.attribute(forName: "parentEntity")?.stringValue, "\(file): \(name) parent")
            #expect(entity.isAbstract == (element.attribute(forName: "isAbstract")?.stringValue == "YES"), "\(file): \(name) abstract")
            let attributes = (element.elements(forName: "attribute"))
            #expect(entity.ownAttributes.map(\.name) == attributes.compactMap { $0.attribute(forName: "name")?.stringValue }, "\(file): \(name) attributes")
            for (attribute, xml) in zip(entity.ownAttributes, attributes) {
                #expect(attribute.type.xcodeName == xml.attribute(forName: "attributeType")?.stringValue, "\(file): \(name).\(attribute.name) type")
                #expect(attribute.isOptional == (xml.attribute(forName: "optional")?.stringValue == "YES"), "\(file): \(name).\(attribute.name) optional")
                #expect(attribute.isTransient == (xml.attribute(forName: "transient")?.stringValue == "YES"), "\(file): \(name).\(attribute.name) transient")
                #expect((attribute.defaultValue != nil)
                        == (xml.attribute(forName: "defaultValueString") != nil || xml.attribute(forName: "defaultDateTimeInterval") != nil))
            }
            let relationships = element.elements(forName: "relationship")
            #expect(entity.ownRelationships.map(\.name) == relationships.compactMap { $0.attribute(forName: "name")?.stringValue },
                    "\(file): \(name) relationships")
            for (relationship, xml) in zip(entity.ownRelationships, relationships) {
                let place = "\(file): \(name).\(relationship.name)"
                #expect(relationship.destinationEntityName == xml.attribute(forName: "destinationEntity")?.stringValue, "\(place)")
                #expect(relationship.inverseName == xml.attribute(forName: "inverseName")?.stringValue, "\(place)")
                #expect(relationship.isToMany == (xml.attribute(forName: "toMany")?.stringValue == "YES"), "\(place)")
                #expect(relationship.isOrdered == (xml.attribute(forName: "ordered")?.stringValue == "YES"), "\(place)")
                #expect(relationship.isOptional == (xml.attribute(forName: "optional")?.stringValue == "YES"), "\(place)")
                #expect(relationship.deleteRule.xcodeName == (xml.attribute(forName: "deletionRule")?.stringValue ?? "Nullify"), "\(place)")
            }
            let userInfo = element.elements(forName: "userInfo").first?.elements(forName: "entry") ?? []
            #expect(entity.userInfo.count == userInfo.count, "\(file): \(name) userInfo")
        }
        let templates = try document.nodes(forXPath: "/model/fetchRequest")
        #expect(model.fetchRequestTemplates.count == templates.count)
        #expect(model.versionHash.count == 64)
    }

    @Test("Details: templates, userInfo with quotes, ordered, transient, constraints, transformers, indexes")
    func fixtureDetails() throws {
        let dir = SampleModels.realModelsDirectory
        let mogenerator = try XcodeModelReader.read(at: "\(dir)/rentzsch__mogenerator__test.xcdatamodel.contents")
        #expect(mogenerator.fetchRequestTemplates.keys.sorted() == ["allHumans", "byHumanName", "byParent", "byParentName", "oneByHumanName"])
        #expect(mogenerator.fetchRequestTemplate(named: "byParentName")?.predicate == "parent.parentName == $parentName")
        #expect(mogenerator.fetchRequestTemplate(named: "allHumans")?.predicate == nil)
        #expect(mogenerator.entity(named: "Human")?.userInfo["key with.dots..."] == "value with \"quotes\"")
        #expect(mogenerator.entity(named: "Parent")?.relationship(named: "orderedChildren")?.isOrdered == true)
        #expect(mogenerator.entity(named: "Parent")?.attribute(named: "myInt16Transient")?.isTransient == true)
        #expect(mogenerator.entity(named: "Parent")?.properties.first?.name == "age", "Parent inherits Human's properties first")
        #expect(mogenerator.entity(named: "Human")?.attribute(named: "age")?.validation.minimum == .integer(0))
        #expect(mogenerator.entity(named: "Human")?.subentityNames == ["Child", "Parent", "Uncle"])

        let plus = try XcodeModelReader.read(at: "\(dir)/alemar11__CoreDataPlus__SampleModel.xcdatamodel.contents")
        #expect(plus.entity(named: "Person")?.uniquenessConstraints == [["firstName", "lastName"]])
        #expect(plus.entity(named: "Car")?.attribute(named: "color")?.valueTransformerName == "ColorTransformer")
        #expect(plus.entity(named: "Person")?.attribute(named: "id")?.preservesValueInHistoryOnDeletion == true)
        #expect(plus.entity(named: "ExpensiveSportCar")?.ancestry == ["Car", "SportCar", "ExpensiveSportCar"])
        #expect(plus.versionIdentifier == "1")

        let store = try XcodeModelReader.read(at: "\(dir)/JohnEstropia__CoreStore__Model.xcdatamodel.contents")
        #expect(store.configurations["Config1"] == ["TestEntity1AAA"])

        let ensembles = try XcodeModelReader.read(at: "\(dir)/drewmccormack__ensembles__CDEEventStoreModel_2.xcdatamodel.contents")
        #expect(ensembles.entity(named: "CDEEventRevision")?.attribute(named: "revisionNumber")?.isIndexed == true)
        #expect(ensembles.entity(named: "CDEObjectChange")?.relationship(named: "globalIdentifier")?.isOptional == false)

        let directory = try XcodeModelReader.read(at: "\(dir)/ashalkhakov__FreeCoreData__EmployeeDirectory.xcdatamodel.contents")
        #expect(directory.entity(named: "Department")?.relationship(named: "employees")?.deleteRule == .noAction)
        #expect(directory.entity(named: "Employee")?.attribute(named: "salary")?.validation.minimum == .integer(0))

        let idiomatic = try XcodeModelReader.read(at: "\(dir)/drewmccormack__ensembles__Idiomatic_Model_1.xcdatamodel.contents")
        #expect(idiomatic.entity(named: "IDMTag")?.attribute(named: "text")?.validation.minimum == .integer(1), "a string's minValueString is a length")
    }

    // MARK: - Bundles

    @Test("A versioned bundle opens the version .xccurrentversion names")
    func versionedBundle() throws {
        let directory = TemporaryDirectory()
        let bundle = directory.file("Model.xcdatamodeld")
        try writeVersion(bundle, "Model.xcdatamodel", entity: "Old")
        try writeVersion(bundle, "Model 2.xcdatamodel", entity: "New")
        try writeCurrentVersion(bundle, "Model 2.xcdatamodel")
        #expect(try XcodeModelReader.read(at: bundle).entities.map(\.name) == ["New"])
        try writeCurrentVersion(bundle, "Model.xcdatamodel")
        #expect(try XcodeModelReader.read(at: bundle).entities.map(\.name) == ["Old"])
        #expect(try XcodeModelReader.read(at: bundle + "/Model 2.xcdatamodel").entities.map(\.name) == ["New"])
    }

    @Test("Every version of a bundle is read, with its version hash; a single version is one")
    func allVersions() throws {
        let directory = TemporaryDirectory()
        let bundle = directory.file("Model.xcdatamodeld")
        try writeVersion(bundle, "Model.xcdatamodel", entity: "Old")
        try writeVersion(bundle, "Model 2.xcdatamodel", entity: "New")
        try writeCurrentVersion(bundle, "Model 2.xcdatamodel")
        let versions = try XcodeModelReader.readVersions(at: bundle)
        #expect(versions.versions.map(\.name) == ["Model 2", "Model"])
        #expect(versions.currentName == "Model 2")
        #expect(versions.current.entities.map(\.name) == ["New"])
        let old = try XcodeModelReader.read(at: bundle + "/Model.xcdatamodel")
        #expect(versions.model(withVersionHash: old.versionHash)?.entities.map(\.name) == ["Old"])
        #expect(versions.model(withVersionHash: "nope") == nil)
        let single = try XcodeModelReader.readVersions(at: bundle + "/Model.xcdatamodel")
        #expect(single.versions.count == 1 && single.currentName == "Model" && single.current == old)
    }

    @Test("Renaming IDs are read from elementID (what Xcode writes); a hand-written renamingIdentifier is refused")
    func renamingIdentifiers() throws {
        let xml = """
            <model><entity name="Writer" elementID="Author"><attribute name="fullName" attributeType="String" elementID="name"/>\
            <relationship name="works" toMany="YES" destinationEntity="Writer" elementID="books"/></entity></model>
            """
        let model = try XcodeModelReader.read(xml: Data(xml.utf8), fileName: "r.xml")
        let writer = try #require(model.entity(named: "Writer"))
        #expect(writer.renamingIdentifier == "Author")
        #expect(writer.attribute(named: "fullName")?.renamingIdentifier == "name")
        #expect(writer.relationship(named: "works")?.renamingIdentifier == "books")
        let plain = try XcodeModelReader.read(xml: Data(xml.replacingOccurrences(of: #" elementID="[a-zA-Z]+""#, with: "", options: .regularExpression).utf8),
                                              fileName: "p.xml")
        #expect(plain.versionHash == model.versionHash, "a Renaming ID is not part of the version hash")
        let bad = #"<model><entity name="A"><attribute name="b" attributeType="String" renamingIdentifier="c"/></entity></model>"#
        let error = try #require(throws: ModelError.self) { try XcodeModelReader.read(xml: Data(bad.utf8), fileName: "bad.xml") }
        #expect(error.description.contains("elementID"), "\(error)")
    }

    @Test("The writer's XML reads back as the same model, for every sample model and real model file")
    func writerRoundTrip() throws {
        var models = try ["OrgChart", "Orders", "Company"].map { try SampleModels.load($0) }
        models += try Self.fixtureFiles.map { try XcodeModelReader.read(at: "\(SampleModels.realModelsDirectory)/\($0)") }
        // And one with every detail the reader knows, awkward characters in the texts included.
        let detailed = """
            <model userDefinedModelVersionIdentifier="v &amp; 2"><entity name="A" representedClassName="AClass" versionHashModifier="m" elementID="Old">\
            <attribute name="when" optional="YES" attributeType="Date" defaultDateTimeInterval="12.5" minDateTimeInterval="0" maxDateTimeInterval="99999"/>\
            <attribute name="text" attributeType="String" defaultValueString="a &quot;b&quot; &lt;c&gt;&#10;d" minValueString="1" maxValueString="40" \
            regularExpressionString="[a-z\t]+" indexed="YES" elementID="t"/>\
            <attribute name="n" optional="YES" transient="YES" attributeType="Integer 16" defaultValueString="7" preserveAfterDeletion="YES">\
            <userInfo><entry key="k" value="v &quot;q&quot;"/></userInfo></attribute>\
            <attribute name="blob" optional="YES" attributeType="Transformable" valueTransformerName="T"/>\
            <relationship name="kids" optional="YES" toMany="YES" ordered="YES" minCount="1" maxCount="5" deletionRule="Cascade" destinationEntity="B" \
            inverseName="parent" inverseEntity="B"/>\
            <fetchedProperty name="f" optional="YES"><fetchRequest name="fetchedPropertyFetchRequest" entity="B" predicateString="x &gt; 1"/></fetchedProperty>\
            <uniquenessConstraints><uniquenessConstraint><constraint value="text"/><constraint value="when"/></uniquenessConstraint></uniquenessConstraints>\
            <userInfo><entry key="e" value="1"/></userInfo></entity>\
            <entity name="B" parentEntity="C">\
            <relationship name="parent" optional="YES" maxCount="1" deletionRule="Deny" destinationEntity="A" inverseName="kids" inverseEntity="A"/></entity>\
            <entity name="C" isAbstract="YES"/>\
            <fetchRequest name="all" entity="A" predicateString="text BEGINSWITH 'x'" fetchLimit="3"/>\
            <configuration name="Main"><memberEntity name="A"/><memberEntity name="B"/></configuration>\
            <userInfo><entry key="top" value="yes"/></userInfo></model>
            """
        models.append(try XcodeModelReader.read(xml: Data(detailed.utf8), fileName: "detailed.xml"))
        for model in models {
            let written = XcodeModelWriter.contents(of: model)
            let again = try XcodeModelReader.read(xml: Data(written.utf8), fileName: "written.xml")
            #expect(again == model, "\(written)")
            #expect(again.versionHash == model.versionHash)
        }
    }

    @Test("Without .xccurrentversion a single version is used, several are an error")
    func missingCurrentVersion() throws {
        let directory = TemporaryDirectory()
        let bundle = directory.file("M.xcdatamodeld")
        try writeVersion(bundle, "M.xcdatamodel", entity: "Only")
        #expect(try XcodeModelReader.read(at: bundle).entities.map(\.name) == ["Only"])
        try writeVersion(bundle, "M 2.xcdatamodel", entity: "Other")
        let error = try #require(throws: ModelError.self) { try XcodeModelReader.read(at: bundle) }
        #expect(error.code == .unsupportedFormat)
        #expect(error.description.contains("2 versions"))
        try writeCurrentVersion(bundle, "M 3.xcdatamodel")
        let missing = try #require(throws: ModelError.self) { try XcodeModelReader.read(at: bundle) }
        #expect(missing.description.contains("'M 3.xcdatamodel' is not in the bundle"))
    }

    @Test("An old binary model is refused with a way out")
    func binaryElements() throws {
        let directory = TemporaryDirectory()
        let version = directory.file("Old.xcdatamodel")
        try FileManager.default.createDirectory(atPath: version, withIntermediateDirectories: true)
        try Data([0x62, 0x70, 0x6c, 0x69, 0x73, 0x74]).write(to: URL(fileURLWithPath: version + "/elements"))
        let error = try #require(throws: ModelError.self) { try XcodeModelReader.read(at: version) }
        #expect(error.code == .unsupportedFormat)
        #expect(error.description.contains("binary model"))
        #expect(error.file == version)
    }

    // MARK: - Bad files

    static let badFiles: [(name: String, xml: String, code: ModelError.Code, line: Int?, message: String)] = [
        ("not XML", "<model><entity name=\"A\">", .malformedXML, nil, "not well-formed XML"),
        ("not a model", "<plist/>", .invalidElement, 1, "root element must be <model>"),
        ("unknown type", """
            <model>
              <entity name="A">
                <attribute name="x" attributeType="Composite"/>
              </entity>
            </model>
            """, .invalidElement, 3, "<attribute name=\"x\"> in entity 'A': attributeType 'Composite' is not supported"),
        ("missing type", "<model><entity name=\"A\"><attribute name=\"x\"/></entity></model>", .invalidElement, 1, "'attributeType' is missing"),
        ("missing entity name", "<model><entity/></model>", .invalidElement, 1, "<entity>: the required attribute 'name' is missing"),
        ("bad delete rule", "<model><entity name=\"A\"><relationship name=\"r\" destinationEntity=\"A\" deletionRule=\"Explode\"/></entity></model>",
         .invalidElement, 1, "deletionRule 'Explode'"),
        ("bad flag", "<model><entity name=\"A\"><attribute name=\"x\" attributeType=\"String\" optional=\"maybe\"/></entity></model>",
         .invalidElement, 1, "optional=\"maybe\" must be YES or NO"),
        ("bad default", "<model><entity name=\"A\"><attribute name=\"x\" attributeType=\"Integer 16\" defaultValueString=\"lots\"/></entity></model>",
         .invalidElement, 1, "defaultValueString=\"lots\" is not a valid Integer 16"),
        ("bad count", "<model><entity name=\"A\"><relationship name=\"r\" destinationEntity=\"A\" toMany=\"YES\" maxCount=\"-1\"/></entity></model>",
         .invalidElement, 1, "maxCount=\"-1\""),
        ("derived attribute", "<model><entity name=\"A\"><attribute name=\"x\" attributeType=\"String\" derived=\"YES\"/></entity></model>",
         .invalidElement, 1, "derived=\"YES\" without a derivationExpression"),
        ("unknown child", "<model><entity name=\"A\"><gizmo/></entity></model>", .invalidElement, 1, "<gizmo> in <entity name=\"A\">"),
        ("unknown destination", "<model><entity name=\"A\"><relationship name=\"r\" destinationEntity=\"B\"/></entity></model>",
         .inconsistentModel, nil, "destination entity 'B' does not exist"),
        ("inverse entity mismatch",
         "<model><entity name=\"A\"><relationship name=\"r\" destinationEntity=\"A\" inverseName=\"r\" inverseEntity=\"B\"/></entity></model>",
         .invalidElement, 1, "inverseEntity 'B' differs"),
    ]

    @Test("Bad files get an error naming the file, the line, the element and the problem", arguments: badFiles.indices)
    func badFile(index: Int) {
        let bad = Self.badFiles[index]
        do {
            _ = try XcodeModelReader.read(xml: Data(bad.xml.utf8), fileName: "Bad.xcdatamodel/contents")
            Issue.record("\(bad.name): read without error")
        } catch {
            #expect(error.code == bad.code, "\(bad.name): \(error)")
            #expect(error.file == "Bad.xcdatamodel/contents", "\(bad.name)")
            if let line = bad.line { #expect(error.line == line, "\(bad.name): \(error)") }
            #expect(error.description.hasPrefix("Bad.xcdatamodel/contents"), "\(bad.name): \(error)")
            #expect(error.description.contains(bad.message), "\(bad.name): \(error)")
        }
    }

    @Test func missingPath() {
        let error = #expect(throws: ModelError.self) { try XcodeModelReader.read(at: "/nonexistent/Model.xcdatamodeld") }
        #expect(error?.code == .fileNotFound)
        #expect(error?.file == "/nonexistent/Model.xcdatamodeld")
    }

    @Test("Layout elements are ignored")
    func layoutIgnored() throws {
        let xml = "<model><entity name=\"A\"><fetchIndex name=\"i\">" +
            "<fetchIndexElement property=\"x\" type=\"Binary\" order=\"ascending\"/></fetchIndex></entity>" +
            "<elements><element name=\"A\" positionX=\"1\" positionY=\"2\" width=\"3\" height=\"4\"/></elements></model>"
        #expect(try XcodeModelReader.read(xml: Data(xml.utf8), fileName: "x").entities.map(\.name) == ["A"])
    }

    // MARK: - Helpers

    private func writeVersion(_ bundle: String, _ version: String, entity: String) throws {
        let folder = "\(bundle)/\(version)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        try Data("<model><entity name=\"\(entity)\"/></model>".utf8).write(to: URL(fileURLWithPath: folder + "/contents"))
    }

    private func writeCurrentVersion(_ bundle: String, _ version: String) throws {
        let plist = """
            <?xml version="1.0" encoding="UTF-8"?>
            <plist version="1.0"><dict><key>_XCCurrentVersionName</key><string>\(version)</string></dict></plist>
            """
        try Data(plist.utf8).write(to: URL(fileURLWithPath: bundle + "/.xccurrentversion"))
    }
}
