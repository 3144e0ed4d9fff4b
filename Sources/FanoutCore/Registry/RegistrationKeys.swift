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

    /// A request's keys. `allowingLegacy`: an offered legacy Instance ID counts. `tokenHash`, when
    /// given, is the request token's, computed earlier.
    init(_ request: RegistrationRequest, allowingLegacy: Bool, tokenHash: Int? = nil) {
        self.init(request, offered: request.offered?.fid(allowingLegacy: allowingLegacy), tokenHash: tokenHash)
    }

    /// A logged registration's keys: its FID, parsed when it was logged, is the offered one.
    init(_ request: RegistrationRequest, logged fid: FID) {
        self.init(request, offered: fid, tokenHash: nil)
    }

    private init(_ request: RegistrationRequest, offered: FID?, tokenHash: Int?) {
        self.offered = offered
        self.offeredHash = offered?.hashValue
        // A token's hash reads all of its bytes (SipHash): once per registration.
        self.tokenHash = request.token.map { token in tokenHash ?? InstallationRegistry.tokenHash(token) }
    }
}
