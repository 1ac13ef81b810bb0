import Testing
import FerryModel
import FerryStore
import FerryTesting

/// The example of docs/TESTING.md, word for word (kept so by `theDocumentedExampleIsThisFile`).
@Test func notesWrittenOfflineMeetAfterThePartitionHeals() async throws {
    let model = try ManagedObjectModel {
        Entity("Note") { Attribute("text", .string) }
    }
    let fleet = try ReplicationFleet(model: model, replicas: ["phone", "laptop", "server"])

    // The phone goes offline and writes; so does the laptop.
    fleet.partition(["phone"], from: ["laptop", "server"])
    for (replica, text) in [("phone", "on the train"), ("laptop", "at the desk")] {
        let context = fleet.container(replica).newContext()
        let note = try context.insert(entityName: "Note")
        try note.setValue(text, forKey: "text")
        try context.save()
    }
    try await fleet.syncUntilQuiet()
    try fleet.checkConverged(["laptop", "server"])   // the phone is still apart

    fleet.heal()
    try await fleet.syncUntilQuiet()
    try fleet.checkConverged()                        // every replica holds both notes
}

/// docs/TESTING.md shows the test above as it is here.
import Foundation

@Test func theDocumentedExampleIsThisFile() throws {
    let here = URL(fileURLWithPath: #filePath)
    let root = here.deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    let doc = try String(contentsOf: root.appendingPathComponent("docs/TESTING.md"), encoding: .utf8)
    let source = try String(contentsOf: here, encoding: .utf8)
    let example = source.components(separatedBy: "\n/// docs/TESTING.md shows")[0]
        .replacingOccurrences(of: "/// The example of docs/TESTING.md, word for word (kept so by `theDocumentedExampleIsThisFile`).\n", with: "")
    #expect(doc.contains("```swift\n" + example + "```"), "docs/TESTING.md's example and this file differ")
}
