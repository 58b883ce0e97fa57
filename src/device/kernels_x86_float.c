/* x86 float kernels: dot products of float activations with F32/F16/BF16
 * (and Q8_0) rows, and the F32/F16/BF16 matrix multiply: exact float FMAs;
 * a register block of rows x columns of dot products sharing loads (4x4
 * AVX-512, 2x4 AVX2), no scratch. */
#include "device/kernels_x86.h"

#ifdef SLM_X86

AVX2 float slm_x86_dot_f32_avx2(const void *w, const float *x, int k) {
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

AVX2 float slm_x86_dot_f16_avx2(const void *w, const float *x, int k) {
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

AVX2 float slm_x86_dot_q8_0_avx2(const void *w, const float *x, int k) {
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

AVX512 float slm_x86_dot_f32_avx512(const void *w, const float *x, int k) {
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

AVX512 float slm_x86_dot_f16_avx512(const void *w, const float *x, int k) {
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

AVX512 float slm_x86_dot_q8_0_avx512(const void *w, const float *x, int k) {
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

AVX2 float slm_x86_dot_bf16_avx2(const void *w, const float *x, int k) {
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

AVX512 float slm_x86_dot_bf16_avx512(const void *w, const float *x, int k) {
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

AVX512 void slm_x86_fmatmul_avx512(const slm_mm *mm) {
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

AVX2 void slm_x86_fmatmul_avx2(const slm_mm *mm) {
    switch (mm->wtype) {
    case SLM_F32: fmatmul_avx2_t(mm, SLM_F32); break;
    case SLM_F16: fmatmul_avx2_t(mm, SLM_F16); break;
    default: fmatmul_avx2_t(mm, SLM_BF16); break;
    }
}

#endif
