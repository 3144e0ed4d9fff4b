internal import FanoutKeys
internal import FanoutWire

/// Who a connection speaks for, once HELLO has proven it.
enum Principal: Equatable {
    /// An API key, in the role the connection asked for.
    case key(APIKey, role: Hello.Role)
    /// An installation, by its auth token.
    case device(InstallationClaims)
    /// An installation, by its refresh token.
    case refresh(RefreshToken)

    var kind: Permissions.Principal {
        switch self {
        case .key(_, let role): return Permissions.Principal(role: role)
        case .device: return .device
        case .refresh: return .refresh
        }
    }

    /// The projects it may name.
    var projects: APIKey.Projects {
        switch self {
        case .key(let key, _): return key.projects
        case .device(let claims): return .only([claims.project])
        case .refresh(let token): return .only([token.project])
        }
    }

    /// The installation it is, for a device: project and FID.
    var installation: (project: String, fid: String)? {
        switch self {
        case .key: return nil
        case .device(let claims): return (claims.project, claims.fid)
        case .refresh(let token): return (token.project, token.fid)
        }
    }

    /// When its credential stops being valid (UNIX seconds), if it does.
    var expiresAt: Int64? {
        if case .device(let claims) = self { return claims.expiresAt }
        return nil
    }
}
