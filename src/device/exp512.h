/* exp(x) on 16 floats with AVX-512F, for x <= 0 (a score minus its running
 * max): x = n ln2 + r, |r| <= ln2/2 (ln2 in two parts), exp(r) by Cephes'
 * degree-7 polynomial, then 2^n (scalef: subnormal results rounded, 0 from
 * x ~ -104). Measured over every float in [-87, 0]: relative error <=
 * 1.2e-7 (2^-23; glibc's expf 6e-8); test_amx_attention holds it to 2^-22.
 * A NaN stays a NaN. Shared by the AVX-512 attention (attention.c) and the
 * AMX attention's softmax (attention_amx.c); include after <immintrin.h>,
 * x86-64 only. */
#ifndef SLM_DEVICE_EXP512_H
#define SLM_DEVICE_EXP512_H

#include <immintrin.h>

__attribute__((target("avx512f"))) static inline __m512 slm_exp512(__m512 x) {
    x = _mm512_max_ps(_mm512_set1_ps(-104.0f), x); /* max(c, NaN) is the NaN */
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    return _mm512_scalef_ps(p, n);
}

#endif
