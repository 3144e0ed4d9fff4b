/// The platform of an installation; it decides which rendered payload its deliveries carry.
public enum Platform: String, Hashable, Sendable, CaseIterable, CustomStringConvertible {
    case android
    case ios
    case web

    public var description: String { self.rawValue }
}
