import FanoutKeys
import Foundation
import Testing

/// SHA-256 over every kind of collection its callers pass, against FIPS 180-2's vectors.
@Suite struct SHA256Tests {
    static let abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    static let empty = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

    @Test func contiguousAndNonContiguousInputsGiveTheSameDigest() {
        #expect(SHA256.hex(SHA256.hash([UInt8]("abc".utf8))) == Self.abc, "an array")
        #expect(SHA256.hex(SHA256.hash("abc".utf8)) == Self.abc, "a native string's UTF-8")
        #expect(SHA256.hex(SHA256.hash(Data("abc".utf8))) == Self.abc, "Data")
        #expect(SHA256.hex(SHA256.hash([UInt8]("xabcx".utf8).dropFirst().dropLast())) == Self.abc, "a slice")
        #expect(SHA256.hex(SHA256.hash(["a", "b", "c"].lazy.map { $0.utf8.first! })) == Self.abc, "a collection with no contiguous storage")
        #expect(SHA256.hex(SHA256.hash([UInt8]())) == Self.empty)
        #expect(SHA256.hex(SHA256.hash(Data())) == Self.empty)
    }
}
