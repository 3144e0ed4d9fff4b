/// How a request addresses one installation: by FID or by registration token (FCM accepts both).
public enum RegistrationAddress: Hashable, Sendable, CustomStringConvertible {
    case fid(FID)
    case token(RegistrationToken)

    /// Reads a registration as FCM's topic API does ("either FID or FCM token"): a string that is a
    /// valid FID is a FID, anything else that is a valid token is a token; `nil` otherwise.
    public init?(parsing string: String) {
        if let fid = FID(string) {
            self = .fid(fid)
        } else if let token = RegistrationToken(string) {
            self = .token(token)
        } else {
            return nil
        }
    }

    /// Redacted for tokens, as `RegistrationToken.description` is.
    public var description: String {
        switch self {
        case .fid(let fid): return "fid \(fid)"
        case .token(let token): return token.description
        }
    }
}
