/// The installations a consumer receives deliveries for.
public enum ConsumerScope: Sendable {
    /// Specific installations: a device attaches to its own. Their deliveries go to this consumer
    /// rather than to a platform worker while it is attached.
    case installations([RegistrationAddress])
    /// Every installation of a platform: a delivery worker (several may share a platform; each
    /// delivery goes to one of them).
    case platform(Platform)
}
