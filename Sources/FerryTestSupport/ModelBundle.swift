import Foundation
import FerryModel

/// Writes a versioned model bundle (`Name.xcdatamodeld`) as Xcode lays it out: one
/// `V.xcdatamodel/contents` per version and `.xccurrentversion` naming the current one.
public enum ModelBundle {
    /// Writes (or rewrites) the bundle at `path` with `versions` (by name, without `.xcdatamodel`).
    public static func write(_ versions: [(name: String, model: ManagedObjectModel)], current: String, to path: String) throws {
        for (name, model) in versions {
            let folder = URL(fileURLWithPath: path).appendingPathComponent(name + ".xcdatamodel")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            try Data(XcodeModelWriter.contents(of: model).utf8).write(to: folder.appendingPathComponent("contents"))
        }
        let plist = """
            <?xml version="1.0" encoding="UTF-8"?>
            <!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
            <plist version="1.0"><dict><key>_XCCurrentVersionName</key><string>\(current).xcdatamodel</string></dict></plist>
            """
        try Data(plist.utf8).write(to: URL(fileURLWithPath: path).appendingPathComponent(".xccurrentversion"))
    }
}
