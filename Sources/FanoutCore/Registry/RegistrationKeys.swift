import FanoutModel

/// What a registration looks up, parsed and hashed once: the offered FID (nil when there is none
/// or it is not a valid FID) with its hash, and the token's hash. A batch's items get theirs as
/// they are added (`RegistrationItems`), before the project's lock is taken, and its registration
/// asks for every item's index buckets before registering the first
/// (`InstallationRegistry.prefetch(_:)`).
struct RegistrationKeys {
    let offered: FID?
    let offeredHash: Int?
    /// `InstallationRegistry.tokenHash` of the request's token; nil without one.
    let tokenHash: Int?
    /// The request offers text that is not a FID: a legacy Instance ID counts in a project that
    /// accepts them (`allowingLegacy(of:)`).
    let offersText: Bool

    /// No keys: what a batch holds for an item refused before it was looked up.
    static let none = RegistrationKeys(offered: nil, offeredHash: nil, tokenHash: nil, offersText: false)

    private init(offered: FID?, offeredHash: Int?, tokenHash: Int?, offersText: Bool) {
        self.offered = offered
        self.offeredHash = offeredHash
        self.tokenHash = tokenHash
        self.offersText = offersText
    }

    /// A request's keys. `allowingLegacy`: an offered legacy Instance ID counts. `tokenHash`, when
    /// given, is the request token's, computed earlier.
    init(_ request: borrowing RegistrationRequest, allowingLegacy: Bool, tokenHash: Int? = nil) {
        self.init(request, offered: request.offered?.fid(allowingLegacy: allowingLegacy), tokenHash: tokenHash)
    }

    /// A logged registration's keys: its FID, parsed when it was logged, is the offered one.
    init(_ request: RegistrationRequest, logged fid: FID) {
        self.init(request, offered: fid, tokenHash: nil)
    }

    private init(_ request: borrowing RegistrationRequest, offered: FID?, tokenHash: Int?) {
        self.offered = offered
        self.offeredHash = offered?.hashValue
        // A token's hash reads all of its bytes (SipHash): once per registration.
        self.tokenHash = request.token.map { token in tokenHash ?? InstallationRegistry.tokenHash(token) }
        if case .text? = request.offered { self.offersText = true } else { self.offersText = false }
    }

    /// These keys of `request`, made refusing legacy Instance IDs, as a project that accepts
    /// them reads them.
    func allowingLegacy(of request: RegistrationRequest) -> RegistrationKeys {
        self.offersText ? RegistrationKeys(request, allowingLegacy: true, tokenHash: self.tokenHash) : self
    }
}
