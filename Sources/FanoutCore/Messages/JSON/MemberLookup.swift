/// Finds the members of one object by the keys of another (a platform's `data` override by the
/// message's `data` keys, say). Keys are compared one by one while either side is small; past
/// that, the object's decoded keys go in a dictionary first. Comparing every pair grows with the
/// product of the two sizes, and one send body can hold an object of a hundred thousand keys.
struct MemberLookup {
    private let document: JSONDocument
    private let object: Int?
    /// The object's members by decoded key, when both sides are large.
    private let membersByKey: [String: (key: Int, value: Int)]?

    /// A lookup in the object at `object` (none: nothing is found) for the keys of the object at
    /// `keys`.
    init(_ document: JSONDocument, _ object: Int?, forKeysOf keys: Int?) {
        self.document = document
        self.object = object
        guard let object, let keys, document.count(of: keys, upTo: 17) > 16, document.count(of: object, upTo: 17) > 16 else {
            self.membersByKey = nil
            return
        }
        var membersByKey: [String: (key: Int, value: Int)] = [:]
        membersByKey.reserveCapacity(document.count(of: object))
        for member in document.members(of: object) {
            membersByKey[document.string(at: member.key) ?? ""] = member
        }
        self.membersByKey = membersByKey
    }

    /// The object's member whose key equals (decoded) the string at `key`, if any.
    func member(withKeyEqualTo key: Int) -> (key: Int, value: Int)? {
        guard let object = self.object else { return nil }
        guard let membersByKey = self.membersByKey else { return self.document.member(of: object, withKeyEqualTo: key) }
        return self.document.string(at: key).flatMap { membersByKey[$0] }
    }
}
