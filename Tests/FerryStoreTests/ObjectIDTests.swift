import Foundation
import Testing
import FerryModel
import FerryStore
import FerryTestSupport

@Suite("Object IDs and URIs")
struct ObjectIDTests {
    @Test("Namespaces of temporary IDs are random version-4 UUIDs, never two alike")
    func systemRandomUUIDs() {
        let made = (0..<2_000).map { _ in UUID.systemRandom() }
        #expect(Set(made).count == made.count)
        for uuid in made {
            let text = Array(uuid.uuidString)
            #expect(text[14] == "4", "version 4 (random): \(uuid)")
            #expect("89AB".contains(text[19]), "the RFC 9562 variant: \(uuid)")
        }
        // Not a constant pattern: every other nibble takes many values across the UUIDs.
        for position in Array(0..<36) where ![8, 13, 14, 18, 19, 23].contains(position) {
            #expect(Set(made.map { Array($0.uuidString)[position] }).count > 8, "position \(position)")
        }
    }

    @Test("Temporary until the first save, then permanent with the exact URI form", arguments: TestStoreKind.allCases)
    func temporaryThenPermanent(kind: TestStoreKind) throws {
        let test = try TestContainer(model: try SampleModels.load("OrgChart"), kind: kind)
        let context = test.context()
        let person = try context.make("Person", ["name": "John"])
        let temporary = person.objectID
        #expect(temporary.isTemporaryID)
        #expect(temporary.storeIdentifier == nil)
        #expect(temporary.uriString.hasPrefix("x-coredata:///Person/t"))
        try context.save()
        let permanent = person.objectID
        #expect(!permanent.isTemporaryID)
        #expect(permanent != temporary)
        let store = test.container.store.identifier.uuidString
        #expect(permanent.uriString == "x-coredata://\(store)/Person/p1")
        #expect(permanent.uriRepresentation.absoluteString == permanent.uriString)
        #expect(context.registeredObject(for: permanent) === person)
        #expect(context.registeredObject(for: temporary) == nil)
        let second = try context.make("Person")
        try context.save()
        #expect(second.objectID.primaryKey == 2)
    }

    @Test("The URI form is written byte by byte exactly as Core Data spells it, for any key")
    func uriForm() {
        let store = UUID(uuidString: "0A1B2C3D-4E5F-6071-8293-A4B5C6D7E8F9") ?? UUID()
        for key: Int64 in [0, 1, 9, 10, 99, 100, 123_456_789, Int64.max] {
            let id = ObjectID.permanent(entityName: "Über_Entity2", store: store, primaryKey: key)
            #expect(id.uriString == "x-coredata://0A1B2C3D-4E5F-6071-8293-A4B5C6D7E8F9/Über_Entity2/p\(key)")
            var bytes: [UInt8] = Array("prefix:".utf8)
            id.appendURI(to: &bytes)
            #expect(bytes == Array(("prefix:" + id.uriString).utf8))
        }
    }

    @Test("The coordinator resolves a URI back to the same ID", arguments: TestStoreKind.allCases)
    func resolve(kind: TestStoreKind) throws {
        let test = try TestContainer(model: try SampleModels.load("OrgChart"), kind: kind)
        let context = test.context()
        let person = try context.make("Person", ["name": "Jane"])
        try context.save()
        let id = try test.container.managedObjectID(forURIString: person.objectID.uriString)
        #expect(id == person.objectID)
        #expect(try test.container.managedObjectID(forURIRepresentation: person.objectID.uriRepresentation) == id)
        let other = test.context()
        #expect(try other.existingObject(with: id).string("name") == "Jane")
        // Like Core Data, resolving does not check that the row exists.
        let missing = try test.container.managedObjectID(forURIString: "x-coredata://\(test.container.store.identifier.uuidString)/Person/p99")
        #expect(missing.primaryKey == 99)
        #expect(throws: ContextError.objectNotFound(missing.uriString)) { try other.existingObject(with: missing) }
    }

    static let malformed = [
        "http://example.com/Person/p1",
        "x-coredata://not-a-uuid/Person/p1",
        "x-coredata://96EBBFDE-1D44-4B8A-9B57-4A0C5C1B7E00/Person",
        "x-coredata://96EBBFDE-1D44-4B8A-9B57-4A0C5C1B7E00/Person/1",
        "x-coredata://96EBBFDE-1D44-4B8A-9B57-4A0C5C1B7E00/Person/p0",
        "x-coredata://96EBBFDE-1D44-4B8A-9B57-4A0C5C1B7E00/Person/pX",
        "x-coredata://96EBBFDE-1D44-4B8A-9B57-4A0C5C1B7E00//p1",
        "x-coredata://96EBBFDE-1D44-4B8A-9B57-4A0C5C1B7E00/Person/p1/extra",
        "",
    ]

    @Test("Malformed URIs get a clear error", arguments: malformed)
    func malformedURI(uri: String) throws {
        let test = try TestContainer(model: try SampleModels.load("OrgChart"), kind: .memory)
        do {
            _ = try test.container.managedObjectID(forURIString: uri)
            Issue.record("accepted \(uri)")
        } catch {
            guard case .invalidURI(.malformed(let text, let reason)) = error else {
                Issue.record("unexpected \(error)")
                return
            }
            #expect(text == uri)
            #expect(!reason.isEmpty)
            #expect(error.description.contains("is not an object URI"))
        }
    }

    @Test("Foreign, temporary and unknown-entity URIs are refused")
    func foreignURI() throws {
        let test = try TestContainer(model: try SampleModels.load("OrgChart"), kind: .memory)
        let foreign = "x-coredata://96EBBFDE-1D44-4B8A-9B57-4A0C5C1B7E00/Person/p1"
        #expect(throws: ContextError.invalidURI(.foreignStore(foreign, expected: test.container.store.identifier))) {
            try test.container.managedObjectID(forURIString: foreign)
        }
        let temporary = "x-coredata:///Person/t96EBBFDE-1D44-4B8A-9B57-4A0C5C1B7E0012"
        #expect(throws: ContextError.invalidURI(.temporary(temporary))) { try test.container.managedObjectID(forURIString: temporary) }
        let unknown = "x-coredata://\(test.container.store.identifier.uuidString)/Robot/p1"
        #expect(throws: ContextError.invalidURI(.unknownEntity(unknown, entity: "Robot"))) { try test.container.managedObjectID(forURIString: unknown) }
        let error = ContextError.invalidURI(.foreignStore(foreign, expected: test.container.store.identifier))
        #expect(error.description.contains("belongs to another store"))
    }
}

@Suite("Store UUIDs in URIs")
struct URIUUIDTests {
    @Test("The fast UUID reader (URIs, and the history's origins through UUID(parsing:)) agrees with Foundation's, and refuses what it refuses")
    func agrees() {
        for _ in 0..<200 {
            let uuid = UUID()
            #expect(ObjectURIComponents.uuid(uuid.uuidString) == uuid)
            #expect(ObjectURIComponents.uuid(uuid.uuidString.lowercased()) == uuid)
            #expect(UUID(parsing: uuid.uuidString) == uuid && UUID(parsing: uuid.uuidString.lowercased()) == uuid)
        }
        for bad in ["", "not-a-uuid", "0A0B0C0D-0000-4000-8000-00000000000", "0A0B0C0D-0000-4000-8000-00000000000G",
                    "0A0B0C0D00000-4000-8000-000000000001", "0A0B0C0D-0000-4000-8000-0000000000011"] {
            #expect(ObjectURIComponents.uuid(bad) == nil, "\(bad)")
            #expect(UUID(parsing: bad) == nil, "\(bad)")
            #expect(UUID(uuidString: bad) == nil, "Foundation agrees on \(bad)")
        }
    }
}
