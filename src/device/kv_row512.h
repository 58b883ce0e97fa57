/* One f16 or q8_0 KV row of head_dim elements as floats with AVX-512
 * (F16C conversion; q8_0: int8 widened and scaled per 32-element block):
 * shared by the per-row, block and decode attention entries. Include after
 * <immintrin.h> and common/dtype.h, x86-64 only. */
#ifndef SLM_DEVICE_KV_ROW512_H
#define SLM_DEVICE_KV_ROW512_H

#include <string.h>

__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c"))) static inline void
slm_kv_row512(int kv_type, int hd, const uint8_t *r, float *o) {
    if (kv_type == SLM_F16) {
        for (int v = 0; v < hd / 16; v++)
            _mm512_storeu_ps(o + 16 * v, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(r + 32 * v))));
        return;
    }
    for (int b = 0; b < hd / 32; b++) { /* q8_0: 34-byte blocks, f16 scale then 32 int8 */
        const uint8_t *blk = r + (size_t)b * sizeof(slm_block_q8_0);
        uint16_t h;
        memcpy(&h, blk, 2);
        const __m512 d = _mm512_set1_ps(_cvtsh_ss(h));
        for (int u = 0; u < 2; u++) {
            const __m512i q = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(const void *)(blk + 2 + 16 * u)));
            _mm512_storeu_ps(o + 32 * b + 16 * u, _mm512_mul_ps(_mm512_cvtepi32_ps(q), d));
        }
    }
}

#endif
