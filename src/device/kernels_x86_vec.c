/* x86 vector kernels: RMSNorm, SwiGLU (device/exp512.h's polynomial exp), and activations
 * quantized to int8 blocks of 32 for the integer matrix kernels. */
#include <math.h>

#include "device/kernels_x86.h"

#ifdef SLM_X86
#include "device/exp512.h"

/* A half block's sum of codes: at most 16 x 127 in magnitude for finite
 * activations. NaN and infinities convert to INT_MIN lanes, whose sums wrap to
 * anything; the kernels scale these sums by the weights' offsets and minima in
 * int arithmetic, so they are held to the finite range (such a row's outputs
 * are NaN through its scale either way). */
static inline int32_t hsum_clamp(int h) { return h < -2048 ? -2048 : h > 2048 ? 2048 : h; }

/* The sum of 16 int32 lanes in vector adds, which wrap (a NaN row's INT_MIN
 * lanes; hsum_clamp holds the result): _mm512_reduce_add_epi32 adds in C
 * ints, where such a sum is undefined behaviour. */
AVX512 static inline int hsum512_epi32(__m512i v) {
    const __m256i a = _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
    __m128i b = _mm_add_epi32(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));
    b = _mm_add_epi32(b, _mm_shuffle_epi32(b, 0x4e));
    b = _mm_add_epi32(b, _mm_shuffle_epi32(b, 0xb1));
    return _mm_cvtsi128_si32(b);
}

/* slm_quantize_act_ref, vectorized (same rounding, same results). */
AVX512 void slm_x86_quant_act_avx512(const float *x, size_t ldx, int rows, int k, int offset, uint8_t *q, float *d,
                                    float *s, int32_t *hs) {
    const int nb = k / 32;
    const __m128i off = _mm_set1_epi8((char)(offset ? 0x80 : 0));
    for (int i = 0; i < rows; i++) {
        const float *xr = x + (size_t)i * ldx;
        for (int b = 0; b < nb; b++) {
            __m512 v0 = _mm512_loadu_ps(xr + 32 * b), v1 = _mm512_loadu_ps(xr + 32 * b + 16);
            float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
            const float id = amax > 0.0f ? 127.0f / amax : 0.0f;
            __m512 vid = _mm512_set1_ps(id);
            __m512i i0 = _mm512_cvtps_epi32(_mm512_mul_ps(v0, vid)), i1 = _mm512_cvtps_epi32(_mm512_mul_ps(v1, vid));
            const int32_t h0 = hsum_clamp(hsum512_epi32(i0)), h1 = hsum_clamp(hsum512_epi32(i1));
            const int sum = h0 + h1;
            hs[(size_t)i * 2 * nb + 2 * b] = h0;
            hs[(size_t)i * 2 * nb + 2 * b + 1] = h1;
            uint8_t *qb = q + (size_t)i * k + 32 * b;
            _mm_storeu_si128((__m128i *)qb, _mm_xor_si128(_mm512_cvtepi32_epi8(i0), off));
            _mm_storeu_si128((__m128i *)(qb + 16), _mm_xor_si128(_mm512_cvtepi32_epi8(i1), off));
            d[(size_t)i * nb + b] = amax / 127.0f;
            s[(size_t)i * nb + b] = amax / 127.0f * (float)sum;
        }
    }
}

AVX2 static inline int hsum_epi32_avx2(__m256i v) {
    __m128i a4 = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    a4 = _mm_add_epi32(a4, _mm_shuffle_epi32(a4, 0x4e));
    a4 = _mm_add_epi32(a4, _mm_shuffle_epi32(a4, 0xb1));
    return _mm_cvtsi128_si32(a4);
}

AVX2 void slm_x86_quant_act_avx2(const float *x, size_t ldx, int rows, int k, uint8_t *q, float *d, float *s,
                                int32_t *hs) {
    const int nb = k / 32;
    const __m256 signbit = _mm256_set1_ps(-0.0f);
    for (int i = 0; i < rows; i++) {
        const float *xr = x + (size_t)i * ldx;
        for (int b = 0; b < nb; b++) {
            __m256 v[4], m = _mm256_setzero_ps();
            for (int j = 0; j < 4; j++) {
                v[j] = _mm256_loadu_ps(xr + 32 * b + 8 * j);
                m = _mm256_max_ps(m, _mm256_andnot_ps(signbit, v[j]));
            }
            __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
            m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
            m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
            const float amax = _mm_cvtss_f32(m4);
            const float id = amax > 0.0f ? 127.0f / amax : 0.0f;
            __m256 vid = _mm256_set1_ps(id);
            __m256i iv[4];
            for (int j = 0; j < 4; j++) iv[j] = _mm256_cvtps_epi32(_mm256_mul_ps(v[j], vid));
            const int32_t h0 = hsum_clamp(hsum_epi32_avx2(_mm256_add_epi32(iv[0], iv[1])));
            const int32_t h1 = hsum_clamp(hsum_epi32_avx2(_mm256_add_epi32(iv[2], iv[3])));
            hs[(size_t)i * 2 * nb + 2 * b] = h0;
            hs[(size_t)i * 2 * nb + 2 * b + 1] = h1;
            /* pack 32 int32 -> 32 int8 in order */
            __m256i p01 = _mm256_packs_epi32(iv[0], iv[1]), p23 = _mm256_packs_epi32(iv[2], iv[3]);
            __m256i p = _mm256_packs_epi16(p01, p23);
            p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
            _mm256_storeu_si256((__m256i *)(q + (size_t)i * k + 32 * b), p);
            d[(size_t)i * nb + b] = amax / 127.0f;
            s[(size_t)i * nb + b] = amax / 127.0f * (float)(h0 + h1);
        }
    }
}

/* ---- vector kernels ---------------------------------------------------------
 * silu(g) = g / (1 + exp(-g)) for g >= 0 and g * exp(g) / (1 + exp(g)) for
 * g < 0, so exp (device/exp512.h, relative error <= 1.2e-7; 0 below about
 * -104) never overflows. */

/* silu(g) u, or silu(g) where up is NULL */
AVX512 static inline void silu_mul_avx512(const float *gate, const float *up, float *y, int n) {
    for (int i = 0; i < n; i += 16) {
        const __mmask16 m = n - i >= 16 ? 0xFFFF : (__mmask16)((1u << (n - i)) - 1);
        const __m512 g = _mm512_maskz_loadu_ps(m, gate + i);
        const __m512 e = slm_exp512(_mm512_sub_ps(_mm512_setzero_ps(), _mm512_abs_ps(g))); /* exp(-|g|) */
        const __m512 one = _mm512_set1_ps(1.0f);
        const __mmask16 neg = _mm512_cmp_ps_mask(g, _mm512_setzero_ps(), _CMP_LT_OQ);
        const __m512 num = _mm512_mask_mul_ps(g, neg, g, e); /* g or g e^g */
        const __m512 r = _mm512_div_ps(num, _mm512_add_ps(one, e));
        _mm512_mask_storeu_ps(y + i, m, up ? _mm512_mul_ps(r, _mm512_maskz_loadu_ps(m, up + i)) : r);
    }
}

AVX512 void slm_x86_swiglu_avx512(const float *gate, const float *up, float *y, int n) { silu_mul_avx512(gate, up, y, n); }
AVX512 void slm_x86_silu_avx512(const float *x, float *y, int n) { silu_mul_avx512(x, NULL, y, n); }

/* gelu(x) = x/2 (1 + tanh(z)) = x sigmoid(2z), z = sqrt(2/pi) (x + 0.044715 x^3):
 * with t = 2z, x / (1 + exp(-t)) for t >= 0 and x exp(t) / (1 + exp(t)) below,
 * the same stable form as silu. */
AVX512 void slm_x86_geglu_avx512(const float *gate, const float *up, float *y, int n) {
    const __m512 c1 = _mm512_set1_ps(2.0f * 0.7978845608028654f), c3 = _mm512_set1_ps(2.0f * 0.7978845608028654f * 0.044715f);
    const __m512 one = _mm512_set1_ps(1.0f), zero = _mm512_setzero_ps();
    for (int i = 0; i < n; i += 16) {
        const __mmask16 m = n - i >= 16 ? 0xFFFF : (__mmask16)((1u << (n - i)) - 1);
        const __m512 x = _mm512_maskz_loadu_ps(m, gate + i), u = _mm512_maskz_loadu_ps(m, up + i);
        const __m512 t = _mm512_mul_ps(x, _mm512_fmadd_ps(_mm512_mul_ps(x, x), c3, c1)); /* 2z */
        const __m512 e = slm_exp512(_mm512_sub_ps(zero, _mm512_abs_ps(t)));            /* exp(-|t|) */
        const __mmask16 neg = _mm512_cmp_ps_mask(t, zero, _CMP_LT_OQ);
        const __m512 num = _mm512_mask_mul_ps(x, neg, x, e);
        _mm512_mask_storeu_ps(y + i, m, _mm512_mul_ps(_mm512_div_ps(num, _mm512_add_ps(one, e)), u));
    }
}

/* The sums of four vectors' lanes: [sum a0, sum a1, sum a2, sum a3]. */
AVX512 static inline __m128 sum4_avx512(__m512 a0, __m512 a1, __m512 a2, __m512 a3) {
    /* 128-bit lanes folded: t01 = [a0 L0+L2, a0 L1+L3, a1 L0+L2, a1 L1+L3], t23 alike */
    const __m512 t01 = _mm512_add_ps(_mm512_shuffle_f32x4(a0, a1, 0x44), _mm512_shuffle_f32x4(a0, a1, 0xEE));
    const __m512 t23 = _mm512_add_ps(_mm512_shuffle_f32x4(a2, a3, 0x44), _mm512_shuffle_f32x4(a2, a3, 0xEE));
    /* lane i: the four partial sums of a_i */
    __m512 u = _mm512_add_ps(_mm512_shuffle_f32x4(t01, t23, 0x88), _mm512_shuffle_f32x4(t01, t23, 0xDD));
    u = _mm512_add_ps(u, _mm512_permute_ps(u, 0x4E));
    u = _mm512_add_ps(u, _mm512_permute_ps(u, 0xB1));
    return _mm512_castps512_ps128(_mm512_permutexvar_ps(_mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 12, 8, 4, 0), u));
}

#define DR_ROWS 8 /* state rows a pass carries: 16 independent sums hide the FMAs' latency */

/* The gated delta rule, DR_ROWS state rows at a time through all T tokens
 * (the rows stay in L1 while the tokens' q and k stream by). One pass over
 * the rows per token: each row is rewritten as decay m + d k, dotted with q
 * (the output) and with the next token's k (the next token's correction:
 * (decay m).k = decay (m.k)); a first pass dots the rows with the first k.
 * Tails masked; rows past the last multiple of DR_ROWS: the scalar rows. */
AVX512 void slm_x86_delta_rule_avx512(float *M, const slm_delta_steps *d, int S) {
    int j = 0;
    for (; j + DR_ROWS <= S; j += DR_ROWS) {
        float *m = M + (size_t)j * S;
        __m512 ak[DR_ROWS], aq[DR_ROWS];
#pragma GCC unroll 8
        for (int r = 0; r < DR_ROWS; r++) ak[r] = _mm512_setzero_ps();
        for (int i = 0; i < S; i += 16) {
            const __mmask16 mk = S - i >= 16 ? 0xFFFF : (__mmask16)((1u << (S - i)) - 1);
            const __m512 kv = _mm512_maskz_loadu_ps(mk, d->k + i);
#pragma GCC unroll 8
            for (int r = 0; r < DR_ROWS; r++) ak[r] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mk, m + (size_t)r * S + i), kv, ak[r]);
        }
        for (int t = 0; t < d->T; t++) {
            const float *q = d->q + (size_t)t * S, *k = d->k + (size_t)t * S, *v = d->v + (size_t)t * d->ldv + j;
            const float *kn = t + 1 < d->T ? k + S : k; /* the last token: a dot nobody reads */
            /* (v - decay (m.k)) beta for the rows */
            const __m128 dec = _mm_set1_ps(d->decay[t]), beta = _mm_set1_ps(d->beta[t]);
            float dd[DR_ROWS];
            _mm_storeu_ps(dd, _mm_mul_ps(_mm_fnmadd_ps(dec, sum4_avx512(ak[0], ak[1], ak[2], ak[3]), _mm_loadu_ps(v)), beta));
            _mm_storeu_ps(dd + 4, _mm_mul_ps(_mm_fnmadd_ps(dec, sum4_avx512(ak[4], ak[5], ak[6], ak[7]), _mm_loadu_ps(v + 4)), beta));
            const __m512 vdec = _mm512_set1_ps(d->decay[t]);
#pragma GCC unroll 8
            for (int r = 0; r < DR_ROWS; r++) ak[r] = aq[r] = _mm512_setzero_ps();
            for (int i = 0; i < S; i += 16) {
                const __mmask16 mk = S - i >= 16 ? 0xFFFF : (__mmask16)((1u << (S - i)) - 1);
                const __m512 kv = _mm512_maskz_loadu_ps(mk, k + i), qv = _mm512_maskz_loadu_ps(mk, q + i),
                             nv = _mm512_maskz_loadu_ps(mk, kn + i);
#pragma GCC unroll 8
                for (int r = 0; r < DR_ROWS; r++) {
                    float *mr = m + (size_t)r * S + i;
                    const __m512 x = _mm512_fmadd_ps(_mm512_set1_ps(dd[r]), kv, _mm512_mul_ps(vdec, _mm512_maskz_loadu_ps(mk, mr)));
                    _mm512_mask_storeu_ps(mr, mk, x);
                    aq[r] = _mm512_fmadd_ps(x, qv, aq[r]);
                    ak[r] = _mm512_fmadd_ps(x, nv, ak[r]);
                }
            }
            float *o = d->o + (size_t)t * d->ldo + j;
            _mm_storeu_ps(o, sum4_avx512(aq[0], aq[1], aq[2], aq[3]));
            _mm_storeu_ps(o + 4, sum4_avx512(aq[4], aq[5], aq[6], aq[7]));
        }
    }
    for (; j < S; j++)
        for (int t = 0; t < d->T; t++)
            d->o[(size_t)t * d->ldo + j] = slm_k_delta_row(M + (size_t)j * S, d->q + (size_t)t * S, d->k + (size_t)t * S,
                                                           d->v[(size_t)t * d->ldv + j], d->decay[t], d->beta[t], S);
}

AVX512 void slm_x86_rmsnorm_avx512(const float *x, const float *g, float *y, int n, float eps) {
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    int i = 0;
    for (; i + 32 <= n; i += 32) {
        const __m512 a = _mm512_loadu_ps(x + i), b = _mm512_loadu_ps(x + i + 16);
        s0 = _mm512_fmadd_ps(a, a, s0);
        s1 = _mm512_fmadd_ps(b, b, s1);
    }
    for (; i < n; i += 16) {
        const __mmask16 m = n - i >= 16 ? 0xFFFF : (__mmask16)((1u << (n - i)) - 1);
        const __m512 a = _mm512_maskz_loadu_ps(m, x + i);
        s0 = _mm512_fmadd_ps(a, a, s0);
    }
    const float ss = 1.0f / sqrtf(_mm512_reduce_add_ps(_mm512_add_ps(s0, s1)) / (float)n + eps);
    const __m512 vs = _mm512_set1_ps(ss);
    for (i = 0; i < n; i += 16) {
        const __mmask16 m = n - i >= 16 ? 0xFFFF : (__mmask16)((1u << (n - i)) - 1);
        _mm512_mask_storeu_ps(y + i, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, g + i), _mm512_mul_ps(vs, _mm512_maskz_loadu_ps(m, x + i))));
    }
}

AVX2 static inline __m256 exp_neg_avx2(__m256 x) {
    x = _mm256_max_ps(x, _mm256_set1_ps(-87.0f));
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145751953125f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.428606765330187045e-06f), r);
    __m256 p = _mm256_set1_ps(1.0f / 720.0f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    /* 2^n: n in [-126, 0] here, built in the exponent field */
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

AVX2 static inline void silu_mul_avx2(const float *gate, const float *up, float *y, int n) {
    int i = 0;
    const __m256 one = _mm256_set1_ps(1.0f), zero = _mm256_setzero_ps(), sign = _mm256_set1_ps(-0.0f);
    for (; i + 8 <= n; i += 8) {
        const __m256 g = _mm256_loadu_ps(gate + i);
        const __m256 e = exp_neg_avx2(_mm256_or_ps(g, sign)); /* exp(-|g|) */
        const __m256 neg = _mm256_cmp_ps(g, zero, _CMP_LT_OQ);
        const __m256 num = _mm256_blendv_ps(g, _mm256_mul_ps(g, e), neg);
        const __m256 r = _mm256_div_ps(num, _mm256_add_ps(one, e));
        _mm256_storeu_ps(y + i, up ? _mm256_mul_ps(r, _mm256_loadu_ps(up + i)) : r);
    }
    if (i < n) {
        if (up) slm_k_swiglu(gate + i, up + i, y + i, n - i);
        else slm_k_silu(gate + i, y + i, n - i);
    }
}

AVX2 void slm_x86_swiglu_avx2(const float *gate, const float *up, float *y, int n) { silu_mul_avx2(gate, up, y, n); }
AVX2 void slm_x86_silu_avx2(const float *x, float *y, int n) { silu_mul_avx2(x, NULL, y, n); }

AVX2 void slm_x86_geglu_avx2(const float *gate, const float *up, float *y, int n) {
    int i = 0;
    const __m256 one = _mm256_set1_ps(1.0f), zero = _mm256_setzero_ps(), sign = _mm256_set1_ps(-0.0f);
    const __m256 c1 = _mm256_set1_ps(2.0f * 0.7978845608028654f), c3 = _mm256_set1_ps(2.0f * 0.7978845608028654f * 0.044715f);
    for (; i + 8 <= n; i += 8) {
        const __m256 x = _mm256_loadu_ps(gate + i), u = _mm256_loadu_ps(up + i);
        const __m256 t = _mm256_mul_ps(x, _mm256_fmadd_ps(_mm256_mul_ps(x, x), c3, c1)); /* 2z */
        const __m256 e = exp_neg_avx2(_mm256_or_ps(t, sign));                              /* exp(-|t|) */
        const __m256 neg = _mm256_cmp_ps(t, zero, _CMP_LT_OQ);
        const __m256 num = _mm256_blendv_ps(x, _mm256_mul_ps(x, e), neg);
        _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_div_ps(num, _mm256_add_ps(one, e)), u));
    }
    if (i < n) slm_k_geglu(gate + i, up + i, y + i, n - i);
}

/* The sums of four vectors' lanes: [sum a0, sum a1, sum a2, sum a3]. */
AVX2 static inline __m128 sum4_avx2(__m256 a0, __m256 a1, __m256 a2, __m256 a3) {
    const __m256 h01 = _mm256_hadd_ps(a0, a1), h23 = _mm256_hadd_ps(a2, a3); /* pairs per 128-bit lane */
    const __m256 h = _mm256_hadd_ps(h01, h23);                                /* [a0 a1 a2 a3] per lane */
    return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}

/* As the avx512 one with four rows a pass (8 sums), S % 8 == 0 (others: the
 * scalar rows; rows past the last multiple of four too). */
AVX2 void slm_x86_delta_rule_avx2(float *M, const slm_delta_steps *d, int S) {
    if (S % 8) {
        slm_k_delta_rule(M, d, S);
        return;
    }
    int j = 0;
    for (; j + 4 <= S; j += 4) {
        float *m = M + (size_t)j * S;
        __m256 ak[4], aq[4];
        for (int r = 0; r < 4; r++) ak[r] = _mm256_setzero_ps();
        for (int i = 0; i < S; i += 8) {
            const __m256 kv = _mm256_loadu_ps(d->k + i);
            for (int r = 0; r < 4; r++) ak[r] = _mm256_fmadd_ps(_mm256_loadu_ps(m + (size_t)r * S + i), kv, ak[r]);
        }
        for (int t = 0; t < d->T; t++) {
            const float *q = d->q + (size_t)t * S, *k = d->k + (size_t)t * S, *v = d->v + (size_t)t * d->ldv + j;
            const float *kn = t + 1 < d->T ? k + S : k; /* the last token: a dot nobody reads */
            float dd[4];
            _mm_storeu_ps(dd, _mm_mul_ps(_mm_fnmadd_ps(_mm_set1_ps(d->decay[t]), sum4_avx2(ak[0], ak[1], ak[2], ak[3]), _mm_loadu_ps(v)),
                                         _mm_set1_ps(d->beta[t])));
            const __m256 vdec = _mm256_set1_ps(d->decay[t]);
            for (int r = 0; r < 4; r++) ak[r] = aq[r] = _mm256_setzero_ps();
            for (int i = 0; i < S; i += 8) {
                const __m256 kv = _mm256_loadu_ps(k + i), qv = _mm256_loadu_ps(q + i), nv = _mm256_loadu_ps(kn + i);
                for (int r = 0; r < 4; r++) {
                    float *mr = m + (size_t)r * S + i;
                    const __m256 x = _mm256_fmadd_ps(_mm256_set1_ps(dd[r]), kv, _mm256_mul_ps(vdec, _mm256_loadu_ps(mr)));
                    _mm256_storeu_ps(mr, x);
                    aq[r] = _mm256_fmadd_ps(x, qv, aq[r]);
                    ak[r] = _mm256_fmadd_ps(x, nv, ak[r]);
                }
            }
            _mm_storeu_ps(d->o + (size_t)t * d->ldo + j, sum4_avx2(aq[0], aq[1], aq[2], aq[3]));
        }
    }
    for (; j < S; j++)
        for (int t = 0; t < d->T; t++)
            d->o[(size_t)t * d->ldo + j] = slm_k_delta_row(M + (size_t)j * S, d->q + (size_t)t * S, d->k + (size_t)t * S,
                                                           d->v[(size_t)t * d->ldv + j], d->decay[t], d->beta[t], S);
}

AVX2 void slm_x86_rmsnorm_avx2(const float *x, const float *g, float *y, int n, float eps) {
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256 a = _mm256_loadu_ps(x + i), b = _mm256_loadu_ps(x + i + 8);
        s0 = _mm256_fmadd_ps(a, a, s0);
        s1 = _mm256_fmadd_ps(b, b, s1);
    }
    float ss = hsum256(_mm256_add_ps(s0, s1));
    for (; i < n; i++) ss += x[i] * x[i];
    const float sc = 1.0f / sqrtf(ss / (float)n + eps);
    const __m256 vs = _mm256_set1_ps(sc);
    for (i = 0; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(g + i), _mm256_mul_ps(vs, _mm256_loadu_ps(x + i))));
    for (; i < n; i++) y[i] = g[i] * (sc * x[i]);
}

#endif
