@testable import FanoutCore
import FanoutModel
import FanoutTestSupport
import Testing

@Suite("Interned app ids")
struct InternedAppIDsTests {
    /// App ids interned in a random order, again and again, against a dictionary: each keeps the
    /// index it got first and reads back as itself, on both sides of the scanned few (ids that are
    /// prefixes of one another, and of equal length, are told apart).
    @Test(arguments: [3, 4] as [UInt64])
    func indexesMatchTheModel(seed: UInt64) throws {
        var random = SeededRandomNumberGenerator(seed: seed)
        let pool = ["1:1:android:a", "1:1:android:ab", "1:1:android:abc", "1:1:android:b", "1:1:ios:a",
                    "1:2:android:a", "1:12:android:a", "2:1:web:x", "1:1:android:abcd", "1:1:android:c",
                    "9:9:web:zz", "1:1:android:"].map { AppID($0)! }
        var interned = InternedAppIDs()
        var model: [AppID: UInt16] = [:]
        for _ in 0..<400 {
            let appID = pool.randomElement(using: &random)!
            #expect(interned.index(of: appID) == model[appID])
            let index = try interned.intern(appID)
            if let known = model[appID] {
                #expect(index == known)
            } else {
                #expect(Int(index) == model.count)
                model[appID] = index
            }
            #expect(interned.count == model.count)
            #expect(interned[index] == appID)
        }
        #expect(model.count == pool.count)
        for (appID, index) in model { #expect(interned.index(of: appID) == index) }
    }
}
