import Hummingbird

/// The request context of Ferry's routes: Hummingbird's core context, and the
/// role of the caller's bearer token once ``BearerAuthentication`` has checked it.
public struct FerryRequestContext: RequestContext {
    public var coreContext: CoreRequestContextStorage
    /// What the caller's token may do; nil on routes that need no token.
    public var role: AccessTokens.Role?

    public init(source: Source) {
        coreContext = .init(source: source)
        role = nil
    }

    /// Throws ``APIError/forbidden(needs:)`` unless the caller's token has at least `needed`.
    func require(_ needed: AccessTokens.Role) throws(APIError) {
        guard let role, role >= needed else { throw .forbidden(needs: needed) }
    }
}
