/// The users installations are bound to, each kept once and named in the registry's records by a
/// 32-bit number (0: none) instead of a 16-byte `UserID?` per record. A user stays while some
/// installation is bound to it; its number is then reused.
struct InternedUsers {
    /// By number; number 0 is never given.
    private var ids: [UserID?] = [nil]
    /// How many installations are bound to each number's user.
    private var bindings: [UInt32] = [0]
    private var numberByID: [UserID: UInt32] = [:]
    private var freeNumbers: [UInt32] = []

    /// How many users are bound to some installation.
    var count: Int { self.numberByID.count }

    /// The user `number` names; nil for 0.
    func user(_ number: UInt32) -> UserID? {
        self.ids[Int(number)]
    }

    /// The number of `user`, counting one more installation bound to it.
    mutating func bind(_ user: UserID) -> UInt32 {
        if let number = self.numberByID[user] {
            self.bindings[Int(number)] += 1
            return number
        }
        let number: UInt32
        if let free = self.freeNumbers.popLast() {
            number = free
            self.ids[Int(number)] = user
            self.bindings[Int(number)] = 1
        } else {
            number = UInt32(self.ids.count)
            self.ids.append(user)
            self.bindings.append(1)
        }
        self.numberByID[user] = number
        return number
    }

    /// One installation fewer is bound to the user `number` names (nothing for 0).
    mutating func unbind(_ number: UInt32) {
        guard number != 0 else { return }
        self.bindings[Int(number)] -= 1
        guard self.bindings[Int(number)] == 0, let user = self.ids[Int(number)] else { return }
        self.ids[Int(number)] = nil
        self.numberByID[user] = nil
        self.freeNumbers.append(number)
    }
}
