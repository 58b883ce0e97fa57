/* A float as three bf16 pieces, x = x0 + x1 + x2, each the nearest-even
 * bf16 (common/dtype.h's slm_f32_to_bf16) of what the ones before leave:
 * every remainder is exact in fp32 and each piece takes 8 of its bits, so
 * the sum is x exactly for |x| >= 2^-100 (below, the bf16 subnormals lose
 * the last bits); |x1| <= 2^-8 |x|, |x2| <= 2^-16 |x| (x2 = 0 for the 11
 * bits of an f16). An infinite or NaN x, or one whose x0 rounds to
 * infinity, is x0 alone (x1 = x2 = 0). How the AMX-BF16 kernels feed fp32
 * values to TDPBF16PS with fp32 products (kernels_amx.c's activations,
 * attention_amx.c's Q, K, V and P): in plain C, and in AVX-512 16 at a time
 * with the same bits (x86-64). */
#ifndef SLM_DEVICE_BF16_SPLIT_H
#define SLM_DEVICE_BF16_SPLIT_H

#include <math.h>
#include <stdint.h>

#include "common/dtype.h"

/* x's pieces into p[0..2]; returns their sum ((0 + x0) + x1) + x2, in fp32 */
static inline float slm_bf16_split3(float x, uint16_t p[3]) {
    float sum = 0.0f, r = x;
    for (int i = 0; i < 3; i++) {
        p[i] = isfinite(r) || i == 0 ? slm_f32_to_bf16(r) : 0;
        const float f = slm_bf16_to_f32(p[i]);
        sum += f, r -= f;
    }
    return sum;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* 16 floats' bits to bf16 in the low halves of the dwords (the high halves
 * 0), as slm_f32_to_bf16: round to nearest even, a NaN quiet. */
__attribute__((target("avx512f"))) static inline __m512i slm_bf16_rne16(__m512i u) {
    const __m512i h = _mm512_srli_epi32(u, 16);
    const __m512i v = _mm512_srli_epi32(
        _mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7FFF), _mm512_and_si512(h, _mm512_set1_epi32(1)))), 16);
    const __mmask16 nan =
        _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7FFFFFFF)), _mm512_set1_epi32(0x7F800000));
    return _mm512_mask_mov_epi32(v, nan, _mm512_or_si512(h, _mm512_set1_epi32(0x40)));
}

/* slm_bf16_split3 of 16 floats: the pieces as slm_bf16_rne16's dwords in
 * p[0..2], the sums returned (the same operations in the same order: the
 * same bits). */
__attribute__((target("avx512f"))) static inline __m512 slm_bf16_split16(__m512 x, __m512i p[3]) {
    const __m512i expo = _mm512_set1_epi32(0x7F80);
    p[0] = slm_bf16_rne16(_mm512_castps_si512(x));
    const __m512 f0 = _mm512_castsi512_ps(_mm512_slli_epi32(p[0], 16));
    const __mmask16 fin = _mm512_cmpneq_epi32_mask(_mm512_and_si512(p[0], expo), expo);
    const __m512 r1 = _mm512_maskz_sub_ps(fin, x, f0);
    p[1] = slm_bf16_rne16(_mm512_castps_si512(r1));
    const __m512 f1 = _mm512_castsi512_ps(_mm512_slli_epi32(p[1], 16));
    const __m512 r2 = _mm512_sub_ps(r1, f1);
    p[2] = slm_bf16_rne16(_mm512_castps_si512(r2));
    const __m512 f2 = _mm512_castsi512_ps(_mm512_slli_epi32(p[2], 16));
    return _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(_mm512_setzero_ps(), f0), f1), f2);
}
#endif

#endif
