/// A batch of registrations as FCM's topic API reads them, each item a FID or a token (the
/// wire's SUBSCRIBE, the Instance ID `batchAdd`): the items that parse go to the engine, and its
/// results are merged with `INVALID_ARGUMENT` for the others, one result per item in input order.
package struct RegistrationBatch: Sendable {
    /// The items that parse, in input order: what the engine's `subscribe` takes.
    package let addresses: [RegistrationAddress]
    /// How many items the request had.
    private let count: Int
    /// The input positions of `addresses`; nil when every item parsed.
    private let positions: [Int]?

    /// Parses `registrations`.
    /// - Throws: `INVALID_ARGUMENT` (field `registrations`) for more than `maximum` items, valid or not.
    package init(parsing registrations: [String], maximum: Int) throws(FanoutError) {
        try EngineConfiguration.checkBatchSize(registrations.count, maximum: maximum)
        var addresses: [RegistrationAddress] = []
        addresses.reserveCapacity(registrations.count)
        var positions: [Int]? = nil
        for (position, registration) in registrations.enumerated() {
            guard let address = RegistrationAddress(parsing: registration) else {
                if positions == nil { positions = Array(0..<position) }
                continue
            }
            addresses.append(address)
            positions?.append(position)
        }
        self.addresses = addresses
        self.count = registrations.count
        self.positions = positions
    }

    /// The results of the whole batch, given the engine's for `addresses`.
    package func results(_ engineResults: [BatchItemResult]) -> [BatchItemResult] {
        guard let positions else { return engineResults }
        var results = [BatchItemResult](repeating: .failed(.invalidArgument), count: self.count)
        for (position, result) in zip(positions, engineResults) { results[position] = result }
        return results
    }
}
