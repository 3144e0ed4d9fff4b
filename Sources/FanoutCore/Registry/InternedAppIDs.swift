import FanoutModel

/// The app ids of a project's installations, each kept once and named in the registry's records by
/// a 16-bit index (a project has a handful; at most `maximumCount`).
///
/// Every registration looks its app id up. While there are at most `scannedCount`, their bytes sit
/// side by side in one array and the lookup compares them in place: scanning the `AppID`s
/// themselves retained and released each one it read (a few percent of a register batch's CPU),
/// and hashing the app id for the table costs more than a few comparisons.
struct InternedAppIDs {
    static let maximumCount = Int(UInt16.max) + 1
    private static let scannedCount = 8

    /// By index.
    private var ids: [AppID] = []
    private var indexByID: [AppID: UInt16] = [:]
    /// The first `scannedCount` app ids, one after the other, each its length (two bytes, in the
    /// machine's order) and its bytes.
    private var scanned: [UInt8] = []

    var count: Int { self.ids.count }

    /// The app id with index `index`.
    subscript(index: UInt16) -> AppID {
        self.ids[Int(index)]
    }

    /// `appID`'s index, interned now if it is new.
    /// - Throws: `RESOURCE_EXHAUSTED` past `maximumCount` app ids.
    mutating func intern(_ appID: AppID) throws(FanoutError) -> UInt16 {
        if let index = self.index(of: appID) { return index }
        guard self.ids.count < Self.maximumCount else {
            throw FanoutError(.resourceExhausted, "the project has \(Self.maximumCount) apps, the most it can have", field: "appId")
        }
        let index = UInt16(self.ids.count)
        let owned = appID.owned
        self.ids.append(owned)
        self.indexByID[owned] = index
        if self.ids.count <= Self.scannedCount {
            owned.withUTF8 { bytes in
                withUnsafeBytes(of: UInt16(bytes.count)) { self.scanned.append(contentsOf: $0) }
                self.scanned.append(contentsOf: bytes)
            }
        }
        return index
    }

    /// The index of an app id already interned.
    func index(of appID: AppID) -> UInt16? {
        guard self.ids.count <= Self.scannedCount else { return self.indexByID[appID] }
        return Self.index(of: appID, in: self.scanned)
    }

    /// `appID`'s index in `scanned`. (Static: a closure over `self` copied it, retaining each of
    /// its arrays.)
    private static func index(of appID: AppID, in scanned: [UInt8]) -> UInt16? {
        appID.withUTF8 { wanted in
            scanned.withUnsafeBytes { scanned in
                var start = 0
                var index: UInt16 = 0
                while start < scanned.count {
                    let end = start + 2 + Int(scanned.loadUnaligned(fromByteOffset: start, as: UInt16.self))
                    if HeldText.equalBytes(UnsafeRawBufferPointer(rebasing: scanned[(start + 2)..<end]), wanted) { return index }
                    start = end
                    index += 1
                }
                return nil
            }
        }
    }
}
