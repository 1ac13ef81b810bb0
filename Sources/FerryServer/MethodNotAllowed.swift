import Hummingbird

/// Answers 405 Method Not Allowed, with an `Allow` header, when a request names
/// one of the API's paths with a method that path does not take (the router
/// alone would say 404, as if the path did not exist).
package struct MethodNotAllowedMiddleware<Context: RequestContext>: RouterMiddleware {
    /// Path → the methods it takes.
    let allowed: [String: [HTTPRequest.Method]]

    package init(allowed: [String: [HTTPRequest.Method]]) {
        self.allowed = allowed
    }

    package func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let path = request.uri.path
        if let methods = allowed[path], !methods.contains(request.method), !(request.method == .head && methods.contains(.get)) {
            let list = methods.map(\.rawValue).joined(separator: ", ")
            throw HTTPError(.methodNotAllowed, headers: [.allow: list], message: "\(path) takes \(list), not \(request.method.rawValue)")
        }
        return try await next(request, context)
    }
}
