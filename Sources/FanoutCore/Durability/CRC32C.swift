internal import CFanoutIntrinsics

/// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), as iSCSI, ext4 and most logs use: the
/// CPU's `crc32` instruction where it has one (SSE 4.2), else slice-by-8 tables.
package enum CRC32C {
    /// How a checksum is computed.
    package enum Implementation: Sendable {
        /// Slice-by-8 tables, about 8 bytes per step: any CPU.
        case table
        /// SSE 4.2's `crc32`, 8 bytes per instruction (C, `CFanoutIntrinsics`); only where the CPU has it.
        case sse42

        /// The fastest way this CPU runs.
        package static let best: Implementation = fanout_crc32c_has_sse42() ? .sse42 : .table

        /// Every way this CPU runs.
        package static var available: [Implementation] { Self.best == .sse42 ? [.table, .sse42] : [.table] }
    }

    private static let tables: [[UInt32]] = {
        var tables = [[UInt32]](repeating: [UInt32](repeating: 0, count: 256), count: 8)
        for byte in 0..<256 {
            var crc = UInt32(byte)
            for _ in 0..<8 { crc = crc & 1 != 0 ? (crc >> 1) ^ 0x82F6_3B78 : crc >> 1 }
            tables[0][byte] = crc
        }
        for byte in 0..<256 {
            for slice in 1..<8 {
                let previous = tables[slice - 1][byte]
                tables[slice][byte] = (previous >> 8) ^ tables[0][Int(previous & 0xFF)]
            }
        }
        return tables
    }()

    /// The CRC of `bytes`, continuing from `crc` (pass the result of a previous call to chain).
    package static func checksum(_ bytes: UnsafeRawBufferPointer, continuing crc: UInt32 = 0, using implementation: Implementation = .best) -> UInt32 {
        switch implementation {
        case .sse42:
            guard let start = bytes.baseAddress else { return crc }
            return fanout_crc32c_sse42(crc, start.assumingMemoryBound(to: UInt8.self), bytes.count)
        case .table:
            return Self.tableChecksum(bytes, continuing: crc)
        }
    }

    private static func tableChecksum(_ bytes: UnsafeRawBufferPointer, continuing crc: UInt32) -> UInt32 {
        var crc = ~crc
        let t = Self.tables
        t[0].withUnsafeBufferPointer { t0 in
            t[1].withUnsafeBufferPointer { t1 in
                t[2].withUnsafeBufferPointer { t2 in
                    t[3].withUnsafeBufferPointer { t3 in
                        t[4].withUnsafeBufferPointer { t4 in
                            t[5].withUnsafeBufferPointer { t5 in
                                t[6].withUnsafeBufferPointer { t6 in
                                    t[7].withUnsafeBufferPointer { t7 in
                                        var index = 0
                                        while index + 8 <= bytes.count {
                                            let low = UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: index, as: UInt32.self)) ^ crc
                                            let high = UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: index + 4, as: UInt32.self))
                                            crc = t7[Int(low & 0xFF)] ^ t6[Int((low >> 8) & 0xFF)]
                                                ^ t5[Int((low >> 16) & 0xFF)] ^ t4[Int(low >> 24)]
                                                ^ t3[Int(high & 0xFF)] ^ t2[Int((high >> 8) & 0xFF)]
                                                ^ t1[Int((high >> 16) & 0xFF)] ^ t0[Int(high >> 24)]
                                            index += 8
                                        }
                                        while index < bytes.count {
                                            crc = (crc >> 8) ^ t0[Int((crc ^ UInt32(bytes[index])) & 0xFF)]
                                            index += 1
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        return ~crc
    }

    package static func checksum(_ bytes: [UInt8], continuing crc: UInt32 = 0, using implementation: Implementation = .best) -> UInt32 {
        bytes.withUnsafeBytes { self.checksum($0, continuing: crc, using: implementation) }
    }
}
