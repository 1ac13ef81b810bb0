import Hummingbird
import Metrics

/// The request context of Ferry's routes: Hummingbird's core context, and the
/// role of the caller's bearer token once ``BearerAuthentication`` has checked it.
public struct FerryRequestContext: RequestContext {
    public var coreContext: CoreRequestContextStorage
    /// What the caller's token may do; nil on routes that need no token.
    public var grant: AccessTokens.Grant?
    /// The caller's token's role; nil on routes that need no token.
    public var role: AccessTokens.Role? { grant?.role }

    public init(source: Source) {
        coreContext = .init(source: source)
        grant = nil
    }

    /// Throws ``APIError/forbidden(_:)`` unless the caller's token allows `permission`.
    package func require(_ permission: AccessTokens.Permission) throws(APIError) {
        guard let role, role.allows(permission) else {
            let what = switch permission {
            case .pull: "pull change sets or snapshots"
            case .push: "push change sets"
            case .admin: "do this (it needs an admin token)"
            }
            Counter(label: "ferry_requests_forbidden_total", dimensions: [("reason", "role")]).increment()
            logger.warning("refused a request beyond its token's role",
                           metadata: ["needs": .string(permission.rawValue), "role": .string(role?.rawValue ?? "none")])
            throw .forbidden("this token may not \(what): the tokens file gives it the role '\(role?.rawValue ?? "none")'")
        }
    }
}
