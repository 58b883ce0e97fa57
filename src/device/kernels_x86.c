/* x86 SIMD kernel sets (AVX2+FMA+F16C; AVX-512F/BW/VL/VNNI), compiled with
 * target attributes and selected at run time by cpuid.
 *
 * Matrix multiply (slm_mm), by weight type and rows:
 * - F32/F16/BF16: exact float FMAs; a register block of rows x columns of
 *   dot products sharing loads (4x4 AVX-512, 2x4 AVX2), no scratch.
 * - quantized, rows == 1 (decode, memory bound): activations quantized once
 *   to int8 blocks of 32 (scratch), then per weight column a direct walk
 *   over its blocks: SIMD unpack to int8 codes, integer dot (VNNI dpbusd on
 *   AVX-512; maddubs/madd on AVX2), one float FMA per block.
 * - quantized, rows > 1 (prefill, compute bound): activations quantized
 *   once; per 16 (8) output columns the weights are unpacked into a panel
 *   in scratch (slm_pack_panel: codes interleaved 4 bytes per column, so one
 *   vector holds 4 elements of 16 columns), then a register-blocked
 *   micro-kernel of up to 8 (4) rows x 16 (8) columns runs dpbusd with the
 *   row's 4 codes broadcast; per block and row: cvt + 2 FMAs. */
#include <math.h>
#include <string.h>

#include "common/dtype.h"
#include "device/kernels.h"

/* slm_qtype_kind for a compile-time type (folds in the inlined kernels). */
static inline int slm_qtype_kind_c(int t) {
    return t == SLM_Q6_K ? 1 : (t == SLM_Q4_1 || t == SLM_Q4_K || t == SLM_Q5_K) ? 2 : 0;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define AVX2 __attribute__((target("avx2,fma,f16c")))
#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))
#define INLINE static inline __attribute__((always_inline))

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

/* ---- bf16 dots ------------------------------------------------------------ */

AVX2 static inline __m256 bf16x8(const uint16_t *p) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p)), 16));
}

AVX2 static float dot_bf16_avx2(const void *w, const float *x, int k) {
    const uint16_t *a = w;
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int i = 0;
    for (; i + 16 <= k; i += 16) {
        s0 = _mm256_fmadd_ps(bf16x8(a + i), _mm256_loadu_ps(x + i), s0);
        s1 = _mm256_fmadd_ps(bf16x8(a + i + 8), _mm256_loadu_ps(x + i + 8), s1);
    }
    for (; i + 8 <= k; i += 8) s0 = _mm256_fmadd_ps(bf16x8(a + i), _mm256_loadu_ps(x + i), s0);
    float s = hsum256(_mm256_add_ps(s0, s1));
    for (; i < k; i++) s += slm_bf16_to_f32(a[i]) * x[i];
    return s;
}

AVX512 static inline __m512 bf16x16(const uint16_t *p, __mmask16 m) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p)), 16));
}

AVX512 static float dot_bf16_avx512(const void *w, const float *x, int k) {
    const uint16_t *a = w;
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    int i = 0;
    for (; i + 32 <= k; i += 32) {
        s0 = _mm512_fmadd_ps(bf16x16(a + i, 0xFFFF), _mm512_loadu_ps(x + i), s0);
        s1 = _mm512_fmadd_ps(bf16x16(a + i + 16, 0xFFFF), _mm512_loadu_ps(x + i + 16), s1);
    }
    for (; i < k; i += 16) {
        __mmask16 m = k - i >= 16 ? 0xFFFF : (__mmask16)((1u << (k - i)) - 1);
        s0 = _mm512_fmadd_ps(bf16x16(a + i, m), _mm512_maskz_loadu_ps(m, x + i), s0);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
}

/* ---- float-weight matrix multiply (F32/F16/BF16) ------------------------ */

/* 16 weights of type T at element i as floats (masked lanes read nothing). */
AVX512 INLINE __m512 wload16(const void *w, int T, int i, __mmask16 m) {
    if (T == SLM_F32) return _mm512_maskz_loadu_ps(m, (const float *)w + i);
    if (T == SLM_F16) return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, (const uint16_t *)w + i));
    return bf16x16((const uint16_t *)w + i, m);
}

/* R rows x 4 columns of float dot products; rows/columns past the edge
 * repeat the last valid one (computed, not stored). */
AVX512 INLINE void fblock_avx512(const slm_mm *mm, int T, const int R, int i0, int nr, int j0, int nc) {
    const float *x[4];
    const uint8_t *w[4];
    for (int r = 0; r < R; r++) x[r] = mm->x + (size_t)(i0 + (r < nr ? r : nr - 1)) * mm->ldx;
    for (int c = 0; c < 4; c++) w[c] = (const uint8_t *)mm->w + (size_t)(j0 + (c < nc ? c : nc - 1)) * mm->wrow;
    __m512 acc[4][4];
    for (int r = 0; r < R; r++)
        for (int c = 0; c < 4; c++) acc[r][c] = _mm512_setzero_ps();
    const int k = mm->k;
    int i = 0;
    for (; i + 16 <= k; i += 16) {
        __m512 xv[4];
        for (int r = 0; r < R; r++) xv[r] = _mm512_loadu_ps(x[r] + i);
        for (int c = 0; c < 4; c++) {
            __m512 wv = wload16(w[c], T, i, 0xFFFF);
            for (int r = 0; r < R; r++) acc[r][c] = _mm512_fmadd_ps(wv, xv[r], acc[r][c]);
        }
    }
    if (i < k) {
        __mmask16 m = (__mmask16)((1u << (k - i)) - 1);
        __m512 xv[4];
        for (int r = 0; r < R; r++) xv[r] = _mm512_maskz_loadu_ps(m, x[r] + i);
        for (int c = 0; c < 4; c++) {
            __m512 wv = wload16(w[c], T, i, m);
            for (int r = 0; r < R; r++) acc[r][c] = _mm512_fmadd_ps(wv, xv[r], acc[r][c]);
        }
    }
    float out[4][4]; /* constant-bound reduction keeps acc in registers */
    for (int r = 0; r < R; r++)
        for (int c = 0; c < 4; c++) out[r][c] = _mm512_reduce_add_ps(acc[r][c]);
    for (int r = 0; r < R && r < nr; r++) memcpy(mm->y + (size_t)(i0 + r) * mm->ldy + j0, out[r], (size_t)nc * sizeof(float));
}

AVX512 INLINE void fmatmul_avx512_t(const slm_mm *mm, int T) {
    /* columns in chunks of ~256 KiB of weights (kept in L2 across the rows) */
    int chunk = (int)((256u << 10) / (mm->wrow ? mm->wrow : 1)) & ~3;
    if (chunk < 4) chunk = 4;
    for (int c0 = mm->n0; c0 < mm->n1; c0 += chunk)
    for (int i0 = 0; i0 < mm->rows; i0 += 4) {
        const int nr = mm->rows - i0 < 4 ? mm->rows - i0 : 4;
        const int c1 = mm->n1 - c0 < chunk ? mm->n1 : c0 + chunk;
        for (int j0 = c0; j0 < c1; j0 += 4) {
            const int nc = c1 - j0 < 4 ? c1 - j0 : 4;
            if (nr == 1) fblock_avx512(mm, T, 1, i0, nr, j0, nc);
            else fblock_avx512(mm, T, 4, i0, nr, j0, nc);
        }
    }
}

AVX512 static void fmatmul_avx512(const slm_mm *mm) {
    switch (mm->wtype) {
    case SLM_F32: fmatmul_avx512_t(mm, SLM_F32); break;
    case SLM_F16: fmatmul_avx512_t(mm, SLM_F16); break;
    default: fmatmul_avx512_t(mm, SLM_BF16); break;
    }
}

AVX2 INLINE __m256 wload8(const void *w, int T, int i) {
    if (T == SLM_F32) return _mm256_loadu_ps((const float *)w + i);
    if (T == SLM_F16) return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)w + i)));
    return bf16x8((const uint16_t *)w + i);
}

AVX2 INLINE float wscalar(const void *w, int T, int i) {
    if (T == SLM_F32) return ((const float *)w)[i];
    if (T == SLM_F16) return slm_f16_to_f32(((const uint16_t *)w)[i]);
    return slm_bf16_to_f32(((const uint16_t *)w)[i]);
}

AVX2 INLINE void fblock_avx2(const slm_mm *mm, int T, const int R, int i0, int nr, int j0, int nc) {
    const float *x[2];
    const uint8_t *w[4];
    for (int r = 0; r < R; r++) x[r] = mm->x + (size_t)(i0 + (r < nr ? r : nr - 1)) * mm->ldx;
    for (int c = 0; c < 4; c++) w[c] = (const uint8_t *)mm->w + (size_t)(j0 + (c < nc ? c : nc - 1)) * mm->wrow;
    __m256 acc[2][4];
    for (int r = 0; r < R; r++)
        for (int c = 0; c < 4; c++) acc[r][c] = _mm256_setzero_ps();
    const int k = mm->k;
    int i = 0;
    for (; i + 8 <= k; i += 8) {
        __m256 xv[2];
        for (int r = 0; r < R; r++) xv[r] = _mm256_loadu_ps(x[r] + i);
        for (int c = 0; c < 4; c++) {
            __m256 wv = wload8(w[c], T, i);
            for (int r = 0; r < R; r++) acc[r][c] = _mm256_fmadd_ps(wv, xv[r], acc[r][c]);
        }
    }
    float out[2][4]; /* constant-bound reduction keeps acc in registers */
    for (int r = 0; r < R; r++)
        for (int c = 0; c < 4; c++) out[r][c] = hsum256(acc[r][c]);
    for (int r = 0; r < R && r < nr; r++) {
        float *y = mm->y + (size_t)(i0 + r) * mm->ldy + j0;
        for (int c = 0; c < nc; c++) {
            float s = out[r][c];
            for (int e = i; e < k; e++) s += wscalar(w[c], T, e) * x[r][e];
            y[c] = s;
        }
    }
}

AVX2 INLINE void fmatmul_avx2_t(const slm_mm *mm, int T) {
    /* columns in chunks of ~256 KiB of weights (kept in L2 across the rows) */
    int chunk = (int)((256u << 10) / (mm->wrow ? mm->wrow : 1)) & ~3;
    if (chunk < 4) chunk = 4;
    for (int c0 = mm->n0; c0 < mm->n1; c0 += chunk)
    for (int i0 = 0; i0 < mm->rows; i0 += 2) {
        const int nr = mm->rows - i0 < 2 ? mm->rows - i0 : 2;
        const int c1 = mm->n1 - c0 < chunk ? mm->n1 : c0 + chunk;
        for (int j0 = c0; j0 < c1; j0 += 4) {
            const int nc = c1 - j0 < 4 ? c1 - j0 : 4;
            if (nr == 1) fblock_avx2(mm, T, 1, i0, nr, j0, nc);
            else fblock_avx2(mm, T, 2, i0, nr, j0, nc);
        }
    }
}

AVX2 static void fmatmul_avx2(const slm_mm *mm) {
    switch (mm->wtype) {
    case SLM_F32: fmatmul_avx2_t(mm, SLM_F32); break;
    case SLM_F16: fmatmul_avx2_t(mm, SLM_F16); break;
    default: fmatmul_avx2_t(mm, SLM_BF16); break;
    }
}

/* ---- int8 activations ------------------------------------------------------ */

/* The scratch of a quantized matmul: xq codes, block scales, block sums,
 * then the panel (see slm_matmul_scratch_bytes). */
typedef struct qscratch {
    uint8_t *q;     /* [rows][k] codes */
    float *d;       /* [rows][nb] block scales */
    float *s;       /* [rows][nb] block sums (scale * sum of codes) */
    int32_t *hs;    /* [rows][2 * nb] integer sums of the codes of each half block */
    uint8_t *panel; /* nb * SLM_PANEL_BLOCK_BYTES(16) bytes */
} qscratch;

static inline uint8_t *align64(uint8_t *p) { return (uint8_t *)(((uintptr_t)p + 63) & ~(uintptr_t)63); }

static qscratch qscratch_split(void *scratch, int rows, int k) {
    const size_t nb = (size_t)k / 32;
    qscratch qs;
    qs.q = align64(scratch);
    qs.d = (float *)align64(qs.q + (size_t)rows * k);
    qs.s = qs.d + (size_t)rows * nb;
    qs.hs = (int32_t *)align64((uint8_t *)(qs.s + (size_t)rows * nb));
    qs.panel = align64((uint8_t *)(qs.hs + (size_t)rows * 2 * nb));
    return qs;
}

/* slm_quantize_act_ref, vectorized (same rounding, same results). */
AVX512 static void quant_act_avx512(const float *x, size_t ldx, int rows, int k, int offset, uint8_t *q, float *d,
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
            const int h0 = _mm512_reduce_add_epi32(i0), h1 = _mm512_reduce_add_epi32(i1), sum = h0 + h1;
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

AVX2 static void quant_act_avx2(const float *x, size_t ldx, int rows, int k, uint8_t *q, float *d, float *s,
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
            const int h0 = hsum_epi32_avx2(_mm256_add_epi32(iv[0], iv[1]));
            const int h1 = hsum_epi32_avx2(_mm256_add_epi32(iv[2], iv[3]));
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

/* ---- weight blocks as int8 codes (decode) ------------------------------------
 * Block b (32 elements) of a row of type T: codes q (signed), scales of the
 * two halves d0, d1, min m; value = d[e / 16] * q[e] + m. */
AVX2 INLINE __m256i nibbles32(const uint8_t *qs16) {
    __m128i t = _mm_loadu_si128((const __m128i *)qs16);
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(t, 4), t), _mm256_set1_epi8(0x0F));
}

AVX2 INLINE __m256i qblock(const uint8_t *row, int T, int b, float *d0, float *d1, float *m) {
    switch (T) {
    case SLM_Q8_0: {
        const slm_block_q8_0 *x = (const slm_block_q8_0 *)row + b;
        *d0 = *d1 = _cvtsh_ss(x->d);
        return _mm256_loadu_si256((const __m256i *)x->qs);
    }
    case SLM_Q4_0: {
        const slm_block_q4_0 *x = (const slm_block_q4_0 *)row + b;
        *d0 = *d1 = _cvtsh_ss(x->d);
        return _mm256_sub_epi8(nibbles32(x->qs), _mm256_set1_epi8(8));
    }
    case SLM_Q4_1: {
        const slm_block_q4_1 *x = (const slm_block_q4_1 *)row + b;
        *d0 = *d1 = _cvtsh_ss(x->d);
        *m = _cvtsh_ss(x->m);
        return nibbles32(x->qs);
    }
    case SLM_Q4_K:
    case SLM_Q5_K: {
        const int s = b % 8, c = s / 2, h = s % 2;
        const uint8_t *scales, *qs;
        uint16_t dh, dmh;
        const slm_block_q5_K *x5 = (const slm_block_q5_K *)row + b / 8;
        if (T == SLM_Q4_K) {
            const slm_block_q4_K *x4 = (const slm_block_q4_K *)row + b / 8;
            scales = x4->scales, qs = x4->qs, dh = x4->d, dmh = x4->dmin;
        } else {
            scales = x5->scales, qs = x5->qs, dh = x5->d, dmh = x5->dmin;
        }
        uint8_t sc, mn;
        slm_get_scale_min_k4(s, scales, &sc, &mn);
        *d0 = *d1 = _cvtsh_ss(dh) * sc;
        *m = -(_cvtsh_ss(dmh) * mn);
        __m256i v = _mm256_loadu_si256((const __m256i *)(qs + 32 * c));
        v = _mm256_and_si256(_mm256_srli_epi16(v, 4 * h), _mm256_set1_epi8(0x0F));
        if (T == SLM_Q5_K) {
            const __m256i bit = _mm256_set1_epi8((char)(1 << (2 * c + h)));
            __m256i hb = _mm256_cmpeq_epi8(_mm256_and_si256(_mm256_loadu_si256((const __m256i *)x5->qh), bit), bit);
            v = _mm256_or_si256(v, _mm256_and_si256(hb, _mm256_set1_epi8(0x10)));
        }
        return v;
    }
    default: { /* SLM_Q6_K */
        const slm_block_q6_K *x = (const slm_block_q6_K *)row + b / 8;
        const int s = b % 8, H = s / 4, Q = s % 4;
        const float dd = _cvtsh_ss(x->d);
        *d0 = dd * x->scales[2 * s];
        *d1 = dd * x->scales[2 * s + 1];
        __m256i lo = _mm256_loadu_si256((const __m256i *)(x->ql + 64 * H + (Q & 1) * 32));
        __m256i hi = _mm256_loadu_si256((const __m256i *)(x->qh + 32 * H));
        lo = _mm256_and_si256(_mm256_srli_epi16(lo, 4 * (Q >> 1)), _mm256_set1_epi8(0x0F));
        hi = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hi, 2 * Q), _mm256_set1_epi8(3)), 4);
        return _mm256_sub_epi8(_mm256_or_si256(lo, hi), _mm256_set1_epi8(32));
    }
    }
}

/* Decode: one activation row (xq with offset 128), every column of the tile.
 * Per block: idot = dpbusd(xq + 128, q) - 128 * sum(q), lanes 0-3 the first
 * half block and 4-7 the second; times [d0 dx x4 | d1 dx x4]; the min term
 * m * (dx * sum of codes) is accumulated apart. */
AVX512 INLINE void qdecode_avx512_t(const slm_mm *mm, int T, const qscratch *qs) {
    const int nb = mm->k / 32;
    const __m256i c80 = _mm256_set1_epi8((char)0x80);
    for (int j = mm->n0; j < mm->n1; j++) {
        const uint8_t *row = (const uint8_t *)mm->w + (size_t)j * mm->wrow;
        __m256 acc = _mm256_setzero_ps();
        float macc = 0.0f;
        for (int b = 0; b < nb; b++) {
            float d0, d1, m = 0.0f;
            __m256i q = qblock(row, T, b, &d0, &d1, &m);
            __m256i xv = _mm256_loadu_si256((const __m256i *)(qs->q + 32 * b));
            __m256i id = _mm256_sub_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), xv, q),
                                          _mm256_dpbusd_epi32(_mm256_setzero_si256(), c80, q));
            const float dx = qs->d[b];
            __m256 sc = d0 == d1 ? _mm256_set1_ps(d0 * dx)
                                 : _mm256_set_m128(_mm_set1_ps(d1 * dx), _mm_set1_ps(d0 * dx));
            acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(id), sc, acc);
            if (slm_qtype_kind_c(T) == 2) macc += m * qs->s[b];
        }
        mm->y[j] = hsum256(acc) + macc;
    }
}

/* AVX2 decode: as above with the sign trick (|q| unsigned times x with q's
 * sign, maddubs then madd) on signed activation codes. */
AVX2 INLINE void qdecode_avx2_t(const slm_mm *mm, int T, const qscratch *qs) {
    const int nb = mm->k / 32;
    const __m256i ones = _mm256_set1_epi16(1);
    for (int j = mm->n0; j < mm->n1; j++) {
        const uint8_t *row = (const uint8_t *)mm->w + (size_t)j * mm->wrow;
        __m256 acc = _mm256_setzero_ps();
        float macc = 0.0f;
        for (int b = 0; b < nb; b++) {
            float d0, d1, m = 0.0f;
            __m256i q = qblock(row, T, b, &d0, &d1, &m);
            __m256i xv = _mm256_loadu_si256((const __m256i *)(qs->q + 32 * b));
            __m256i id = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(q), _mm256_sign_epi8(xv, q)), ones);
            const float dx = qs->d[b];
            __m256 sc = d0 == d1 ? _mm256_set1_ps(d0 * dx)
                                 : _mm256_set_m128(_mm_set1_ps(d1 * dx), _mm_set1_ps(d0 * dx));
            acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(id), sc, acc);
            if (slm_qtype_kind_c(T) == 2) macc += m * qs->s[b];
        }
        mm->y[j] = hsum256(acc) + macc;
    }
}

/* ---- int8 micro-kernels over a packed panel --------------------------------
 * R rows x NC columns; KIND 0: one scale per block, 1: two half scales,
 * 2: one scale and a min term. Activation codes: AVX-512 unsigned (+128,
 * corrected by the panel's corr), AVX2 signed. */
static inline int32_t ld32(const uint8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

AVX512 INLINE void mk_avx512(const qscratch *qs, int k, int i0, const uint8_t *panel, float *y, size_t ldy,
                             __mmask16 cm, const int R, const int KIND) {
    const int nb = k / 32;
    const size_t PB = SLM_PANEL_BLOCK_BYTES(16);
    __m512 acc[8];
    for (int r = 0; r < R; r++) acc[r] = _mm512_setzero_ps();
    const uint8_t *xq = qs->q + (size_t)i0 * k;
    const float *xd = qs->d + (size_t)i0 * nb, *xs = qs->s + (size_t)i0 * nb;
    for (int b = 0; b < nb; b++) {
        const uint8_t *p = panel + (size_t)b * PB;
        __m512i ia[8], ib[8];
        const __m512i c0 = _mm512_load_si512(p + 512), c1 = _mm512_load_si512(p + 576);
        if (KIND == 1) {
            for (int r = 0; r < R; r++) ia[r] = c0, ib[r] = c1;
        } else {
            const __m512i c = _mm512_add_epi32(c0, c1);
            for (int r = 0; r < R; r++) ia[r] = c;
        }
        for (int g = 0; g < 4; g++) {
            const __m512i w = _mm512_load_si512(p + 64 * g);
            for (int r = 0; r < R; r++)
                ia[r] = _mm512_dpbusd_epi32(ia[r], _mm512_set1_epi32(ld32(xq + (size_t)r * k + 32 * b + 4 * g)), w);
        }
        for (int g = 4; g < 8; g++) {
            const __m512i w = _mm512_load_si512(p + 64 * g);
            for (int r = 0; r < R; r++) {
                const __m512i xv = _mm512_set1_epi32(ld32(xq + (size_t)r * k + 32 * b + 4 * g));
                if (KIND == 1) ib[r] = _mm512_dpbusd_epi32(ib[r], xv, w);
                else ia[r] = _mm512_dpbusd_epi32(ia[r], xv, w);
            }
        }
        const __m512 d0 = _mm512_load_ps(p + 640);
        if (KIND == 1) {
            const __m512 d1 = _mm512_load_ps(p + 704);
            for (int r = 0; r < R; r++) {
                __m512 f = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ib[r]), d1, _mm512_mul_ps(_mm512_cvtepi32_ps(ia[r]), d0));
                acc[r] = _mm512_fmadd_ps(f, _mm512_set1_ps(xd[(size_t)r * nb + b]), acc[r]);
            }
        } else {
            for (int r = 0; r < R; r++)
                acc[r] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(ia[r]), d0),
                                         _mm512_set1_ps(xd[(size_t)r * nb + b]), acc[r]);
            if (KIND == 2) {
                const __m512 m = _mm512_load_ps(p + 768);
                for (int r = 0; r < R; r++) acc[r] = _mm512_fmadd_ps(m, _mm512_set1_ps(xs[(size_t)r * nb + b]), acc[r]);
            }
        }
    }
    for (int r = 0; r < R; r++) _mm512_mask_storeu_ps(y + (size_t)r * ldy, cm, acc[r]);
}

#define MK_AVX512(R, K)                                                                                   \
    AVX512 static void mk_avx512_##R##_##K(const qscratch *qs, int k, int i0, const uint8_t *panel, float *y, \
                                           size_t ldy, __mmask16 cm) {                                    \
        mk_avx512(qs, k, i0, panel, y, ldy, cm, R, K);                                                    \
    }
#define MK_AVX512_ALL(K) MK_AVX512(1, K) MK_AVX512(2, K) MK_AVX512(3, K) MK_AVX512(4, K) \
    MK_AVX512(5, K) MK_AVX512(6, K) MK_AVX512(7, K) MK_AVX512(8, K)
MK_AVX512_ALL(0)
MK_AVX512_ALL(1)
MK_AVX512_ALL(2)

typedef void (*mk512_fn)(const qscratch *, int, int, const uint8_t *, float *, size_t, __mmask16);
static const mk512_fn k_mk512[3][8] = {
    {mk_avx512_1_0, mk_avx512_2_0, mk_avx512_3_0, mk_avx512_4_0, mk_avx512_5_0, mk_avx512_6_0, mk_avx512_7_0, mk_avx512_8_0},
    {mk_avx512_1_1, mk_avx512_2_1, mk_avx512_3_1, mk_avx512_4_1, mk_avx512_5_1, mk_avx512_6_1, mk_avx512_7_1, mk_avx512_8_1},
    {mk_avx512_1_2, mk_avx512_2_2, mk_avx512_3_2, mk_avx512_4_2, mk_avx512_5_2, mk_avx512_6_2, mk_avx512_7_2, mk_avx512_8_2},
};

AVX2 INLINE void mk_avx2(const qscratch *qs, int k, int i0, const uint8_t *panel, float *y, size_t ldy, int nc,
                         const int R, const int KIND) {
    const int nb = k / 32;
    const size_t PB = SLM_PANEL_BLOCK_BYTES(8);
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[4];
    for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps();
    const uint8_t *xq = qs->q + (size_t)i0 * k;
    const float *xd = qs->d + (size_t)i0 * nb, *xs = qs->s + (size_t)i0 * nb;
    for (int b = 0; b < nb; b++) {
        const uint8_t *p = panel + (size_t)b * PB;
        __m256i ia[4], ib[4];
        for (int r = 0; r < R; r++) ia[r] = ib[r] = _mm256_setzero_si256();
        for (int g = 0; g < 8; g++) {
            const __m256i w = _mm256_load_si256((const __m256i *)(p + 32 * g)), aw = _mm256_abs_epi8(w);
            for (int r = 0; r < R; r++) {
                const __m256i xv = _mm256_set1_epi32(ld32(xq + (size_t)r * k + 32 * b + 4 * g));
                const __m256i t = _mm256_madd_epi16(_mm256_maddubs_epi16(aw, _mm256_sign_epi8(xv, w)), ones);
                if (KIND == 1 && g >= 4) ib[r] = _mm256_add_epi32(ib[r], t);
                else ia[r] = _mm256_add_epi32(ia[r], t);
            }
        }
        const __m256 d0 = _mm256_load_ps((const float *)(p + 320));
        for (int r = 0; r < R; r++) {
            __m256 f = _mm256_mul_ps(_mm256_cvtepi32_ps(ia[r]), d0);
            if (KIND == 1) f = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ib[r]), _mm256_load_ps((const float *)(p + 352)), f);
            acc[r] = _mm256_fmadd_ps(f, _mm256_set1_ps(xd[(size_t)r * nb + b]), acc[r]);
            if (KIND == 2)
                acc[r] = _mm256_fmadd_ps(_mm256_load_ps((const float *)(p + 384)), _mm256_set1_ps(xs[(size_t)r * nb + b]),
                                         acc[r]);
        }
    }
    for (int r = 0; r < R; r++) {
        float t[8];
        _mm256_storeu_ps(t, acc[r]);
        memcpy(y + (size_t)r * ldy, t, (size_t)nc * sizeof(float));
    }
}

#define MK_AVX2(R, K)                                                                                              \
    AVX2 static void mk_avx2_##R##_##K(const qscratch *qs, int k, int i0, const uint8_t *panel, float *y, size_t ldy, \
                                       int nc) {                                                                    \
        mk_avx2(qs, k, i0, panel, y, ldy, nc, R, K);                                                                \
    }
#define MK_AVX2_ALL(K) MK_AVX2(1, K) MK_AVX2(2, K) MK_AVX2(3, K) MK_AVX2(4, K)
MK_AVX2_ALL(0)
MK_AVX2_ALL(1)
MK_AVX2_ALL(2)

typedef void (*mk2_fn)(const qscratch *, int, int, const uint8_t *, float *, size_t, int);
static const mk2_fn k_mk2[3][4] = {
    {mk_avx2_1_0, mk_avx2_2_0, mk_avx2_3_0, mk_avx2_4_0},
    {mk_avx2_1_1, mk_avx2_2_1, mk_avx2_3_1, mk_avx2_4_1},
    {mk_avx2_1_2, mk_avx2_2_2, mk_avx2_3_2, mk_avx2_4_2},
};

/* ---- repacked weights (Q4_0_R16, Q6_K_R16, Q8_0_R16; layout in compiler/repack.c) -
 * R rows x the 16 columns of one group: per block, vector v (elements
 * 4v..4v+3 of the 16 columns, unsigned codes) meets the row's 4 signed
 * activation codes broadcast (dpbusd: u8 weights x s8 activations). The
 * codes' offset (8; 32 for Q6_K, 128 for Q8_0) is folded into the accumulator's start:
 * -offset * (sum of the activation codes of the half block). Q6_K keeps
 * one accumulator per half block (per-16 scales). Decode is R = 1. */
/* TY: 0 Q4_0_R16, 1 Q6_K_R16, 2 Q8_0_R16 */
AVX512 INLINE __m512i r16_vec_avx512(const uint8_t *lo, const uint8_t *hi, int v, int TY) {
    if (TY == 2) return _mm512_loadu_si512(lo + 64 * v);
    const int Q6 = TY == 1;
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __m512i c = _mm512_loadu_si512(lo + 64 * (v / 2));
    __m512i w = (v & 1) ? _mm512_and_si512(_mm512_srli_epi16(c, 4), m4) : _mm512_and_si512(c, m4);
    if (Q6) {
        const __m512i h = _mm512_loadu_si512(hi + 64 * (v / 4)), m30 = _mm512_set1_epi8(0x30);
        const int s = v % 4;
        __m512i t = s < 2 ? _mm512_slli_epi16(h, 4 - 2 * s) : s == 2 ? h : _mm512_srli_epi16(h, 2);
        w = _mm512_or_si512(w, _mm512_and_si512(t, m30));
    }
    return w;
}

AVX512 INLINE void r16_mk_avx512(const slm_mm *mm, const qscratch *qs, int i0, int j0, __mmask16 cm, const int R,
                                 const int TY) {
    const int k = mm->k, nb = k / 32, Q6 = TY == 1, CB = TY == 2 ? 512 : 256; /* code bytes per block */
    const uint8_t *grp = (const uint8_t *)mm->w + (size_t)(j0 / 16) * 16 * mm->wrow;
    const int off = TY == 2 ? -128 : Q6 ? -32 : -8;
    const uint8_t *xq = qs->q + (size_t)i0 * k;
    const float *xd = qs->d + (size_t)i0 * nb;
    const int32_t *hs = qs->hs + (size_t)i0 * 2 * nb;
    __m512 acc[8];
    for (int r = 0; r < R; r++) acc[r] = _mm512_setzero_ps();
    __m512 dsup = _mm512_setzero_ps();
    for (int b = 0; b < nb; b++) {
        __m512i ia[8], ib[8];
        for (int r = 0; r < R; r++) {
            const int32_t *h = hs + (size_t)r * 2 * nb + 2 * b;
            if (Q6) {
                ia[r] = _mm512_set1_epi32(off * h[0]);
                ib[r] = _mm512_set1_epi32(off * h[1]);
            } else {
                ia[r] = _mm512_set1_epi32(off * (h[0] + h[1]));
            }
        }
        /* the block: codes, then scales (Q6_K: after each super-block's d[16]) */
        const uint8_t *lb = Q6 ? grp + (size_t)(b / 8) * 3360 + 32 + (size_t)(b % 8) * 416 : grp + (size_t)b * (CB + 32);
        const uint8_t *hb = lb + 256;
        for (int v = 0; v < 8; v++) {
            const __m512i w = r16_vec_avx512(lb, hb, v, TY);
            for (int r = 0; r < R; r++) {
                const __m512i xv = _mm512_set1_epi32(ld32(xq + (size_t)r * k + 32 * b + 4 * v));
                if (Q6 && v >= 4) ib[r] = _mm512_dpbusd_epi32(ib[r], w, xv);
                else ia[r] = _mm512_dpbusd_epi32(ia[r], w, xv);
            }
        }
        if (Q6) {
            if (b % 8 == 0) dsup = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(grp + (size_t)(b / 8) * 3360)));
            const __m128i s01 = _mm_loadu_si128((const __m128i *)(lb + 384));
            const __m128i s11 = _mm_loadu_si128((const __m128i *)(lb + 400));
            const __m512 d0 = _mm512_mul_ps(dsup, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(s01)));
            const __m512 d1 = _mm512_mul_ps(dsup, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(s11)));
            for (int r = 0; r < R; r++) {
                const __m512 f = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ib[r]), d1, _mm512_mul_ps(_mm512_cvtepi32_ps(ia[r]), d0));
                acc[r] = _mm512_fmadd_ps(f, _mm512_set1_ps(xd[(size_t)r * nb + b]), acc[r]);
            }
        } else {
            const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(lb + CB)));
            for (int r = 0; r < R; r++)
                acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ia[r]), _mm512_mul_ps(d, _mm512_set1_ps(xd[(size_t)r * nb + b])),
                                         acc[r]);
        }
    }
    for (int r = 0; r < R; r++) _mm512_mask_storeu_ps(mm->y + (size_t)(i0 + r) * mm->ldy + j0, cm, acc[r]);
}

#define R16MK_AVX512(R, TY)                                                                                  \
    AVX512 static void r16_mk_avx512_##R##_##TY(const slm_mm *mm, const qscratch *qs, int i0, int j0, __mmask16 cm) { \
        r16_mk_avx512(mm, qs, i0, j0, cm, R, TY);                                                             \
    }
#define R16MK_AVX512_ALL(TY) R16MK_AVX512(1, TY) R16MK_AVX512(2, TY) R16MK_AVX512(3, TY) R16MK_AVX512(4, TY) \
    R16MK_AVX512(5, TY) R16MK_AVX512(6, TY) R16MK_AVX512(7, TY) R16MK_AVX512(8, TY)
R16MK_AVX512_ALL(0)
R16MK_AVX512_ALL(1)
R16MK_AVX512_ALL(2)

typedef void (*r16mk512_fn)(const slm_mm *, const qscratch *, int, int, __mmask16);
#define R16ROW512(TY) {r16_mk_avx512_1_##TY, r16_mk_avx512_2_##TY, r16_mk_avx512_3_##TY, r16_mk_avx512_4_##TY, \
                       r16_mk_avx512_5_##TY, r16_mk_avx512_6_##TY, r16_mk_avx512_7_##TY, r16_mk_avx512_8_##TY}
static const r16mk512_fn k_r16mk512[3][8] = {R16ROW512(0), R16ROW512(1), R16ROW512(2)};

static int r16_ty(uint32_t t) { return t == SLM_Q6_K_R16 ? 1 : t == SLM_Q8_0_R16 ? 2 : 0; }

/* Groups of 16 columns over [n0, n1) (a group cut by the tile computes all
 * 16 and stores the tile's); rows in blocks of 8. */
AVX512 static void r16_matmul_avx512(const slm_mm *mm, const qscratch *qs) {
    const int ty = r16_ty(mm->wtype);
    for (int g0 = mm->n0 & ~15; g0 < mm->n1; g0 += 16) {
        const int a = mm->n0 > g0 ? mm->n0 - g0 : 0, e = mm->n1 - g0 < 16 ? mm->n1 - g0 : 16;
        const __mmask16 cm = (__mmask16)(((1u << e) - 1) & ~((1u << a) - 1));
        for (int i0 = 0; i0 < mm->rows; i0 += 8) {
            const int nr = mm->rows - i0 < 8 ? mm->rows - i0 : 8;
            k_r16mk512[ty][nr - 1](mm, qs, i0, g0, cm);
        }
    }
}

/* AVX2: a group is two halves of 8 columns (bytes 0..31 and 32..63 of each
 * 64-byte vector); maddubs (u8 weights x s8 activations; |sums| < 2^15) and
 * madd make the 32-bit dot of 4 elements. Q8_0 codes would overflow that
 * (255 * 127 * 2): they are made signed again and take the sign trick. */
AVX2 INLINE __m256i r16_vec_avx2(const uint8_t *lo, const uint8_t *hi, int v, int half, int TY) {
    if (TY == 2)
        return _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(lo + 64 * v + 32 * half)), _mm256_set1_epi8((char)0x80));
    const int Q6 = TY == 1;
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i c = _mm256_loadu_si256((const __m256i *)(lo + 64 * (v / 2) + 32 * half));
    __m256i w = (v & 1) ? _mm256_and_si256(_mm256_srli_epi16(c, 4), m4) : _mm256_and_si256(c, m4);
    if (Q6) {
        const __m256i h = _mm256_loadu_si256((const __m256i *)(hi + 64 * (v / 4) + 32 * half));
        const int s = v % 4;
        __m256i t = s == 0 ? _mm256_slli_epi16(h, 4) : s == 1 ? _mm256_slli_epi16(h, 2) : s == 2 ? h : _mm256_srli_epi16(h, 2);
        w = _mm256_or_si256(w, _mm256_and_si256(t, _mm256_set1_epi8(0x30)));
    }
    return w;
}

AVX2 INLINE void r16_mk_avx2(const slm_mm *mm, const qscratch *qs, int i0, int j0, int half, int a, int e, const int R,
                             const int TY) {
    const int k = mm->k, nb = k / 32, Q6 = TY == 1, CB = TY == 2 ? 512 : 256;
    const uint8_t *grp = (const uint8_t *)mm->w + (size_t)(j0 / 16) * 16 * mm->wrow;
    const int off = TY == 2 ? 0 : Q6 ? -32 : -8; /* Q8_0: signed codes, no offset */
    const __m256i ones = _mm256_set1_epi16(1);
    const uint8_t *xq = qs->q + (size_t)i0 * k;
    const float *xd = qs->d + (size_t)i0 * nb;
    const int32_t *hs = qs->hs + (size_t)i0 * 2 * nb;
    __m256 acc[4];
    for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps();
    __m256 dsup = _mm256_setzero_ps();
    for (int b = 0; b < nb; b++) {
        __m256i ia[4], ib[4];
        for (int r = 0; r < R; r++) {
            const int32_t *h = hs + (size_t)r * 2 * nb + 2 * b;
            if (Q6) {
                ia[r] = _mm256_set1_epi32(off * h[0]);
                ib[r] = _mm256_set1_epi32(off * h[1]);
            } else {
                ia[r] = _mm256_set1_epi32(off * (h[0] + h[1]));
            }
        }
        const uint8_t *lb = Q6 ? grp + (size_t)(b / 8) * 3360 + 32 + (size_t)(b % 8) * 416 : grp + (size_t)b * (CB + 32);
        const uint8_t *hb = lb + 256;
        for (int v = 0; v < 8; v++) {
            const __m256i w = r16_vec_avx2(lb, hb, v, half, TY), aw = TY == 2 ? _mm256_abs_epi8(w) : w;
            for (int r = 0; r < R; r++) {
                const __m256i xv = _mm256_set1_epi32(ld32(xq + (size_t)r * k + 32 * b + 4 * v));
                const __m256i t = _mm256_madd_epi16(_mm256_maddubs_epi16(aw, TY == 2 ? _mm256_sign_epi8(xv, w) : xv), ones);
                if (Q6 && v >= 4) ib[r] = _mm256_add_epi32(ib[r], t);
                else ia[r] = _mm256_add_epi32(ia[r], t);
            }
        }
        if (Q6) {
            if (b % 8 == 0)
                dsup = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(grp + (size_t)(b / 8) * 3360 + 16 * half)));
            const uint8_t *sc = lb + 384 + 8 * half;
            const __m256 d0 = _mm256_mul_ps(dsup, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)sc))));
            const __m256 d1 = _mm256_mul_ps(dsup, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(sc + 16)))));
            for (int r = 0; r < R; r++) {
                const __m256 f = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ib[r]), d1, _mm256_mul_ps(_mm256_cvtepi32_ps(ia[r]), d0));
                acc[r] = _mm256_fmadd_ps(f, _mm256_set1_ps(xd[(size_t)r * nb + b]), acc[r]);
            }
        } else {
            const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(lb + CB + 16 * half)));
            for (int r = 0; r < R; r++)
                acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ia[r]), _mm256_mul_ps(d, _mm256_set1_ps(xd[(size_t)r * nb + b])),
                                         acc[r]);
        }
    }
    for (int r = 0; r < R; r++) {
        float t[8];
        _mm256_storeu_ps(t, acc[r]);
        float *y = mm->y + (size_t)(i0 + r) * mm->ldy + j0 + 8 * half;
        for (int c = a; c < e; c++) y[c] = t[c];
    }
}

#define R16MK_AVX2(R, TY)                                                                                      \
    AVX2 static void r16_mk_avx2_##R##_##TY(const slm_mm *mm, const qscratch *qs, int i0, int j0, int half, int a, \
                                            int e) {                                                         \
        r16_mk_avx2(mm, qs, i0, j0, half, a, e, R, TY);                                                      \
    }
R16MK_AVX2(1, 0) R16MK_AVX2(2, 0) R16MK_AVX2(3, 0) R16MK_AVX2(4, 0)
R16MK_AVX2(1, 1) R16MK_AVX2(2, 1) R16MK_AVX2(3, 1) R16MK_AVX2(4, 1)
R16MK_AVX2(1, 2) R16MK_AVX2(2, 2) R16MK_AVX2(3, 2) R16MK_AVX2(4, 2)

typedef void (*r16mk2_fn)(const slm_mm *, const qscratch *, int, int, int, int, int);
static const r16mk2_fn k_r16mk2[3][4] = {
    {r16_mk_avx2_1_0, r16_mk_avx2_2_0, r16_mk_avx2_3_0, r16_mk_avx2_4_0},
    {r16_mk_avx2_1_1, r16_mk_avx2_2_1, r16_mk_avx2_3_1, r16_mk_avx2_4_1},
    {r16_mk_avx2_1_2, r16_mk_avx2_2_2, r16_mk_avx2_3_2, r16_mk_avx2_4_2},
};

AVX2 static void r16_matmul_avx2(const slm_mm *mm, const qscratch *qs) {
    const int q6 = r16_ty(mm->wtype);
    for (int h0 = mm->n0 & ~7; h0 < mm->n1; h0 += 8) {
        const int a = mm->n0 > h0 ? mm->n0 - h0 : 0, e = mm->n1 - h0 < 8 ? mm->n1 - h0 : 8;
        for (int i0 = 0; i0 < mm->rows; i0 += 4) {
            const int nr = mm->rows - i0 < 4 ? mm->rows - i0 : 4;
            k_r16mk2[q6][nr - 1](mm, qs, i0, h0 & ~15, (h0 / 8) & 1, a, e);
        }
    }
}

/* ---- repacked F16 (F16_R16): exact float FMAs ----------------------------------
 * R rows x the 16 columns of a group: per input element e, one 32-byte load
 * converts to the 16 columns' weights and meets the rows' x[e] broadcast.
 * No horizontal sums, one memory stream per group. Decode (R = 1) keeps 4
 * accumulators over e to cover the FMA latency. */
AVX512 INLINE void f16r16_mk_avx512(const slm_mm *mm, int i0, int j0, __mmask16 cm, const int R) {
    const int k = mm->k;
    const uint16_t *g = (const uint16_t *)((const uint8_t *)mm->w + (size_t)(j0 / 16) * 16 * mm->wrow);
    const float *x = mm->x + (size_t)i0 * mm->ldx;
    __m512 acc[8];
    if (R == 1) {
        __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        int e = 0;
        for (; e + 4 <= k; e += 4) {
            a0 = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(g + (size_t)e * 16))), _mm512_set1_ps(x[e]), a0);
            a1 = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(g + (size_t)(e + 1) * 16))), _mm512_set1_ps(x[e + 1]), a1);
            a2 = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(g + (size_t)(e + 2) * 16))), _mm512_set1_ps(x[e + 2]), a2);
            a3 = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(g + (size_t)(e + 3) * 16))), _mm512_set1_ps(x[e + 3]), a3);
        }
        for (; e < k; e++)
            a0 = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(g + (size_t)e * 16))), _mm512_set1_ps(x[e]), a0);
        acc[0] = _mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3));
    } else {
        for (int r = 0; r < R; r++) acc[r] = _mm512_setzero_ps();
        for (int e = 0; e < k; e++) {
            const __m512 w = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(g + (size_t)e * 16)));
            for (int r = 0; r < R; r++) acc[r] = _mm512_fmadd_ps(w, _mm512_set1_ps(x[(size_t)r * mm->ldx + e]), acc[r]);
        }
    }
    for (int r = 0; r < R; r++) _mm512_mask_storeu_ps(mm->y + (size_t)(i0 + r) * mm->ldy + j0, cm, acc[r]);
}

#define F16MK_AVX512(R)                                                                            \
    AVX512 static void f16r16_mk_avx512_##R(const slm_mm *mm, int i0, int j0, __mmask16 cm) { \
        f16r16_mk_avx512(mm, i0, j0, cm, R);                                                       \
    }
F16MK_AVX512(1) F16MK_AVX512(2) F16MK_AVX512(3) F16MK_AVX512(4) F16MK_AVX512(5) F16MK_AVX512(6) F16MK_AVX512(7)
F16MK_AVX512(8)
typedef void (*f16mk512_fn)(const slm_mm *, int, int, __mmask16);
static const f16mk512_fn k_f16mk512[8] = {f16r16_mk_avx512_1, f16r16_mk_avx512_2, f16r16_mk_avx512_3, f16r16_mk_avx512_4,
                                         f16r16_mk_avx512_5, f16r16_mk_avx512_6, f16r16_mk_avx512_7, f16r16_mk_avx512_8};

AVX512 static void f16r16_matmul_avx512(const slm_mm *mm) {
    /* column groups in chunks of ~256 KiB of weights, kept in L2 across the rows */
    const uint64_t group_bytes = mm->wrow * 16 > 0 ? mm->wrow * 16 : 1;
    int chunk = (int)((256u << 10) / group_bytes) * 16;
    if (chunk < 16) chunk = 16;
    for (int c0 = mm->n0 & ~15; c0 < mm->n1; c0 += chunk)
        for (int i0 = 0; i0 < mm->rows; i0 += 8) {
            const int nr = mm->rows - i0 < 8 ? mm->rows - i0 : 8;
            for (int g0 = c0; g0 < c0 + chunk && g0 < mm->n1; g0 += 16) {
                const int a = mm->n0 > g0 ? mm->n0 - g0 : 0, e = mm->n1 - g0 < 16 ? mm->n1 - g0 : 16;
                k_f16mk512[nr - 1](mm, i0, g0, (__mmask16)(((1u << e) - 1) & ~((1u << a) - 1)));
            }
        }
}

AVX2 INLINE void f16r16_mk_avx2(const slm_mm *mm, int i0, int j0, int half, int a, int e, const int R) {
    const int k = mm->k;
    const uint16_t *g = (const uint16_t *)((const uint8_t *)mm->w + (size_t)(j0 / 16) * 16 * mm->wrow) + 8 * half;
    const float *x = mm->x + (size_t)i0 * mm->ldx;
    __m256 acc[4];
    for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps();
    if (R == 1) {
        __m256 a1 = _mm256_setzero_ps();
        int q = 0;
        for (; q + 2 <= k; q += 2) {
            acc[0] = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(g + (size_t)q * 16))), _mm256_set1_ps(x[q]), acc[0]);
            a1 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(g + (size_t)(q + 1) * 16))), _mm256_set1_ps(x[q + 1]), a1);
        }
        for (; q < k; q++)
            acc[0] = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(g + (size_t)q * 16))), _mm256_set1_ps(x[q]), acc[0]);
        acc[0] = _mm256_add_ps(acc[0], a1);
    } else {
        for (int q = 0; q < k; q++) {
            const __m256 w = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(g + (size_t)q * 16)));
            for (int r = 0; r < R; r++) acc[r] = _mm256_fmadd_ps(w, _mm256_set1_ps(x[(size_t)r * mm->ldx + q]), acc[r]);
        }
    }
    for (int r = 0; r < R; r++) {
        float t[8];
        _mm256_storeu_ps(t, acc[r]);
        float *y = mm->y + (size_t)(i0 + r) * mm->ldy + j0 + 8 * half;
        for (int c = a; c < e; c++) y[c] = t[c];
    }
}

#define F16MK_AVX2(R)                                                                                      \
    AVX2 static void f16r16_mk_avx2_##R(const slm_mm *mm, int i0, int j0, int half, int a, int e) { \
        f16r16_mk_avx2(mm, i0, j0, half, a, e, R);                                                         \
    }
F16MK_AVX2(1) F16MK_AVX2(2) F16MK_AVX2(3) F16MK_AVX2(4)
typedef void (*f16mk2_fn)(const slm_mm *, int, int, int, int, int);
static const f16mk2_fn k_f16mk2[4] = {f16r16_mk_avx2_1, f16r16_mk_avx2_2, f16r16_mk_avx2_3, f16r16_mk_avx2_4};

AVX2 static void f16r16_matmul_avx2(const slm_mm *mm) {
    for (int h0 = mm->n0 & ~7; h0 < mm->n1; h0 += 8) {
        const int a = mm->n0 > h0 ? mm->n0 - h0 : 0, e = mm->n1 - h0 < 8 ? mm->n1 - h0 : 8;
        for (int i0 = 0; i0 < mm->rows; i0 += 4) {
            const int nr = mm->rows - i0 < 4 ? mm->rows - i0 : 4;
            k_f16mk2[nr - 1](mm, i0, h0 & ~15, (h0 / 8) & 1, a, e);
        }
    }
}

/* ---- the sets' matmul ------------------------------------------------------ */

AVX512 static void qdecode_avx512(const slm_mm *mm, const qscratch *qs) {
    switch (mm->wtype) {
    case SLM_Q8_0: qdecode_avx512_t(mm, SLM_Q8_0, qs); break;
    case SLM_Q4_0: qdecode_avx512_t(mm, SLM_Q4_0, qs); break;
    case SLM_Q4_1: qdecode_avx512_t(mm, SLM_Q4_1, qs); break;
    case SLM_Q4_K: qdecode_avx512_t(mm, SLM_Q4_K, qs); break;
    case SLM_Q5_K: qdecode_avx512_t(mm, SLM_Q5_K, qs); break;
    default: qdecode_avx512_t(mm, SLM_Q6_K, qs); break;
    }
}

AVX2 static void qdecode_avx2(const slm_mm *mm, const qscratch *qs) {
    switch (mm->wtype) {
    case SLM_Q8_0: qdecode_avx2_t(mm, SLM_Q8_0, qs); break;
    case SLM_Q4_0: qdecode_avx2_t(mm, SLM_Q4_0, qs); break;
    case SLM_Q4_1: qdecode_avx2_t(mm, SLM_Q4_1, qs); break;
    case SLM_Q4_K: qdecode_avx2_t(mm, SLM_Q4_K, qs); break;
    case SLM_Q5_K: qdecode_avx2_t(mm, SLM_Q5_K, qs); break;
    default: qdecode_avx2_t(mm, SLM_Q6_K, qs); break;
    }
}

AVX512 static void matmul_avx512(const slm_mm *mm) {
    const int kind = slm_qtype_kind(mm->wtype);
    if (mm->wtype == SLM_F16_R16) {
        f16r16_matmul_avx512(mm);
        return;
    }
    if (slm_is_r16(mm->wtype)) {
        const qscratch qs = qscratch_split(mm->scratch, mm->rows, mm->k);
        if (!mm->xq_ready) quant_act_avx512(mm->x, mm->ldx, mm->rows, mm->k, 0, qs.q, qs.d, qs.s, qs.hs);
        r16_matmul_avx512(mm, &qs);
        return;
    }
    if (kind < 0) {
        fmatmul_avx512(mm);
        return;
    }
    const qscratch qs = qscratch_split(mm->scratch, mm->rows, mm->k);
    if (!mm->xq_ready) quant_act_avx512(mm->x, mm->ldx, mm->rows, mm->k, 128, qs.q, qs.d, qs.s, qs.hs);
    if (slm_quant2_kind(mm->wtype) >= 0 && (mm->rows == 1 || kind == 3)) { /* kernels_x86_quant2.c */
        slm_quant2_matmul_avx512(mm, qs.q, qs.d, qs.s, qs.hs);
        return;
    }
    if (mm->rows == 1) {
        qdecode_avx512(mm, &qs);
        return;
    }
    const int nb = mm->k / 32;
    for (int j0 = mm->n0; j0 < mm->n1; j0 += 16) {
        const int nc = mm->n1 - j0 < 16 ? mm->n1 - j0 : 16;
        slm_pack_panel(mm->wtype, mm->w, mm->wrow, j0, nc, 16, nb, qs.panel);
        const __mmask16 cm = (__mmask16)((1u << nc) - 1);
        for (int i0 = 0; i0 < mm->rows; i0 += 8) {
            const int nr = mm->rows - i0 < 8 ? mm->rows - i0 : 8;
            k_mk512[kind][nr - 1](&qs, mm->k, i0, qs.panel, mm->y + (size_t)i0 * mm->ldy + j0, mm->ldy, cm);
        }
    }
}

AVX2 static void matmul_avx2(const slm_mm *mm) {
    const int kind = slm_qtype_kind(mm->wtype);
    if (mm->wtype == SLM_F16_R16) {
        f16r16_matmul_avx2(mm);
        return;
    }
    if (slm_is_r16(mm->wtype)) {
        const qscratch qs = qscratch_split(mm->scratch, mm->rows, mm->k);
        if (!mm->xq_ready) quant_act_avx2(mm->x, mm->ldx, mm->rows, mm->k, qs.q, qs.d, qs.s, qs.hs);
        r16_matmul_avx2(mm, &qs);
        return;
    }
    if (kind < 0) {
        fmatmul_avx2(mm);
        return;
    }
    const qscratch qs = qscratch_split(mm->scratch, mm->rows, mm->k);
    if (!mm->xq_ready) quant_act_avx2(mm->x, mm->ldx, mm->rows, mm->k, qs.q, qs.d, qs.s, qs.hs);
    if (slm_quant2_kind(mm->wtype) >= 0 && (mm->rows == 1 || kind == 3)) { /* kernels_x86_quant2.c */
        slm_quant2_matmul_avx2(mm, qs.q, qs.d, qs.s, qs.hs);
        return;
    }
    if (mm->rows == 1) {
        qdecode_avx2(mm, &qs);
        return;
    }
    const int nb = mm->k / 32;
    for (int j0 = mm->n0; j0 < mm->n1; j0 += 8) {
        const int nc = mm->n1 - j0 < 8 ? mm->n1 - j0 : 8;
        slm_pack_panel(mm->wtype, mm->w, mm->wrow, j0, nc, 8, nb, qs.panel);
        for (int i0 = 0; i0 < mm->rows; i0 += 4) {
            const int nr = mm->rows - i0 < 4 ? mm->rows - i0 : 4;
            k_mk2[kind][nr - 1](&qs, mm->k, i0, qs.panel, mm->y + (size_t)i0 * mm->ldy + j0, mm->ldy, nc);
        }
    }
}

/* ---- vector kernels ---------------------------------------------------------
 * exp(x) for x <= 0 (silu's exp(-g) after the sign split): x = n ln2 + r,
 * |r| <= ln2/2, e^r by its degree-6 Taylor polynomial (rel. error < 2e-7),
 * 2^n by scaling; below -87 the result flushes to 0 (silu(g) = g or 0 there,
 * as with expf). silu(g) = g / (1 + exp(-g)) for g >= 0 and
 * g * exp(g) / (1 + exp(g)) for g < 0, so exp never overflows. */
AVX512 static inline __m512 exp_neg_avx512(__m512 x) {
    x = _mm512_max_ps(x, _mm512_set1_ps(-87.0f));
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)), 0);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.428606765330187045e-06f), r);
    __m512 p = _mm512_set1_ps(1.0f / 720.0f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
}

AVX512 static void swiglu_avx512(const float *gate, const float *up, float *y, int n) {
    for (int i = 0; i < n; i += 16) {
        const __mmask16 m = n - i >= 16 ? 0xFFFF : (__mmask16)((1u << (n - i)) - 1);
        const __m512 g = _mm512_maskz_loadu_ps(m, gate + i), u = _mm512_maskz_loadu_ps(m, up + i);
        const __m512 e = exp_neg_avx512(_mm512_sub_ps(_mm512_setzero_ps(), _mm512_abs_ps(g))); /* exp(-|g|) */
        const __m512 one = _mm512_set1_ps(1.0f);
        const __mmask16 neg = _mm512_cmp_ps_mask(g, _mm512_setzero_ps(), _CMP_LT_OQ);
        const __m512 num = _mm512_mask_mul_ps(g, neg, g, e); /* g or g e^g */
        _mm512_mask_storeu_ps(y + i, m, _mm512_mul_ps(_mm512_div_ps(num, _mm512_add_ps(one, e)), u));
    }
}

AVX512 static void rmsnorm_avx512(const float *x, const float *g, float *y, int n, float eps) {
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

AVX2 static void swiglu_avx2(const float *gate, const float *up, float *y, int n) {
    int i = 0;
    const __m256 one = _mm256_set1_ps(1.0f), zero = _mm256_setzero_ps(), sign = _mm256_set1_ps(-0.0f);
    for (; i + 8 <= n; i += 8) {
        const __m256 g = _mm256_loadu_ps(gate + i), u = _mm256_loadu_ps(up + i);
        const __m256 e = exp_neg_avx2(_mm256_or_ps(g, sign)); /* exp(-|g|) */
        const __m256 neg = _mm256_cmp_ps(g, zero, _CMP_LT_OQ);
        const __m256 num = _mm256_blendv_ps(g, _mm256_mul_ps(g, e), neg);
        _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_div_ps(num, _mm256_add_ps(one, e)), u));
    }
    if (i < n) slm_k_swiglu(gate + i, up + i, y + i, n - i);
}

AVX2 static void rmsnorm_avx2(const float *x, const float *g, float *y, int n, float eps) {
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

static const slm_kernel_set k_avx2 = {"avx2",        dot_f32_avx2, dot_f16_avx2, dot_bf16_avx2,
                                      dot_q8_0_avx2, matmul_avx2,  rmsnorm_avx2, swiglu_avx2};
static const slm_kernel_set k_avx512 = {"avx512",        dot_f32_avx512, dot_f16_avx512, dot_bf16_avx512,
                                        dot_q8_0_avx512, matmul_avx512,  rmsnorm_avx512, swiglu_avx512};

const slm_kernel_set *slm_kernels_avx2(void) {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return &k_avx2;
    return NULL;
}

const slm_kernel_set *slm_kernels_avx512(void) {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni") &&
        __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return &k_avx512;
    return NULL;
}

#else
const slm_kernel_set *slm_kernels_avx2(void) { return NULL; }
const slm_kernel_set *slm_kernels_avx512(void) { return NULL; }
#endif
