/// The platform of an installation; it decides which rendered payload its deliveries carry.
public enum Platform: String, Hashable, Sendable, CaseIterable, CustomStringConvertible {
    case android
    case ios
    case web

    public var description: String { self.rawValue }
}

extension Platform {
    /// The platform's number where it is stored or sent as a byte (the log's records, the
    /// registry's slots, the wire protocol's `platform`): 1 android, 2 ios, 3 web; 0 means none.
    /// Never renumber (docs/wal-format.md, docs/wire-protocol.md).
    @inlinable
    package var code: UInt8 {
        switch self {
        case .android: return 1
        case .ios: return 2
        case .web: return 3
        }
    }

    /// The platform with `code`, or `nil` for 0 or an unknown number.
    @inlinable
    package init?(code: UInt8) {
        switch code {
        case 1: self = .android
        case 2: self = .ios
        case 3: self = .web
        default: return nil
        }
    }
}
