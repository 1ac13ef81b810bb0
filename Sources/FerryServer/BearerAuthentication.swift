import Hummingbird

/// Checks `Authorization: Bearer TOKEN` against the tokens file and puts the
/// token's grant in the request context; a missing or unknown token is 401
/// without detail (``APIError/unauthorized``).
package struct BearerAuthentication: RouterMiddleware {
    package typealias Context = FerryRequestContext
    package let tokens: AccessTokens

    package init(tokens: AccessTokens) {
        self.tokens = tokens
    }

    package func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let header = request.headers[.authorization], header.hasPrefix("Bearer "),
              let grant = tokens.grant(of: String(header.dropFirst("Bearer ".count))) else {
            throw APIError.unauthorized
        }
        var context = context
        context.grant = grant
        return try await next(request, context)
    }
}
