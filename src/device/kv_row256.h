/* AVX2 helpers shared by the attention entries (attention.c and
 * attention_decode_avx2.c): one f16 or q8_0 KV row of head_dim elements as
 * floats (F16C conversion; q8_0: int8 widened and scaled per 32-element
 * block), and exp on 8 floats. Include after <immintrin.h> and
 * common/dtype.h, x86-64 only. */
#ifndef SLM_DEVICE_KV_ROW256_H
#define SLM_DEVICE_KV_ROW256_H

#include <string.h>

__attribute__((target("avx2,fma,f16c"))) static inline void slm_kv_row256(int kv_type, int hd, const uint8_t *r,
                                                                         float *o) {
    if (kv_type == SLM_F16) {
        for (int v = 0; v < hd / 8; v++)
            _mm256_storeu_ps(o + 8 * v, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(r + 16 * v))));
        return;
    }
    for (int b = 0; b < hd / 32; b++) { /* q8_0: 34-byte blocks, f16 scale then 32 int8 */
        const uint8_t *blk = r + (size_t)b * sizeof(slm_block_q8_0);
        uint16_t h;
        memcpy(&h, blk, 2);
        const __m256 d = _mm256_set1_ps(_cvtsh_ss(h));
        for (int u = 0; u < 4; u++) {
            const __m256i q = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)(blk + 2 + 8 * u)));
            _mm256_storeu_ps(o + 32 * b + 8 * u, _mm256_mul_ps(_mm256_cvtepi32_ps(q), d));
        }
    }
}

/* exp(x) on 8 floats for x <= 0 (a score minus its running max), the steps
 * of exp512.h at 8 lanes: x = n ln2 + r (ln2 in two parts), Cephes'
 * degree-7 polynomial, then 2^n built in the exponent bits. Below x = -87
 * (where 2^n would leave the normal range) the result is 0; a NaN stays a
 * NaN (maxps returns its second operand when either is a NaN). */
__attribute__((target("avx2,fma"))) static inline __m256 slm_exp256(__m256 x) {
    const __m256 xc = _mm256_max_ps(_mm256_set1_ps(-87.0f), x);
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), xc);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    /* 2^n for n in [-126, 0] (the NaN lane's garbage is multiplied by a NaN) */
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    const __m256 y = _mm256_mul_ps(p, _mm256_castsi256_ps(e));
    return _mm256_andnot_ps(_mm256_cmp_ps(x, _mm256_set1_ps(-87.0f), _CMP_LT_OQ), y);
}

#endif
