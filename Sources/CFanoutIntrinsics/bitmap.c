#include "CFanoutIntrinsics.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>

bool fanout_simd_has_avx512(void) {
    unsigned int eax, ebx, ecx, edx;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx) || !(ecx & bit_OSXSAVE)) {
        return false;
    }
    // XCR0: the OS saves SSE, AVX and the three AVX-512 states (bits 1, 2, 5, 6, 7).
    unsigned int xcr0_low, xcr0_high;
    __asm__ volatile("xgetbv" : "=a"(xcr0_low), "=d"(xcr0_high) : "c"(0));
    if ((xcr0_low & 0xE6) != 0xE6) {
        return false;
    }
    if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) {
        return false;
    }
    return (ebx & bit_AVX512F) != 0;
}

// Sixteen bits at a time: compress the 16 lanes of consecutive slots by the bits into the low
// lanes of a register (`vpcompressd` to a register; to memory it is slow on some CPUs), store all
// 16 lanes, and advance by the popcount.
__attribute__((target("avx512f,popcnt")))
uint32_t *fanout_simd_decode_bitmap_avx512(const uint64_t *words, size_t word_count, uint32_t base, uint32_t *output) {
    const __m512i step = _mm512_set1_epi32(16);
    __m512i slots = _mm512_add_epi32(
        _mm512_set1_epi32((int)base),
        _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
    for (size_t index = 0; index < word_count; index++) {
        uint64_t word = words[index];
        for (int quarter = 0; quarter < 4; quarter++) {
            __mmask16 bits = (__mmask16)(word >> (16 * quarter));
            _mm512_storeu_si512((void *)output, _mm512_maskz_compress_epi32(bits, slots));
            output += __builtin_popcount((unsigned int)bits);
            slots = _mm512_add_epi32(slots, step);
        }
    }
    return output;
}

#else

bool fanout_simd_has_avx512(void) {
    return false;
}

uint32_t *fanout_simd_decode_bitmap_avx512(const uint64_t *words, size_t word_count, uint32_t base, uint32_t *output) {
    (void)words;
    (void)word_count;
    (void)base;
    return output;
}

#endif
