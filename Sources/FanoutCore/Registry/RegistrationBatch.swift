/// A batch of registrations as FCM's topic API reads them, each item a FID or a token (the
/// wire's SUBSCRIBE, the Instance ID `batchAdd`, a multicast's tokens), made ready for the
/// registry outside the project's lock: each item classified and hashed, tokens left as bytes in
/// their `RegistrationList`.
package struct RegistrationBatch: Sendable {
    enum Item: Sendable {
        case fid(FID)
        /// A registration token: the list's bytes at the item's position.
        case token
        /// Neither a FID nor a token: answered `INVALID_ARGUMENT`.
        case invalid
    }

    /// Every item's text.
    let list: RegistrationList
    let items: [Item]
    /// Each item's hash in the registry's FID or token index (0 for an invalid item).
    let hashes: [Int]

    /// Reads each of `list`'s strings as `RegistrationAddress(parsing:)` does: a FID if it is
    /// one, else a token if it is one, else invalid.
    /// - Throws: `INVALID_ARGUMENT` (field `registrations`) for more than `maximum` items, valid or not.
    package init(parsing list: RegistrationList, maximum: Int) throws(FanoutError) {
        try EngineConfiguration.checkBatchSize(list.count, maximum: maximum)
        var items: [Item] = []
        var hashes: [Int] = []
        items.reserveCapacity(list.count)
        hashes.reserveCapacity(list.count)
        for index in list.indices {
            list.withBytes(at: index) { bytes in
                if let fid = FID(utf8: bytes) {
                    items.append(.fid(fid))
                    hashes.append(fid.hashValue)
                } else if RegistrationToken.isValid(utf8: bytes, knownVisibleASCII: list.isKnownVisibleASCII) {
                    items.append(.token)
                    hashes.append(0)
                } else {
                    items.append(.invalid)
                    hashes.append(0)
                }
            }
        }
        self.init(list: list, items: items, fidHashes: hashes)
    }

    /// Addresses already parsed (the engine's API), their text copied into one list.
    package init(_ addresses: [RegistrationAddress]) {
        var list = RegistrationList()
        list.reserveCapacity(addresses.count, bytes: addresses.reduce(0) { total, address in
            switch address {
            case .fid(let fid): total + fid.utf8Count
            case .token(let token): total + token.utf8Count
            }
        })
        var items: [Item] = []
        var hashes: [Int] = []
        items.reserveCapacity(addresses.count)
        hashes.reserveCapacity(addresses.count)
        for address in addresses {
            switch address {
            case .fid(let fid):
                fid.withUTF8 { list.append(bytes: $0) }
                items.append(.fid(fid))
                hashes.append(fid.hashValue)
            case .token(let token):
                token.withUTF8 { list.append(bytes: $0) }
                items.append(.token)
                hashes.append(0)
            }
        }
        self.init(list: list, items: items, fidHashes: hashes)
    }

    /// The batch of `items` over `list`, with the FIDs' hashes (0 elsewhere) and the tokens'
    /// hashed here, together: eight at a time where the CPU can.
    private init(list: RegistrationList, items: [Item], fidHashes: [Int]) {
        var hashes = fidHashes
        let tokens = items.indices.filter { if case .token = items[$0] { true } else { false } }
        let tokenHashes = list.withUnsafeBytes { bytes in
            InstallationRegistry.tokenHashes(of: tokens.map(list.byteRange(at:)), in: bytes)
        }
        for (index, hash) in zip(tokens, tokenHashes) {
            hashes[index] = hash
        }
        self.list = list
        self.items = items
        self.hashes = hashes
    }

    package var count: Int { self.items.count }

    /// Calls `body` with the bytes of the item at `index`, in place.
    func withBytes<Result>(at index: Int, _ body: (UnsafeRawBufferPointer) -> Result) -> Result {
        self.list.withBytes(at: index, body)
    }

    /// The item at `index` as an address (a token's as a `String`); nil when invalid.
    package func address(at index: Int) -> RegistrationAddress? {
        switch self.items[index] {
        case .fid(let fid): return .fid(fid)
        case .token: return self.withBytes(at: index) { .token(RegistrationToken(validatedBytes: $0)) }
        case .invalid: return nil
        }
    }
}
