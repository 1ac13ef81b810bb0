import Foundation

/// Reads the model files Xcode writes.
///
/// Accepts a versioned bundle (`Name.xcdatamodeld`, whose `.xccurrentversion`
/// names the current version), a single version (`Name.xcdatamodel`, whose
/// `contents` file is XML), or a `contents` XML file itself. Layout-only
/// elements (`elements`, indexes) are ignored; anything that would change
/// the model's meaning but is not supported is an error naming the file,
/// the line, the element and the problem.
public enum XcodeModelReader {
    /// Reads the model at `path`.
    /// - Throws: ``ModelError`` naming the file, line and element at fault.
    public static func read(at path: String) throws(ModelError) -> ManagedObjectModel {
        let url = URL(fileURLWithPath: path)
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory) else {
            throw ModelError(.fileNotFound, "no model file or folder here; pass a .xcdatamodeld folder, a .xcdatamodel folder or its contents file", file: path)
        }
        guard isDirectory.boolValue else {
            return try readContents(at: url, displayPath: path)
        }
        switch url.pathExtension {
        case "xcdatamodeld":
            let version = try currentVersion(ofBundle: url, displayPath: path)
            return try readVersionFolder(url.appendingPathComponent(version), displayPath: path + "/" + version)
        case "xcdatamodel":
            return try readVersionFolder(url, displayPath: path)
        default:
            throw ModelError(.unsupportedFormat, "a folder must be a .xcdatamodeld bundle or a .xcdatamodel version", file: path)
        }
    }

    /// Reads every version at `path`: each version of a `.xcdatamodeld` bundle (sorted by name)
    /// and which is current; a single `.xcdatamodel` or `contents` file is one version.
    /// - Throws: ``ModelError`` naming the file, line and element at fault, in any version.
    public static func readVersions(at path: String) throws(ModelError) -> ModelVersions {
        let url = URL(fileURLWithPath: path)
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory), isDirectory.boolValue,
              url.pathExtension == "xcdatamodeld" else {
            let model = try read(at: path)
            let name = url.pathExtension == "xcdatamodel" ? url.deletingPathExtension().lastPathComponent : "contents"
            return ModelVersions(versions: [.init(name: name, model: model)], currentName: name)
        }
        let current = try currentVersion(ofBundle: url, displayPath: path)
        let folders = ((try? FileManager.default.contentsOfDirectory(atPath: url.path)) ?? []).filter { $0.hasSuffix(".xcdatamodel") }.sorted()
        var versions: [ModelVersions.Version] = []
        for folder in folders {
            let model = try readVersionFolder(url.appendingPathComponent(folder), displayPath: path + "/" + folder)
            versions.append(.init(name: String(folder.dropLast(".xcdatamodel".count)), model: model))
        }
        return ModelVersions(versions: versions, currentName: String(current.dropLast(".xcdatamodel".count)))
    }

    /// Reads model XML held in memory; `fileName` is used in error messages.
    public static func read(xml data: Data, fileName: String) throws(ModelError) -> ManagedObjectModel {
        let root: XMLNode
        do {
            root = try XMLTreeParser.parse(data)
        } catch {
            throw ModelError(.malformedXML, "not well-formed XML: \(error.reason)", file: fileName, line: error.line, cause: error)
        }
        return try XcodeModelInterpreter(file: fileName).model(from: root)
    }

    /// The version folder name that `.xccurrentversion` names, or the only
    /// version when the bundle has just one and no `.xccurrentversion`.
    static func currentVersion(ofBundle url: URL, displayPath: String) throws(ModelError) -> String {
        let marker = url.appendingPathComponent(".xccurrentversion")
        let versions = ((try? FileManager.default.contentsOfDirectory(atPath: url.path)) ?? [])
            .filter { $0.hasSuffix(".xcdatamodel") }.sorted()
        guard let data = FileManager.default.contents(atPath: marker.path) else {
            if versions.count == 1, let only = versions.first { return only }
            throw ModelError(.unsupportedFormat, "the bundle has \(versions.count) versions and no .xccurrentversion file naming the current one",
                             file: displayPath)
        }
        let plist: Any
        do {
            plist = try PropertyListSerialization.propertyList(from: data, format: nil)
        } catch {
            throw ModelError(.malformedXML, "not a property list: \(error.localizedDescription)", file: displayPath + "/.xccurrentversion",
                             cause: error)
        }
        guard let name = (plist as? [String: Any])?["_XCCurrentVersionName"] as? String else {
            throw ModelError(.invalidElement, "missing the _XCCurrentVersionName key", file: displayPath + "/.xccurrentversion")
        }
        guard versions.contains(name) else {
            throw ModelError(.fileNotFound, "the current version '\(name)' is not in the bundle (it has: \(versions.joined(separator: ", ")))",
                             file: displayPath + "/.xccurrentversion")
        }
        return name
    }

    private static func readVersionFolder(_ url: URL, displayPath: String) throws(ModelError) -> ManagedObjectModel {
        let contents = url.appendingPathComponent("contents")
        if FileManager.default.fileExists(atPath: contents.path) {
            return try readContents(at: contents, displayPath: displayPath + "/contents")
        }
        if FileManager.default.fileExists(atPath: url.appendingPathComponent("elements").path) {
            throw ModelError(.unsupportedFormat, "this is an old binary model (an 'elements' file); " +
                             "open it in Xcode and save it again to get an XML 'contents' file", file: displayPath)
        }
        throw ModelError(.fileNotFound, "the version folder has no 'contents' file", file: displayPath)
    }

    private static func readContents(at url: URL, displayPath: String) throws(ModelError) -> ManagedObjectModel {
        guard let data = FileManager.default.contents(atPath: url.path) else {
            throw ModelError(.unreadableFile, "cannot read the file (check its permissions)", file: displayPath)
        }
        return try read(xml: data, fileName: displayPath)
    }
}
