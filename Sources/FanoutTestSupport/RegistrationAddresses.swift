public import FanoutCore

extension Array where Element == String {
    /// Each string as `RegistrationAddress(parsing:)` reads it (a FID, else a token), for tests
    /// that name installations by literal tokens and FIDs. Every string must be one or the other.
    public var addresses: [RegistrationAddress] {
        self.map { string in
            guard let address = RegistrationAddress(parsing: string) else {
                preconditionFailure("a test named neither a FID nor a token: \(string.debugDescription)")
            }
            return address
        }
    }
}
