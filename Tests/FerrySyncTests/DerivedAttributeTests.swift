import Foundation
import Testing
import FerryModel
import FerryStore
import FerrySync
import FerryTestSupport

/// Derived attributes (issue 22, point 4): computed at save on both stores, kept current when
/// what they read changes, recomputed on replay so that replicas converge, and never recorded
/// in change sets except `now()`, which replicates as a plain attribute.
@Suite("Derived attributes")
struct DerivedAttributeTests {
    static let xml = """
    <?xml version="1.0" encoding="UTF-8" standalone="yes"?>
    <model type="com.apple.IDECoreDataModeler.DataModel" documentVersion="1.0">
        <entity name="Folder" representedClassName="Folder">
            <attribute name="title" optional="YES" attributeType="String"/>
            <attribute name="searchTitle" optional="YES" attributeType="String" derived="YES" derivationExpression="canonical:(title)"/>
            <attribute name="loudTitle" optional="YES" attributeType="String" derived="YES" derivationExpression="uppercase:(title)"/>
            <attribute name="quietTitle" optional="YES" attributeType="String" derived="YES" derivationExpression="lowercase:(title)"/>
            <attribute name="itemCount" optional="YES" attributeType="Integer 64" derived="YES" derivationExpression="items.@count"/>
            <attribute name="total" optional="YES" attributeType="Double" derived="YES" derivationExpression="items.@sum.price"/>
            <attribute name="modified" optional="YES" attributeType="Date" derived="YES" derivationExpression="now()"/>
            <relationship name="items" optional="YES" toMany="YES" deletionRule="Cascade" destinationEntity="Item" inverseName="folder" inverseEntity="Item"/>
        </entity>
        <entity name="Item" representedClassName="Item">
            <attribute name="name" optional="YES" attributeType="String"/>
            <attribute name="price" optional="YES" attributeType="Double"/>
            <attribute name="label" optional="YES" attributeType="String" derived="YES" derivationExpression="name"/>
            <attribute name="folderTitle" optional="YES" attributeType="String" derived="YES" derivationExpression="folder.title"/>
            <relationship name="folder" optional="YES" maxCount="1" deletionRule="Nullify" destinationEntity="Folder" \
    inverseName="items" inverseEntity="Folder"/>
        </entity>
    </model>
    """
    static let model = try! XcodeModelReader.read(xml: Data(xml.utf8), fileName: "Derived.xcdatamodel/contents")

    func value(_ object: ManagedObject?, _ key: String) throws -> Any? {
        try #require(object).value(forKey: key)
    }

    @Test("Each form is computed at save", arguments: Replica.Kind.allCases)
    func computedAtSave(kind: Replica.Kind) throws {
        let replica = try Replica(model: Self.model, kind: kind)
        let context = replica.context
        let before = Date()
        let folder = try context.make("Folder", ["title": "Crème Brûlée"])
        let pie = try context.make("Item", ["name": "pie", "price": 2.5, "folder": folder])
        _ = try context.make("Item", ["name": "tart", "price": 4.0, "folder": folder])
        try context.save()
        context.reset()
        let saved = try context.existingObject(with: folder.objectID)
        #expect(try value(saved, "searchTitle") as? String == "creme brulee")
        #expect(try value(saved, "loudTitle") as? String == "CRÈME BRÛLÉE")
        #expect(try value(saved, "quietTitle") as? String == "crème brûlée")
        #expect(try value(saved, "itemCount") as? Int64 == 2)
        #expect(try value(saved, "total") as? Double == 6.5)
        let modified = try #require(try value(saved, "modified") as? Date)
        #expect(modified >= before.addingTimeInterval(-0.001) && modified <= Date())
        let savedPie = try context.existingObject(with: pie.objectID)
        #expect(try value(savedPie, "label") as? String == "pie")
        #expect(try value(savedPie, "folderTitle") as? String == "Crème Brûlée")
    }

    @Test("A change to what a derived value reads updates it: destination attribute, membership, delete", arguments: Replica.Kind.allCases)
    func keptCurrent(kind: Replica.Kind) throws {
        let replica = try Replica(model: Self.model, kind: kind)
        let context = replica.context
        let folder = try context.make("Folder", ["title": "Inbox"])
        let pie = try context.make("Item", ["name": "pie", "price": 2.5, "folder": folder])
        let tart = try context.make("Item", ["name": "tart", "price": 4.0, "folder": folder])
        try context.save()
        let firstModified = try #require(try value(folder, "modified") as? Date)
        // The folder's title changes: every item's folderTitle follows (found through the inverse).
        try folder.setValue("Archive", forKey: "title")
        try context.save()
        context.reset()
        #expect(try value(context.existingObject(with: pie.objectID), "folderTitle") as? String == "Archive")
        #expect(try value(context.existingObject(with: tart.objectID), "folderTitle") as? String == "Archive")
        // An item's price changes: the folder's sum follows, but its now() stays (the folder itself did not change).
        try context.existingObject(with: tart.objectID).setValue(10.0, forKey: "price")
        try context.save()
        context.reset()
        let reread = try context.existingObject(with: folder.objectID)
        #expect(try value(reread, "total") as? Double == 12.5)
        // An item leaves, another is deleted: count and sum follow.
        try context.existingObject(with: pie.objectID).setValue(nil, forKey: "folder")
        try context.save()
        #expect(try value(context.existingObject(with: folder.objectID), "itemCount") as? Int64 == 1)
        context.delete(try context.existingObject(with: tart.objectID))
        try context.save()
        context.reset()
        let emptied = try context.existingObject(with: folder.objectID)
        #expect(try value(emptied, "itemCount") as? Int64 == 0)
        #expect(try value(emptied, "total") as? Double == 0)
        #expect(try value(context.existingObject(with: pie.objectID), "folderTitle") == nil)
        // The title change was a change of the folder itself: its now() moved then.
        #expect(try #require(try value(emptied, "modified") as? Date) > firstModified)
    }

    @Test("A value set by the app is replaced by the derived one at save")
    func appValueReplaced() throws {
        let replica = try Replica(model: Self.model, kind: .sqlite)
        let folder = try replica.context.make("Folder", ["title": "Inbox", "itemCount": Int64(99)])
        try replica.context.save()
        #expect(try value(folder, "itemCount") as? Int64 == 0)
    }

    @Test("Replicas that add to one folder concurrently converge on the recomputed values; only now() is recorded",
          arguments: Replica.Kind.allCases)
    func replicasConverge(kind: Replica.Kind) throws {
        let a = try Replica(model: Self.model, kind: kind)
        let b = try Replica(model: Self.model, kind: kind)
        let folder = try a.context.make("Folder", ["title": "Shared"])
        try a.context.save()
        try b.pull(from: a)
        b.context.reset()
        // Each side adds an item to the folder without knowing of the other's.
        _ = try a.context.make("Item", ["name": "from a", "price": 1.25, "folder": folder])
        try a.context.save()
        let folderOnB = try #require(try b.object(folder.objectID.uriString))
        _ = try b.context.make("Item", ["name": "from b", "price": 2.0, "folder": folderOnB])
        try folderOnB.setValue("Shared by b", forKey: "title")
        try b.context.save()
        _ = try Replica.exchangeUntilSettled([a, b])
        let dumpA = try a.dump(), dumpB = try b.dump()
        #expect(dumpA == dumpB)
        let folderLine = try #require(dumpA.first { $0.contains("\"entity\":\"Folder\"") })
        #expect(folderLine.contains("\"itemCount\":2"))
        #expect(folderLine.contains("\"total\":3.25"))
        #expect(folderLine.contains("\"searchTitle\":\"shared by b\""))
        #expect(dumpA.filter { $0.contains("\"folderTitle\":\"Shared by b\"") }.count == 2)
        // What every replica derives is not in any change set; now() is, as written by its save.
        for line in try a.store.changeSetLines() + b.store.changeSetLines() {
            for key in ["searchTitle", "loudTitle", "quietTitle", "itemCount", "total", "label", "folderTitle"] {
                #expect(!line.contains("\"\(key)\""), "\(key) recorded in \(line)")
            }
        }
        #expect(try a.store.changeSetLines().contains { $0.contains("\"modified\"") })
    }

    @Test("A change set carrying a value every replica derives is refused as malformed, naming it; nothing is applied")
    func derivedValueRefused() throws {
        let a = try Replica(model: Self.model, kind: .sqlite), b = try Replica(model: Self.model, kind: .sqlite)
        _ = try a.context.make("Folder", ["title": "Inbox"])
        try a.context.save()
        let line = try #require(try a.store.changeSetLines().first)
        let forged = line.replacingOccurrences(of: #""title":"Inbox""#, with: #""itemCount":99,"title":"Inbox""#)
        #expect(forged != line)
        #expect {
            try b.engine.apply(lines: [forged])
        } throws: { error in
            "\(error)".contains("has no recorded property 'itemCount'")
        }
        #expect(try b.store.historyState().vector.isEmpty)
        #expect(try b.pull(from: a).applied == 1, "the genuine one still applies")
    }

    @Test("Replaying without the fast path gives the same values as with it")
    func fastPathOff() throws {
        let a = try Replica(model: Self.model, kind: .sqlite)
        let b = try Replica(model: Self.model, directInserts: false, kind: .sqlite)
        let c = try Replica(model: Self.model, directInserts: true, kind: .sqlite)
        let folder = try a.context.make("Folder", ["title": "Inbox"])
        for index in 0..<3 { _ = try a.context.make("Item", ["name": "item \(index)", "price": Double(index), "folder": folder]) }
        try a.context.save()
        try b.pull(from: a)
        try c.pull(from: a)
        #expect(try b.dump() == a.dump())
        #expect(try c.dump() == a.dump())
    }
}
