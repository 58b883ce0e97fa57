/* x86 SIMD variants of the dot kernels (AVX2+FMA+F16C, AVX-512F/BW),
 * compiled with target attributes and selected at run time by cpuid. */
#include <string.h>

#include "common/dtype.h"
#include "device/kernels.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define AVX2 __attribute__((target("avx2,fma,f16c")))
#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))

AVX2 static inline float hsum256(__m256 v) {
    __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
    lo = _mm_add_ps(lo, hi);
    lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
    lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
    return _mm_cvtss_f32(lo);
}

AVX2 static float dot_f32_avx2(const void *w, const float *x, int k) {
    const float *a = w;
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int i = 0;
    for (; i + 16 <= k; i += 16) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(x + i), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(x + i + 8), s1);
    }
    for (; i + 8 <= k; i += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(x + i), s0);
    float s = hsum256(_mm256_add_ps(s0, s1));
    for (; i < k; i++) s += a[i] * x[i];
    return s;
}

AVX2 static float dot_f16_avx2(const void *w, const float *x, int k) {
    const uint16_t *a = w;
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int i = 0;
    for (; i + 16 <= k; i += 16) {
        __m256 w0 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(a + i)));
        __m256 w1 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(a + i + 8)));
        s0 = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + i), s0);
        s1 = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x + i + 8), s1);
    }
    for (; i + 8 <= k; i += 8)
        s0 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(a + i))), _mm256_loadu_ps(x + i), s0);
    float s = hsum256(_mm256_add_ps(s0, s1));
    for (; i < k; i++) s += slm_f16_to_f32(a[i]) * x[i];
    return s;
}

AVX2 static float dot_q8_0_avx2(const void *w, const float *x, int k) {
    const slm_block_q8_0 *b = w;
    __m256 acc = _mm256_setzero_ps();
    for (int i = 0; i < k / SLM_QK8_0; i++) {
        const float *xb = x + i * SLM_QK8_0;
        __m128i q0 = _mm_loadu_si128((const __m128i *)b[i].qs);
        __m128i q1 = _mm_loadu_si128((const __m128i *)(b[i].qs + 16));
        __m256 w0 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q0));
        __m256 w1 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(q0, 8)));
        __m256 w2 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q1));
        __m256 w3 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(q1, 8)));
        __m256 bs = _mm256_mul_ps(w0, _mm256_loadu_ps(xb));
        bs = _mm256_fmadd_ps(w1, _mm256_loadu_ps(xb + 8), bs);
        bs = _mm256_fmadd_ps(w2, _mm256_loadu_ps(xb + 16), bs);
        bs = _mm256_fmadd_ps(w3, _mm256_loadu_ps(xb + 24), bs);
        uint16_t dh;
        memcpy(&dh, &b[i].d, 2);
        __m256 d = _mm256_set1_ps(_cvtsh_ss(dh));
        acc = _mm256_fmadd_ps(bs, d, acc);
    }
    return hsum256(acc);
}

AVX512 static float dot_f32_avx512(const void *w, const float *x, int k) {
    const float *a = w;
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    int i = 0;
    for (; i + 32 <= k; i += 32) {
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(x + i), s0);
        s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(x + i + 16), s1);
    }
    for (; i + 16 <= k; i += 16) s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(x + i), s0);
    if (i < k) {
        __mmask16 m = (__mmask16)((1u << (k - i)) - 1);
        s1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, x + i), s1);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
}

AVX512 static float dot_f16_avx512(const void *w, const float *x, int k) {
    const uint16_t *a = w;
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    int i = 0;
    for (; i + 32 <= k; i += 32) {
        s0 = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(a + i))), _mm512_loadu_ps(x + i), s0);
        s1 = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(a + i + 16))),
                             _mm512_loadu_ps(x + i + 16), s1);
    }
    for (; i + 16 <= k; i += 16)
        s0 = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(a + i))), _mm512_loadu_ps(x + i), s0);
    if (i < k) {
        __mmask16 m = (__mmask16)((1u << (k - i)) - 1);
        __m512 wv = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, a + i));
        s1 = _mm512_fmadd_ps(wv, _mm512_maskz_loadu_ps(m, x + i), s1);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
}

AVX512 static float dot_q8_0_avx512(const void *w, const float *x, int k) {
    const slm_block_q8_0 *b = w;
    __m512 acc = _mm512_setzero_ps();
    for (int i = 0; i < k / SLM_QK8_0; i++) {
        const float *xb = x + i * SLM_QK8_0;
        __m512 w0 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)b[i].qs)));
        __m512 w1 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(b[i].qs + 16))));
        __m512 bs = _mm512_mul_ps(w0, _mm512_loadu_ps(xb));
        bs = _mm512_fmadd_ps(w1, _mm512_loadu_ps(xb + 16), bs);
        uint16_t dh;
        memcpy(&dh, &b[i].d, 2);
        acc = _mm512_fmadd_ps(bs, _mm512_set1_ps(_cvtsh_ss(dh)), acc);
    }
    return _mm512_reduce_add_ps(acc);
}

static const slm_kernel_set k_avx2 = {"avx2", dot_f32_avx2, dot_f16_avx2, dot_q8_0_avx2};
static const slm_kernel_set k_avx512 = {"avx512", dot_f32_avx512, dot_f16_avx512, dot_q8_0_avx512};

const slm_kernel_set *slm_kernels_avx2(void) {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return &k_avx2;
    return NULL;
}

const slm_kernel_set *slm_kernels_avx512(void) {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl"))
        return &k_avx512;
    return NULL;
}

#else
const slm_kernel_set *slm_kernels_avx2(void) { return NULL; }
const slm_kernel_set *slm_kernels_avx512(void) { return NULL; }
#endif
