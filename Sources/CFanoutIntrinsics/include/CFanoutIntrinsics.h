#ifndef C_FANOUT_INTRINSICS_H
#define C_FANOUT_INTRINSICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/// Whether this CPU and OS run AVX-512F (the CPU has it and the OS saves its registers).
bool fanout_simd_has_avx512(void);

/// Writes the position of every set bit of `words` (bit `b` of word `w` is `base + 64 * w + b`),
/// ascending, to `output`, and returns the end. Each store writes 16 slots, so `output` must have
/// room for 16 slots past the last one written. Call only when `fanout_simd_has_avx512()`.
uint32_t *fanout_simd_decode_bitmap_avx512(const uint64_t *words, size_t word_count, uint32_t base, uint32_t *output);

/// SipHash-1-3 under the key (`key0`, `key1`) of eight messages at once, `lengths[i]` bytes at
/// `messages[i]`, into `hashes[i]`: the same values as the scalar function, one message per
/// 64-bit lane. Call only when `fanout_simd_has_avx512()`.
void fanout_siphash13_x8_avx512(uint64_t key0, uint64_t key1, const uint8_t *const messages[8], const size_t lengths[8], uint64_t hashes[8]);

/// Whether this CPU has SSE 4.2's `crc32` instruction.
bool fanout_crc32c_has_sse42(void);

/// The CRC-32C of `count` bytes at `bytes`, continuing from `crc` (the result of a previous call,
/// 0 to start): the same values as the table version. Call only when `fanout_crc32c_has_sse42()`.
uint32_t fanout_crc32c_sse42(uint32_t crc, const uint8_t *bytes, size_t count);

/// Asks the CPU to bring the cache line at `address` in, without waiting for it (never faults).
static inline void fanout_prefetch(const void *address) {
    __builtin_prefetch(address);
}

#endif
