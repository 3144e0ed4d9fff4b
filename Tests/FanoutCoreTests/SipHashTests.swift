import FanoutCore
import FanoutTestSupport
import Testing

@Suite("SipHash")
struct SipHashTests {
    /// The reference implementation's SipHash-2-4 vectors (key 00 01 ... 0f, message 00 01 ... n-1,
    /// n from 0): every tail length and several whole words, through the same code as `hash13`.
    @Test func matchesTheReferenceVectors() {
        let expected: [UInt64] = [
            0x726f_db47_dd0e_0e31, 0x74f8_39c5_93dc_67fd, 0x0d6c_8009_d9a9_4f5a, 0x8567_6696_d7fb_7e2d,
            0xcf27_94e0_2771_87b7, 0x1876_5564_cd99_a68d, 0xcbc9_466e_58fe_e3ce, 0xab02_00f5_8b01_d137,
            0x93f5_f579_9a93_2462, 0x9e00_82df_0ba9_e4b0, 0x7a5d_bbc5_94dd_b9f3, 0xf4b3_2f46_226b_ada7,
            0x751e_8fbc_860e_e5fb, 0x14ea_5627_c084_3d90, 0xf723_ca90_8e7a_f2ee, 0xa129_ca61_49be_45e5,
            0x3f2a_cc7f_57c2_9bdb, 0x699a_e9f5_2cbe_4794, 0x4bc1_b3f0_968d_d39c, 0xbb6d_c91d_a779_61bd,
            0xbed6_5cf2_1aa2_ee98, 0xd0f2_cbb0_2e3b_67c7, 0x9353_6795_e3a3_3e88, 0xa80c_038c_cd5c_cec8,
            0xb8ad_50c6_f649_af94, 0xbce1_92de_8a85_b8ea, 0x17d8_35b8_5bbb_15f3, 0x2f2e_6163_076b_cfad,
            0xde4d_aaac_a71d_c9a5,
        ]
        let sip = SipHash(key: (0x0706_0504_0302_0100, 0x0f0e_0d0c_0b0a_0908))
        for (length, value) in expected.enumerated() {
            let message = (0..<length).map { UInt8($0) }
            let hash = message.withUnsafeBytes { sip.hash($0, compressionRounds: 2, finalizationRounds: 4) }
            #expect(hash == value, "length \(length)")
        }
    }

    /// SipHash-1-3 with key zero is what `Hasher` gives with `SWIFT_DETERMINISTIC_HASHING=1` (seed
    /// zero): these are its values, recorded once, for bytes `i * 31 + 7` of each length.
    @Test func hash13IsHashersSipHash() {
        let expected: [(length: Int, hash: UInt64)] = [
            (0, 0xd1fb_a762_150c_532c), (1, 0xfff3_eb0c_7071_97bf), (7, 0x4f17_0612_2bfd_8504),
            (8, 0x1bae_ec38_bf23_7654), (9, 0x8630_bb14_93b9_90aa), (15, 0x9723_d18c_8d93_83f8),
            (16, 0x2566_751b_c909_0402), (63, 0x85a2_7054_d08d_6e78), (163, 0xc58f_110d_7c14_0333),
            (200, 0x3091_f5b8_5866_9f3d),
        ]
        let sip = SipHash(key: (0, 0))
        for (length, value) in expected {
            let message = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
            #expect(message.withUnsafeBytes { sip.hash13($0) } == value, "length \(length)")
        }
    }

    /// The process's key is random: two keys hash the same token differently.
    @Test func theKeyChangesTheHash() {
        let token = Array("a-token:APA91b".utf8)
        let hashes = token.withUnsafeBytes { bytes in
            (SipHash(key: (1, 2)).hash13(bytes), SipHash(key: (1, 3)).hash13(bytes), SipHash.process.hash13(bytes))
        }
        #expect(hashes.0 != hashes.1)
        #expect(hashes.0 != hashes.2)
    }

    /// Each way this CPU hashes a batch gives what `hash13` gives each message: messages of every
    /// length from 0 to 300 bytes, mixed in one batch (the lanes of eight finish at different
    /// words), in batches of 0 to 40 (a remainder of fewer than eight), at offsets of every
    /// alignment, under random keys.
    @Test(arguments: SipHash.Batches.available)
    func batchesHashAsOneAtATime(implementation: SipHash.Batches) {
        var random = SeededRandomNumberGenerator(seed: 13)
        for _ in 0..<200 {
            let sip = SipHash(key: (random.next(), random.next()))
            var bytes: [UInt8] = []
            var ranges: [Range<Int>] = []
            for _ in 0..<Int.random(in: 0...40, using: &random) {
                bytes.append(contentsOf: (0..<Int.random(in: 0...3, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) })
                let start = bytes.count
                bytes.append(contentsOf: (0..<Int.random(in: 0...300, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) })
                ranges.append(start..<bytes.count)
            }
            bytes.withUnsafeBytes { bytes in
                let expected = ranges.map { sip.hash13(UnsafeRawBufferPointer(rebasing: bytes[$0])) }
                #expect(sip.hashes13(of: ranges, in: bytes, using: implementation) == expected)
            }
        }
    }
}
