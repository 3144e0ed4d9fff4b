/// The result for one registration of a batch call (subscribe, unsubscribe), in input order.
public enum BatchItemResult: Hashable, Sendable, CustomStringConvertible {
    case ok
    /// `INVALID_ARGUMENT` (neither a FID nor a token), `UNREGISTERED` (a rotated or deleted token,
    /// a deleted FID), `NOT_FOUND` (no such installation), `TOO_MANY_TOPICS` (the installation is
    /// at its topic limit).
    case failed(FanoutError.Code)

    public var description: String {
        switch self {
        case .ok: return "ok"
        case .failed(let code): return code.name
        }
    }
}
