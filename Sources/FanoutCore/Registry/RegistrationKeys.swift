import FanoutModel

/// What a registration looks up, parsed and hashed once: the offered FID (nil when there is none
/// or it is not a valid FID) with its hash, and the token's hash. A batch makes every item's
/// before registering the first (`InstallationRegistry.prefetch(_:)`), and hashes the tokens before
/// it takes the project's lock.
struct RegistrationKeys {
    let offered: FID?
    let offeredHash: Int?
    /// `InstallationRegistry.tokenHash` of the request's token; nil without one.
    let tokenHash: Int?

    /// No keys: what a batch holds for an item refused before it was looked up.
    static let none = RegistrationKeys(offered: nil, offeredHash: nil, tokenHash: nil)

    private init(offered: FID?, offeredHash: Int?, tokenHash: Int?) {
        self.offered = offered
        self.offeredHash = offeredHash
        self.tokenHash = tokenHash
    }

    /// `offering` is an offered FID already parsed (replay), in place of `request.offeredFID`;
    /// `allowingLegacy`: an offered legacy Instance ID counts. `tokenHash`, when given, is the
    /// request token's, computed earlier.
    init(_ request: RegistrationRequest, offering: FID? = nil, allowingLegacy: Bool, tokenHash: Int? = nil) {
        self.offered = offering ?? request.offeredFID.flatMap { FID($0, allowingLegacy: allowingLegacy) }
        self.offeredHash = self.offered?.hashValue
        // A token's hash reads all of its bytes (SipHash): once per registration.
        self.tokenHash = request.token.map { token in tokenHash ?? InstallationRegistry.tokenHash(token) }
    }
}
