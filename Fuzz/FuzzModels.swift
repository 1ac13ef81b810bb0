import Foundation
import FerryModel

/// The repository's sample models, for the fuzz targets.
enum FuzzModels {
    static func load(_ names: [String]) -> [ManagedObjectModel] {
        let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("config/models").path
        return names.map { name in
            do {
                return try XcodeModelReader.read(at: "\(folder)/\(name).xcdatamodeld")
            } catch {
                fatalError("cannot read the sample model \(name): \(error)")
            }
        }
    }
}
