import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif

/// A minimal element tree with line numbers, enough to read model files.
struct XMLNode {
    var name: String
    var attributes: [String: String]
    var children: [XMLNode]
    var line: Int

    func children(named name: String) -> [XMLNode] { children.filter { $0.name == name } }
    func first(_ name: String) -> XMLNode? { children.first { $0.name == name } }
}

/// Parses XML into an ``XMLNode`` tree, reporting the line of any syntax error.
final class XMLTreeParser: NSObject, XMLParserDelegate {
    private var stack: [XMLNode] = []
    private var root: XMLNode?
    private var parser: XMLParser?

    struct Failure: FerryError {
        /// One kind: a file that is not well-formed XML.
        enum Code: String, Hashable, Sendable {
            /// The XML parser stopped here.
            case malformedXML
        }

        var line: Int
        var reason: String
        var code: Code { .malformedXML }
        var description: String { "line \(line): \(reason)" }
    }

    static func parse(_ data: Data) throws(Failure) -> XMLNode {
        let builder = XMLTreeParser()
        let parser = XMLParser(data: data)
        parser.shouldResolveExternalEntities = false
        parser.delegate = builder
        builder.parser = parser
        let ok = parser.parse()
        guard ok, let root = builder.root else {
            let reason = parser.parserError.map { "\($0.localizedDescription)" } ?? "the document has no root element"
            throw Failure(line: parser.lineNumber, reason: reason)
        }
        return root
    }

    func parser(_ parser: XMLParser, didStartElement elementName: String, namespaceURI: String?,
                qualifiedName qName: String?, attributes attributeDict: [String: String] = [:]) {
        stack.append(XMLNode(name: elementName, attributes: attributeDict, children: [], line: parser.lineNumber))
    }

    func parser(_ parser: XMLParser, didEndElement elementName: String, namespaceURI: String?, qualifiedName qName: String?) {
        guard let node = stack.popLast() else { return }
        if stack.isEmpty {
            root = node
        } else {
            stack[stack.count - 1].children.append(node)
        }
    }
}
