#include "CFanoutIntrinsics.h"

#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>

// One SipHash round on eight states at once (one per 64-bit lane).
#define FANOUT_SIP_ROUND(v0, v1, v2, v3)      \
    do {                                      \
        v0 = _mm512_add_epi64(v0, v1);        \
        v1 = _mm512_rol_epi64(v1, 13);        \
        v1 = _mm512_xor_si512(v1, v0);        \
        v0 = _mm512_rol_epi64(v0, 32);        \
        v2 = _mm512_add_epi64(v2, v3);        \
        v3 = _mm512_rol_epi64(v3, 16);        \
        v3 = _mm512_xor_si512(v3, v2);        \
        v0 = _mm512_add_epi64(v0, v3);        \
        v3 = _mm512_rol_epi64(v3, 21);        \
        v3 = _mm512_xor_si512(v3, v0);        \
        v2 = _mm512_add_epi64(v2, v1);        \
        v1 = _mm512_rol_epi64(v1, 17);        \
        v1 = _mm512_xor_si512(v1, v2);        \
        v2 = _mm512_rol_epi64(v2, 32);        \
    } while (0)

// Word `w` of every lane at once: lanes with more whole words gather theirs, the lane whose last
// word it is takes its tail word (its last bytes under its length's low byte), and lanes already
// finished keep their state (the round is masked to the lanes still absorbing).
__attribute__((target("avx512f")))
void fanout_siphash13_x8_avx512(uint64_t key0, uint64_t key1, const uint8_t *const messages[8], const size_t lengths[8], uint64_t hashes[8]) {
    __m512i v0 = _mm512_set1_epi64((long long)(0x736f6d6570736575ULL ^ key0));
    __m512i v1 = _mm512_set1_epi64((long long)(0x646f72616e646f6dULL ^ key1));
    __m512i v2 = _mm512_set1_epi64((long long)(0x6c7967656e657261ULL ^ key0));
    __m512i v3 = _mm512_set1_epi64((long long)(0x7465646279746573ULL ^ key1));
    uint64_t whole[8];
    uint64_t tail[8];
    size_t most = 0;
    for (int lane = 0; lane < 8; lane++) {
        size_t words = lengths[lane] / 8;
        uint64_t last = (uint64_t)lengths[lane] << 56;
        for (size_t byte = 0; byte < (lengths[lane] & 7); byte++) {
            last |= (uint64_t)messages[lane][8 * words + byte] << (8 * byte);
        }
        whole[lane] = words;
        tail[lane] = last;
        most = words > most ? words : most;
    }
    const __m512i wholeWords = _mm512_loadu_si512((const void *)whole);
    const __m512i tails = _mm512_loadu_si512((const void *)tail);
    const __m512i starts = _mm512_loadu_si512((const void *)messages);
    for (size_t word = 0; word <= most; word++) {
        const __m512i index = _mm512_set1_epi64((long long)word);
        const __mmask8 full = _mm512_cmpgt_epu64_mask(wholeWords, index);
        const __mmask8 last = _mm512_cmpeq_epu64_mask(wholeWords, index);
        const __m512i addresses = _mm512_add_epi64(starts, _mm512_set1_epi64((long long)(8 * word)));
        __m512i m = _mm512_mask_i64gather_epi64(_mm512_setzero_si512(), full, addresses, (const void *)0, 1);
        m = _mm512_mask_mov_epi64(m, last, tails);
        __m512i a0 = v0, a1 = v1, a2 = v2, a3 = _mm512_xor_si512(v3, m);
        FANOUT_SIP_ROUND(a0, a1, a2, a3);
        a0 = _mm512_xor_si512(a0, m);
        const __mmask8 absorbing = full | last;
        v0 = _mm512_mask_mov_epi64(v0, absorbing, a0);
        v1 = _mm512_mask_mov_epi64(v1, absorbing, a1);
        v2 = _mm512_mask_mov_epi64(v2, absorbing, a2);
        v3 = _mm512_mask_mov_epi64(v3, absorbing, a3);
    }
    v2 = _mm512_xor_si512(v2, _mm512_set1_epi64(0xff));
    FANOUT_SIP_ROUND(v0, v1, v2, v3);
    FANOUT_SIP_ROUND(v0, v1, v2, v3);
    FANOUT_SIP_ROUND(v0, v1, v2, v3);
    _mm512_storeu_si512((void *)hashes, _mm512_xor_si512(_mm512_xor_si512(v0, v1), _mm512_xor_si512(v2, v3)));
}

#else

void fanout_siphash13_x8_avx512(uint64_t key0, uint64_t key1, const uint8_t *const messages[8], const size_t lengths[8], uint64_t hashes[8]) {
    (void)key0;
    (void)key1;
    (void)messages;
    (void)lengths;
    memset(hashes, 0, 8 * sizeof(uint64_t));
}

#endif
