/* AVX2 and AVX-512 int8 kernels for Q5_0, Q5_1, IQ4_NL, IQ4_XS, Q2_K and
 * Q3_K weights (kernels_quant2_ref.c describes the types' int8 view).
 *
 * The sets' matmul quantizes the activations (int8 blocks of 32, with the
 * integer code sums of each half block) and calls slm_x86_quant2_matmul_* for
 * decode, and for every row count with Q2_K (whose two mins per block the
 * packed panel cannot hold); the other types' prefill runs on the shared
 * panel micro-kernels through slm_qblock_i8. Here, per weight column and
 * group of up to 4 activation rows: each block is unpacked once with SIMD
 * to 32 int8 codes, then per row an integer dot (VNNI dpbusd on AVX-512,
 * maddubs/madd on AVX2) whose lanes 0-3 and 4-7 are the two half blocks,
 * scaled by [d0 dx | d1 dx]; the mins add  dx * (m0 * hs0 + m1 * hs1). */
#include "device/kernels_x86.h"

#ifdef SLM_X86
/* Q5_1 and Q2_K have min terms (compile-time T: folds away). */
static inline int has_min(int T) { return T == SLM_Q5_1 || T == SLM_Q2_K; }

/* Low nibbles of 16 bytes in bytes 0-15, high nibbles in bytes 16-31. */
AVX2 INLINE __m256i nib32(const uint8_t *qs16) {
    const __m128i t = _mm_loadu_si128((const __m128i *)qs16);
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(t, 4), t), _mm256_set1_epi8(0x0F));
}

/* Byte e = 0xFF where bit e of the little-endian 32 bits at p is set. */
AVX2 INLINE __m256i bits32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    const __m256i which = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, /* byte of v per lane */
                                           2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i sel = _mm256_set1_epi64x(0x8040201008040201ll); /* bit e % 8 */
    const __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32((int)v), which);
    return _mm256_cmpeq_epi8(_mm256_and_si256(bytes, sel), sel);
}

/* Block b of a row of type T: 32 int8 codes; d[2], m[2] per half block. */
AVX2 INLINE __m256i qblock2(const uint8_t *row, int T, int b, float d[2], float m[2]) {
    m[0] = m[1] = 0.0f;
    switch (T) {
    case SLM_Q5_0: {
        const slm_block_q5_0 *x = (const slm_block_q5_0 *)row + b;
        d[0] = d[1] = _cvtsh_ss(x->d);
        const __m256i v = _mm256_or_si256(nib32(x->qs), _mm256_and_si256(bits32(x->qh), _mm256_set1_epi8(0x10)));
        return _mm256_sub_epi8(v, _mm256_set1_epi8(16));
    }
    case SLM_Q5_1: {
        const slm_block_q5_1 *x = (const slm_block_q5_1 *)row + b;
        d[0] = d[1] = _cvtsh_ss(x->d);
        m[0] = m[1] = _cvtsh_ss(x->m);
        return _mm256_or_si256(nib32(x->qs), _mm256_and_si256(bits32(x->qh), _mm256_set1_epi8(0x10)));
    }
    case SLM_IQ4_NL:
    case SLM_IQ4_XS: {
        const uint8_t *qs;
        if (T == SLM_IQ4_NL) {
            const slm_block_iq4_nl *x = (const slm_block_iq4_nl *)row + b;
            d[0] = d[1] = _cvtsh_ss(x->d);
            qs = x->qs;
        } else {
            const slm_block_iq4_xs *x = (const slm_block_iq4_xs *)row + b / 8;
            const int s = b % 8;
            const int ls = ((x->scales_l[s / 2] >> (4 * (s % 2))) & 0xF) | (((x->scales_h >> (2 * s)) & 3) << 4);
            d[0] = d[1] = _cvtsh_ss(x->d) * (float)(ls - 32);
            qs = x->qs + 16 * s;
        }
        const __m128i t = _mm_loadu_si128((const __m128i *)slm_kvalues_iq4nl);
        return _mm256_shuffle_epi8(_mm256_set_m128i(t, t), nib32(qs));
    }
    case SLM_Q2_K: {
        const slm_block_q2_K *x = (const slm_block_q2_K *)row + b / 8;
        const int s = b % 8, h = s / 4, j = s % 4;
        const float dd = _cvtsh_ss(x->d), dmin = _cvtsh_ss(x->dmin);
        for (int i = 0; i < 2; i++) {
            d[i] = dd * (float)(x->scales[2 * s + i] & 0xF);
            m[i] = -(dmin * (float)(x->scales[2 * s + i] >> 4));
        }
        const __m256i v = _mm256_loadu_si256((const __m256i *)(x->qs + 32 * h));
        return _mm256_and_si256(_mm256_srli_epi16(v, 2 * j), _mm256_set1_epi8(3));
    }
    default: { /* SLM_Q3_K */
        const slm_block_q3_K *x = (const slm_block_q3_K *)row + b / 8;
        const int s = b % 8, h = s / 4, j = s % 4;
        const float dd = _cvtsh_ss(x->d);
        for (int i = 0; i < 2; i++) d[i] = dd * (float)(slm_get_scale_q3_k(2 * s + i, x->scales) - 32);
        __m256i v = _mm256_loadu_si256((const __m256i *)(x->qs + 32 * h));
        v = _mm256_and_si256(_mm256_srli_epi16(v, 2 * j), _mm256_set1_epi8(3));
        const __m256i bit = _mm256_set1_epi8((char)(1 << (4 * h + j)));
        const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(_mm256_loadu_si256((const __m256i *)x->hmask), bit), bit);
        return _mm256_sub_epi8(v, _mm256_andnot_si256(set, _mm256_set1_epi8(4))); /* -4 where the bit is clear */
    }
    }
}

/* Rows [i0, i0 + nr) (nr <= 4), column j. VNNI: the activation codes are
 * unsigned (x + 128); dpbusd(x + 128, q) - dpbusd(128, q) = sum x q. */
#define QROWS 4
AVX512 INLINE void col_avx512(const slm_mm *mm, int T, int j, int i0, int nr, const uint8_t *xq, const float *xd,
                              const int32_t *hs) {
    const int nb = mm->k / 32, bb = (int)(mm->wrow / (uint64_t)nb);
    const uint8_t *row = (const uint8_t *)mm->w + (size_t)j * mm->wrow;
    const __m256i c80 = _mm256_set1_epi8((char)0x80);
    __m256 acc[QROWS];
    float macc[QROWS];
    for (int r = 0; r < QROWS; r++) acc[r] = _mm256_setzero_ps(), macc[r] = 0.0f;
    for (int b = 0; b < nb; b++) {
        float d[2], m[2];
        stream_prefetch(row + (size_t)b * bb, bb, mm->pf); /* columns are consecutive rows: one stream */
        const __m256i q = qblock2(row, T, b, d, m);
        const __m256i corr = _mm256_dpbusd_epi32(_mm256_setzero_si256(), c80, q);
        for (int r = 0; r < nr; r++) {
            const size_t ir = (size_t)(i0 + r);
            const __m256i xv = _mm256_loadu_si256((const __m256i *)(xq + ir * (size_t)mm->k + 32 * (size_t)b));
            const __m256i id = _mm256_sub_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), xv, q), corr);
            const float dx = xd[ir * nb + b];
            const __m256 sc = _mm256_set_m128(_mm_set1_ps(d[1] * dx), _mm_set1_ps(d[0] * dx));
            acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(id), sc, acc[r]);
            if (has_min(T))
                macc[r] += dx * (m[0] * (float)hs[ir * 2 * nb + 2 * b] + m[1] * (float)hs[ir * 2 * nb + 2 * b + 1]);
        }
    }
    for (int r = 0; r < nr; r++) mm->y[(size_t)(i0 + r) * mm->ldy + j] = hsum256(acc[r]) + macc[r];
}

/* As above on AVX2 with signed activation codes: maddubs(|q|, x * sign(q)). */
AVX2 INLINE void col_avx2(const slm_mm *mm, int T, int j, int i0, int nr, const uint8_t *xq, const float *xd,
                          const int32_t *hs) {
    const int nb = mm->k / 32, bb = (int)(mm->wrow / (uint64_t)nb);
    const uint8_t *row = (const uint8_t *)mm->w + (size_t)j * mm->wrow;
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[QROWS];
    float macc[QROWS];
    for (int r = 0; r < QROWS; r++) acc[r] = _mm256_setzero_ps(), macc[r] = 0.0f;
    for (int b = 0; b < nb; b++) {
        float d[2], m[2];
        stream_prefetch(row + (size_t)b * bb, bb, mm->pf); /* columns are consecutive rows: one stream */
        const __m256i q = qblock2(row, T, b, d, m);
        const __m256i aq = _mm256_abs_epi8(q);
        for (int r = 0; r < nr; r++) {
            const size_t ir = (size_t)(i0 + r);
            const __m256i xv = _mm256_loadu_si256((const __m256i *)(xq + ir * (size_t)mm->k + 32 * (size_t)b));
            const __m256i id = _mm256_madd_epi16(_mm256_maddubs_epi16(aq, _mm256_sign_epi8(xv, q)), ones);
            const float dx = xd[ir * nb + b];
            const __m256 sc = _mm256_set_m128(_mm_set1_ps(d[1] * dx), _mm_set1_ps(d[0] * dx));
            acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(id), sc, acc[r]);
            if (has_min(T))
                macc[r] += dx * (m[0] * (float)hs[ir * 2 * nb + 2 * b] + m[1] * (float)hs[ir * 2 * nb + 2 * b + 1]);
        }
    }
    for (int r = 0; r < nr; r++) mm->y[(size_t)(i0 + r) * mm->ldy + j] = hsum256(acc[r]) + macc[r];
}

#define QUANT2_MATMUL(ISA, ATTR)                                                                      \
    ATTR INLINE void matmul_##ISA##_t(const slm_mm *mm, int T, const qscratch *qs) {                \
        for (int j = mm->n0; j < mm->n1; j++)                                                       \
            for (int i0 = 0; i0 < mm->rows; i0 += QROWS)                                            \
                col_##ISA(mm, T, j, i0, mm->rows - i0 < QROWS ? mm->rows - i0 : QROWS, qs->q, qs->d, \
                          qs->hs);                                                                  \
    }                                                                                               \
    ATTR void slm_x86_quant2_matmul_##ISA(const slm_mm *mm, const qscratch *qs) {                   \
        switch (mm->wtype) {                                                                        \
        case SLM_Q5_0: matmul_##ISA##_t(mm, SLM_Q5_0, qs); break;                                   \
        case SLM_Q5_1: matmul_##ISA##_t(mm, SLM_Q5_1, qs); break;                                   \
        case SLM_IQ4_NL: matmul_##ISA##_t(mm, SLM_IQ4_NL, qs); break;                               \
        case SLM_IQ4_XS: matmul_##ISA##_t(mm, SLM_IQ4_XS, qs); break;                               \
        case SLM_Q2_K: matmul_##ISA##_t(mm, SLM_Q2_K, qs); break;                                   \
        case SLM_Q3_K: matmul_##ISA##_t(mm, SLM_Q3_K, qs); break;                                   \
        default: break;                                                                             \
        }                                                                                           \
    }
QUANT2_MATMUL(avx512, AVX512)
QUANT2_MATMUL(avx2, AVX2)
#endif
