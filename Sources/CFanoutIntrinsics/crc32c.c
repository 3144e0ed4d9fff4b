#include "CFanoutIntrinsics.h"

#include <string.h>

#if defined(__x86_64__)
#include <cpuid.h>
#include <nmmintrin.h>

bool fanout_crc32c_has_sse42(void) {
    unsigned int eax, ebx, ecx, edx;
    return __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_SSE4_2) != 0;
}

// The CPU's `crc32` instruction computes CRC-32C (Castagnoli) on the reflected, inverted state,
// as the table version does: 8 bytes per instruction, then the tail a byte at a time.
__attribute__((target("sse4.2")))
uint32_t fanout_crc32c_sse42(uint32_t crc, const uint8_t *bytes, size_t count) {
    uint64_t state = (uint32_t)~crc;
    while (count >= 8) {
        uint64_t word;
        memcpy(&word, bytes, 8);
        state = _mm_crc32_u64(state, word);
        bytes += 8;
        count -= 8;
    }
    uint32_t narrow = (uint32_t)state;
    while (count > 0) {
        narrow = _mm_crc32_u8(narrow, *bytes);
        bytes++;
        count--;
    }
    return ~narrow;
}

#else

bool fanout_crc32c_has_sse42(void) {
    return false;
}

uint32_t fanout_crc32c_sse42(uint32_t crc, const uint8_t *bytes, size_t count) {
    (void)bytes;
    (void)count;
    return crc;
}

#endif
