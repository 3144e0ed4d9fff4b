public import FanoutModel

/// A batch's registrations as the engine takes them: each item's request, its keys (the offered
/// FID parsed, both hashes), and the error of each one refused before it reached the engine (a
/// field that did not parse), side by side and read by index. A `Result` per item was bound, a
/// copy with every string retained and released, at each of the batch's passes.
public struct RegistrationItems: Sendable {
    /// Every item's request; a refused item holds a placeholder.
    private(set) var requests: [RegistrationRequest] = []
    /// Every item's refusal, nil for an item to register.
    private(set) var refusals: [FanoutError?] = []
    /// Every item's keys (`.none` for a refused one), made as it is added, before the project's
    /// lock is taken, as in a project that refuses legacy Instance IDs (`keys(allowingLegacy:)`).
    private var madeKeys: [RegistrationKeys] = []
    /// Some item offers text that is not a FID.
    private var offersText = false
    /// Every item's fields as its log record holds them (`WALRecord.EncodedRegistration`),
    /// encoded as it is added, before the project's lock; a refused item's are empty.
    private(set) var encodedFields = BinaryWriter(capacity: 0)
    /// Where each item's encoded fields end in `encodedFields`.
    private var encodedEnds: [Int] = []
    /// The items `reserveCapacity` made room for: the first item's encoding, times this, sizes
    /// `encodedFields` (a 1000-item batch's fields had grown it three times, 90, 180 and then
    /// 360 KB, each a fresh block to copy into).
    private var reservedCount = 0

    /// Stands in for a refused item's request; never registered.
    private static let placeholder = RegistrationRequest(platform: .android, appID: AppID(validated: "-"))

    public init() {}

    /// Items from requests, each refused one with its error.
    public init(_ items: [Result<RegistrationRequest, FanoutError>]) {
        self.reserveCapacity(items.count)
        for item in items {
            switch item {
            case .success(let request): self.append(request)
            case .failure(let error): self.append(refused: error)
            }
        }
    }

    public var count: Int { self.requests.count }

    public mutating func reserveCapacity(_ count: Int) {
        self.requests.reserveCapacity(count)
        self.refusals.reserveCapacity(count)
        self.madeKeys.reserveCapacity(count)
        self.encodedEnds.reserveCapacity(count)
        self.reservedCount = count
    }

    /// An item to register.
    public mutating func append(_ request: consuming RegistrationRequest) {
        let keys = RegistrationKeys(request, allowingLegacy: false)
        self.offersText = self.offersText || keys.offersText
        self.madeKeys.append(keys)
        let isFirstEncoded = self.encodedFields.bytes.isEmpty
        WALRecord.writeRegistrationFields(
            token: request.token, platform: request.platform, appID: request.appID, device: request.device, apnsToken: request.apnsToken,
            into: &self.encodedFields
        )
        if isFirstEncoded && self.reservedCount > 1 {
            // An eighth more than the first item's size for every item: room for longer ones.
            self.encodedFields.reserveCapacity(self.encodedFields.bytes.count * self.reservedCount * 9 / 8)
        }
        self.encodedEnds.append(self.encodedFields.bytes.count)
        self.requests.append(request)
        self.refusals.append(nil)
    }

    /// An item refused before it reached the engine: its result is `error`.
    public mutating func append(refused error: FanoutError) {
        self.requests.append(Self.placeholder)
        self.refusals.append(error)
        self.madeKeys.append(.none)
        self.encodedEnds.append(self.encodedFields.bytes.count)
    }

    /// Calls `body` with each item's index, request and where its encoded fields are in
    /// `encodedFields`, in order. Each request is lent from where the batch holds it, moved out
    /// and back: read in place through the array, it was copied (every reference it holds
    /// retained, then released) because `body` changes memory the compiler cannot tell apart from
    /// the array's. `body` cannot throw, so every request is back before this returns.
    mutating func forEachRequest(_ body: (_ index: Int, _ request: borrowing RegistrationRequest, _ encodedRange: Range<Int>) -> Void) {
        let ends = self.encodedEnds
        self.requests.withUnsafeMutableBufferPointer { requests in
            var start = 0
            for index in requests.indices {
                let request = (requests.baseAddress.unsafelyUnwrapped + index).move()
                body(index, request, start..<ends[index])
                (requests.baseAddress.unsafelyUnwrapped + index).initialize(to: consume request)
                start = ends[index]
            }
        }
    }

    /// Every item's keys, in a project that accepts legacy Instance IDs (`allowingLegacy`) or not.
    func keys(allowingLegacy: Bool) -> [RegistrationKeys] {
        guard allowingLegacy, self.offersText else { return self.madeKeys }
        return self.madeKeys.indices.map { self.madeKeys[$0].allowingLegacy(of: self.requests[$0]) }
    }
}
