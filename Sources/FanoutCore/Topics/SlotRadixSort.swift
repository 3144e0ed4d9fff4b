/// Sorts slots by their bytes, least significant first (an LSD radix sort): one pass counts every
/// byte's values, then each byte that is not the same in every slot takes one pass that moves the
/// slots into place. A SUBSCRIBE's slots are a few hundred to a thousand random values below a
/// few million, so the top byte is skipped and three passes remain: 635 slots below 300,000 sort
/// in about 5 µs, where `Array.sorted()` (a merge sort with its own buffer) took about 25.
package enum SlotRadixSort {
    /// `slots` in ascending order, repeats kept.
    package static func sorted(_ slots: [UInt32]) -> [UInt32] {
        guard slots.count > 1 else { return slots }
        var source = slots
        var target = [UInt32](repeating: 0, count: slots.count)
        withUnsafeTemporaryAllocation(of: Int.self, capacity: 4 * 256) { counts in
            counts.initialize(repeating: 0)
            source.withUnsafeBufferPointer { values in
                for slot in values {
                    counts[Int(slot & 0xFF)] += 1
                    counts[256 + Int(slot >> 8 & 0xFF)] += 1
                    counts[512 + Int(slot >> 16 & 0xFF)] += 1
                    counts[768 + Int(slot >> 24)] += 1
                }
            }
            for byte in 0..<4 {
                let digits = counts[(byte * 256)..<(byte * 256 + 256)]
                // A byte every slot shares leaves the order as it is.
                if digits.contains(slots.count) { continue }
                var start = 0
                for digit in digits.indices {
                    (counts[digit], start) = (start, start + counts[digit])
                }
                let shift = UInt32(8 * byte)
                let base = byte * 256
                source.withUnsafeBufferPointer { from in
                    target.withUnsafeMutableBufferPointer { to in
                        for slot in from {
                            let digit = base + Int(slot >> shift & 0xFF)
                            to[counts[digit]] = slot
                            counts[digit] += 1
                        }
                    }
                }
                swap(&source, &target)
            }
        }
        return source
    }
}
