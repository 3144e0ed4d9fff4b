public import FanoutModel

/// The `status` byte of the wire protocol (docs/wire-protocol.md section 6).
extension FanoutError.Code {
    /// The status byte; 0 is reserved for OK in per-item result lists.
    public var wireValue: UInt8 {
        switch self {
        case .invalidArgument: return 1
        case .notFound: return 2
        case .unregistered: return 3
        case .alreadyExists: return 4
        case .tooManyTopics: return 5
        case .resourceExhausted: return 6
        case .failedPrecondition: return 7
        case .permissionDenied: return 8
        case .unauthenticated: return 9
        case .unavailable: return 10
        default: return 11
        }
    }

    /// The code for a status byte; an unknown non-zero byte is `INTERNAL`, as the protocol says.
    public init(wireValue: UInt8) {
        switch wireValue {
        case 1: self = .invalidArgument
        case 2: self = .notFound
        case 3: self = .unregistered
        case 4: self = .alreadyExists
        case 5: self = .tooManyTopics
        case 6: self = .resourceExhausted
        case 7: self = .failedPrecondition
        case 8: self = .permissionDenied
        case 9: self = .unauthenticated
        case 10: self = .unavailable
        default: self = .internal
        }
    }
}

extension BatchItemResult {
    /// 0 for ok, the status byte otherwise.
    public var wireValue: UInt8 {
        switch self {
        case .ok: return 0
        case .failed(let code): return code.wireValue
        }
    }

    public init(wireValue: UInt8) {
        self = wireValue == 0 ? .ok : .failed(FanoutError.Code(wireValue: wireValue))
    }
}
