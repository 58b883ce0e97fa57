/* AVX2 and AVX-512 int8 kernels for Q5_0, Q5_1, IQ4_NL, MXFP4, IQ4_XS, Q2_K, Q3_K
 * and the i-quants (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M) (kernels_quant2_ref.c describes the types' int8 view).
 *
 * The sets' matmul quantizes the activations (int8 blocks of 32, with the
 * integer code sums of each half block) and calls slm_x86_quant2_matmul_* for
 * decode, and for every row count with Q2_K (whose two mins per block the
 * packed panel cannot hold); the other types' prefill runs on the shared
 * panel micro-kernels through slm_qblock_i8. Here, per weight column and
 * group of up to 4 activation rows: each block is unpacked once with SIMD
 * to 32 int8 codes, then per row an integer dot (VNNI dpbusd on AVX-512,
 * maddubs/madd on AVX2) whose lanes 0-3 and 4-7 are the two half blocks,
 * scaled by [d0 dx | d1 dx]; the mins add  dx * (m0 * hs0 + m1 * hs1).
 * The types of 256-element super-blocks (Q2_K, Q3_K, IQ4_XS, the i-quants)
 * take a super-block per step instead: its 16 half-block scales from one
 * vector computation (col_sb_avx512, col_sb_avx2). */
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

/* Bytes of v negated where bit e of sg is set. */
AVX2 INLINE __m256i sign32(__m256i v, uint32_t sg) {
    const __m256i neg = bits32((const uint8_t *)&sg);
    return _mm256_sub_epi8(_mm256_xor_si256(v, neg), neg);
}

/* Bytes of v negated where the byte of neg is 0xFF. */
AVX2 INLINE __m256i negate_where(__m256i v, __m256i neg) { return _mm256_sub_epi8(_mm256_xor_si256(v, neg), neg); }

/* The sign bytes (slm_iq_signs) of the 4 x 7 sign bits (group l at bit 7l)
 * of the low and of the high 32 bits of a (bits 28-31 ignored): 8 bytes,
 * each group's 7 bits and their parity as its eighth, with scalar shifts
 * (in place of 8 table loads and the vector inserts). */
static inline uint64_t signs7x8_bits(uint64_t a) {
    const uint64_t b = (a & 0x0000007F0000007Full) | (a << 1 & 0x00007F0000007F00ull) | (a << 2 & 0x007F0000007F0000ull) |
                       (a << 3 & 0x7F0000007F000000ull);
    uint64_t t = b ^ (b >> 4); /* bit 0 of each byte: the parity of its 8 bits (bit 7 is 0) */
    t ^= t >> 2;
    t ^= t >> 1;
    return b | (t & 0x0101010101010101ull) << 7;
}

/* 4 x 7 sign bits (group l at bit 7l) as byte masks, each group's eighth
 * by parity (slm_iq_signs). */
AVX2 INLINE __m256i signs7x4(const slm_iq_grids *g, uint32_t a) {
    return _mm256_set_epi64x((long long)g->sign7[(a >> 21) & 127], (long long)g->sign7[(a >> 14) & 127],
                             (long long)g->sign7[(a >> 7) & 127], (long long)g->sign7[a & 127]);
}

/* Block b of an i-quant row (common/dtype.h gives the layouts; kernels_quant2_ref.c
 * the int8 view): grid entries gathered by index, then signed (IQ2, IQ3) or
 * offset by the delta (IQ1: codes 8 grid +- 1). */
AVX2 INLINE __m256i qblock_iq(const slm_iq_grids *g, const uint8_t *row, int T, int b, float d[2]) {
    const int s = b % 8;
    switch (T) {
    case SLM_IQ2_XXS: {
        const slm_block_iq2_xxs *x = (const slm_block_iq2_xxs *)row + b / 8;
        uint32_t a[2];
        memcpy(a, x->qs + 4 * s, 8);
        d[0] = d[1] = _cvtsh_ss(x->d) * (0.5f + (float)(a[1] >> 28)) * 0.25f;
        const __m256i v = _mm256_set_epi64x((long long)g->iq2xxs[a[0] >> 24], (long long)g->iq2xxs[(a[0] >> 16) & 255],
                                            (long long)g->iq2xxs[(a[0] >> 8) & 255], (long long)g->iq2xxs[a[0] & 255]);
        return negate_where(v, signs7x4(g, a[1]));
    }
    case SLM_IQ2_XS: {
        const slm_block_iq2_xs *x = (const slm_block_iq2_xs *)row + b / 8;
        const float dd = _cvtsh_ss(x->d);
        d[0] = dd * (0.5f + (float)(x->scales[s] & 0xF)) * 0.25f;
        d[1] = dd * (0.5f + (float)(x->scales[s] >> 4)) * 0.25f;
        const uint16_t *qs = x->qs + 4 * s;
        const __m256i v = _mm256_set_epi64x((long long)g->iq2xs[qs[3] & 511], (long long)g->iq2xs[qs[2] & 511],
                                            (long long)g->iq2xs[qs[1] & 511], (long long)g->iq2xs[qs[0] & 511]);
        const __m256i neg = _mm256_set_epi64x((long long)g->sign7[qs[3] >> 9], (long long)g->sign7[qs[2] >> 9],
                                              (long long)g->sign7[qs[1] >> 9], (long long)g->sign7[qs[0] >> 9]);
        return negate_where(v, neg);
    }
    case SLM_IQ2_S: {
        const slm_block_iq2_s *x = (const slm_block_iq2_s *)row + b / 8;
        const float dd = _cvtsh_ss(x->d);
        d[0] = dd * (0.5f + (float)(x->scales[s] & 0xF)) * 0.25f;
        d[1] = dd * (0.5f + (float)(x->scales[s] >> 4)) * 0.25f;
        const uint8_t *qs = x->qs + 4 * s;
        const int qh = x->qh[s];
        const __m256i v = _mm256_set_epi64x(
            (long long)g->iq2s[qs[3] | ((qh << 2) & 0x300)], (long long)g->iq2s[qs[2] | ((qh << 4) & 0x300)],
            (long long)g->iq2s[qs[1] | ((qh << 6) & 0x300)], (long long)g->iq2s[qs[0] | ((qh << 8) & 0x300)]);
        uint32_t sg;
        memcpy(&sg, x->qs + 32 + 4 * s, 4);
        return sign32(v, sg);
    }
    case SLM_IQ3_XXS: {
        const slm_block_iq3_xxs *x = (const slm_block_iq3_xxs *)row + b / 8;
        uint32_t a;
        memcpy(&a, x->qs + 64 + 4 * s, 4);
        d[0] = d[1] = _cvtsh_ss(x->d) * (0.5f + (float)(a >> 28)) * 0.5f;
        const uint8_t *qs = x->qs + 8 * s;
        const __m256i v = _mm256_set_epi32((int)g->iq3xxs[qs[7]], (int)g->iq3xxs[qs[6]], (int)g->iq3xxs[qs[5]],
                                           (int)g->iq3xxs[qs[4]], (int)g->iq3xxs[qs[3]], (int)g->iq3xxs[qs[2]],
                                           (int)g->iq3xxs[qs[1]], (int)g->iq3xxs[qs[0]]);
        return negate_where(v, signs7x4(g, a));
    }
    case SLM_IQ3_S: {
        const slm_block_iq3_s *x = (const slm_block_iq3_s *)row + b / 8;
        d[0] = d[1] = _cvtsh_ss(x->d) * (float)(1 + 2 * ((x->scales[s / 2] >> (4 * (s % 2))) & 0xF));
        const uint8_t *qs = x->qs + 8 * s;
        const int qh = x->qh[s];
#define IQ3S(i) (int)g->iq3s[qs[i] | ((qh << (8 - (i))) & 256)]
        const __m256i v = _mm256_set_epi32(IQ3S(7), IQ3S(6), IQ3S(5), IQ3S(4), IQ3S(3), IQ3S(2), IQ3S(1), IQ3S(0));
#undef IQ3S
        uint32_t sg;
        memcpy(&sg, x->signs + 4 * s, 4);
        return sign32(v, sg);
    }
    case SLM_IQ1_S: {
        const slm_block_iq1_s *x = (const slm_block_iq1_s *)row + b / 8;
        const unsigned qh = x->qh[s];
        d[0] = d[1] = _cvtsh_ss(x->d) * (float)(2 * ((qh >> 12) & 7) + 1) * 0.125f;
        const uint8_t *qs = x->qs + 4 * s;
        const __m256i v = _mm256_set_epi64x(
            (long long)g->iq1s8[qs[3] | ((qh >> 1) & 0x700)], (long long)g->iq1s8[qs[2] | ((qh << 2) & 0x700)],
            (long long)g->iq1s8[qs[1] | ((qh << 5) & 0x700)], (long long)g->iq1s8[qs[0] | ((qh << 8) & 0x700)]);
        return _mm256_add_epi8(v, _mm256_set1_epi8(qh & 0x8000 ? -1 : 1));
    }
    default: { /* SLM_IQ1_M */
        const slm_block_iq1_m *x = (const slm_block_iq1_m *)row + b / 8;
        uint16_t sc[4];
        memcpy(sc, x->scales, 8);
        const float dd = _cvtsh_ss(slm_iq1_m_scale_bits(x)) * 0.125f; /* inline: a call spills the accumulators */
        for (int i = 0; i < 2; i++) d[i] = dd * (float)(2 * ((sc[s / 2] >> (6 * (s % 2) + 3 * i)) & 7) + 1);
        const uint8_t *qs = x->qs + 4 * s;
        const unsigned h = x->qh[2 * s] | (unsigned)x->qh[2 * s + 1] << 8; /* group l: bits 4l..4l+3 */
        const __m256i v = _mm256_set_epi64x(
            (long long)g->iq1s8[qs[3] | ((h >> 4) & 0x700)], (long long)g->iq1s8[qs[2] | (h & 0x700)],
            (long long)g->iq1s8[qs[1] | ((h << 4) & 0x700)], (long long)g->iq1s8[qs[0] | ((h << 8) & 0x700)]);
        /* delta -1 where the group's bit 3 is set, else +1 */
        const __m256i hb = _mm256_setr_epi64x(0x8, 0x80, 0x800, 0x8000);
        const __m256i neg = _mm256_cmpeq_epi64(_mm256_and_si256(_mm256_set1_epi64x(h), hb), hb);
        return _mm256_add_epi8(v, _mm256_or_si256(neg, _mm256_set1_epi8(1)));
    }
    }
}

/* Block b of a row of type T: 32 int8 codes; d[2], m[2] per half block. */
AVX2 INLINE __m256i qblock2(const slm_iq_grids *g, const uint8_t *row, int T, int b, float d[2], float m[2]) {
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
    case SLM_MXFP4: {
        const slm_block_mxfp4 *x = (const slm_block_mxfp4 *)row + b;
        d[0] = d[1] = slm_e8m0_to_f32_half(x->e);
        const __m128i t = _mm_loadu_si128((const __m128i *)slm_kvalues_mxfp4);
        return _mm256_shuffle_epi8(_mm256_set_m128i(t, t), nib32(x->qs));
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
    case SLM_IQ2_XXS: case SLM_IQ2_XS: case SLM_IQ2_S: case SLM_IQ3_XXS: case SLM_IQ3_S: case SLM_IQ1_S:
    case SLM_IQ1_M: return qblock_iq(g, row, T, b, d);
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

#define QROWS 4

/* Row ir's integer dot id with block b (lanes 0-3 and 4-7 the two half
 * blocks, d[2], m[2] qblock2's) into the row's sums: acc += id [d0 dx | d1 dx],
 * *macc += the mins' term (has_min). */
AVX2 INLINE void col_block(int T, __m256i id, const float d[2], const float m[2], const float *xd, const int32_t *hs, int nb,
                           int b, size_t ir, __m256 *acc, float *macc) {
    const float dx = xd[ir * nb + b];
    const __m256 sc = _mm256_set_m128(_mm_set1_ps(d[1] * dx), _mm_set1_ps(d[0] * dx));
    *acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(id), sc, *acc);
    if (has_min(T)) *macc += dx * (m[0] * (float)hs[ir * 2 * nb + 2 * b] + m[1] * (float)hs[ir * 2 * nb + 2 * b + 1]);
}

/* Rows [i0, i0 + nr) (nr <= 4), column j. VNNI: the activation codes are
 * unsigned (x + 128); dpbusd(x + 128, q) - dpbusd(128, q) = sum x q. */
AVX512 INLINE void col_avx512(const slm_mm *mm, const slm_iq_grids *g, int T, int j, int i0, int nr, const uint8_t *xq, const float *xd,
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
        const __m256i q = qblock2(g, row, T, b, d, m);
        const __m256i corr = _mm256_dpbusd_epi32(_mm256_setzero_si256(), c80, q);
        for (int r = 0; r < nr; r++) {
            const size_t ir = (size_t)(i0 + r);
            const __m256i xv = _mm256_loadu_si256((const __m256i *)(xq + ir * (size_t)mm->k + 32 * (size_t)b));
            const __m256i id = _mm256_sub_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), xv, q), corr);
            col_block(T, id, d, m, xd, hs, nb, b, ir, &acc[r], &macc[r]);
        }
    }
    for (int r = 0; r < nr; r++) mm->y[(size_t)(i0 + r) * mm->ldy + j] = hsum256(acc[r]) + macc[r];
}

/* ---- a super-block per step (the types of 256-element super-blocks) ----
 * The 16 half-block scales of a super-block (qblock2's d[] of its blocks s =
 * 0..7, half-block h = 2s + i at lane h) come out of one vector computation
 * instead of scalar work per block; the per-block integer dots then run two
 * blocks to a 512-bit vector. Each scale lane holds the value qblock2
 * computes (power-of-two factors applied in either order are exact). */
static inline int sb_type(int T) { return T == SLM_Q2_K || T == SLM_Q3_K || T == SLM_IQ4_XS || slm_iq_is(T); }

/* Lane h of the result: lane h / 2 of v (each block's value to both halves). */
AVX512 INLINE __m512i dup2_epi32(__m512i v) {
    return _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7), v);
}
/* Lane h: lane h / 4 of v. */
AVX512 INLINE __m512i dup4_epi32(__m512i v) {
    return _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3), v);
}
/* Lane h: the 4-bit field of byte h / 2 of p (low nibble for even h). */
AVX512 INLINE __m512i nib16_epi32(const uint8_t *p) {
    const __m512i b = _mm512_castsi256_si512(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p))); /* 8 bytes */
    return _mm512_and_si512(_mm512_srlv_epi32(dup2_epi32(b), _mm512_setr_epi32(0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4)),
                            _mm512_set1_epi32(0xF));
}

/* Lane h: the nibble of block h / 2 among the 8 nibbles of the 4 bytes at p
 * (block s: nibble s % 2 of byte s / 2), as IQ4_XS's low scale bits and IQ3_S's scales. */
AVX512 INLINE __m512i nib8x2_epi32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return _mm512_and_si512(_mm512_srlv_epi32(dup4_epi32(_mm512_castsi128_si512(_mm_cvtepu8_epi32(_mm_cvtsi32_si128((int)v)))),
                                              _mm512_setr_epi32(0, 0, 4, 4, 0, 0, 4, 4, 0, 0, 4, 4, 0, 0, 4, 4)),
                            _mm512_set1_epi32(0xF));
}

/* IQ3_S: the super-block's 64 grid indices (low byte | ninth bit << 8)
 * computed with vectors into idx, blocks 4p + t's 8 at 32p + 8 [0, 2, 1,
 * 3][t] (unpack order): 3 scalar operations per index cost more than a
 * load from idx (IQ2_S's, IQ1_S's and IQ1_M's 4 indices per block measured
 * slower this way). Other types: nothing. */
AVX2 INLINE void sb_index16(int T, const uint8_t *x, uint16_t *idx) {
    if (T != SLM_IQ3_S) return;
    const slm_block_iq3_s *b = (const slm_block_iq3_s *)x;
    for (int p = 0; p < 2; p++) {
        const __m256i lo = _mm256_loadu_si256((const __m256i *)(b->qs + 32 * p));
        const __m256i hi = _mm256_and_si256(bits32(b->qh + 4 * p), _mm256_set1_epi8(1));
        _mm256_store_si256((__m256i *)(idx + 32 * p), _mm256_unpacklo_epi8(lo, hi));
        _mm256_store_si256((__m256i *)(idx + 32 * p + 16), _mm256_unpackhi_epi8(lo, hi));
    }
}

/* Q3_K's 16 scales minus 32 as bytes (slm_get_scale_q3_k: the low nibbles
 * of scales[0..7], then their high ones; 2 bits from scales[8 + h % 4] at
 * 2 (h / 4)). */
AVX2 INLINE __m128i q3k_scales_epi8(const uint8_t *sc) {
    const __m128i f = _mm_set1_epi8(0x0F), v = _mm_loadl_epi64((const __m128i *)sc);
    const __m128i lo = _mm_unpacklo_epi64(_mm_and_si128(v, f), _mm_and_si128(_mm_srli_epi16(v, 4), f));
    const __m128i hi = _mm_and_si128(_mm_srlv_epi32(_mm_set1_epi32(ld32(sc + 8)), _mm_setr_epi32(0, 2, 4, 6)), _mm_set1_epi8(3));
    return _mm_sub_epi8(_mm_or_si128(lo, _mm_slli_epi16(hi, 4)), _mm_set1_epi8(32));
}

/* Half-block scales of super-block x (type T); *mins the half-block mins
 * (Q2_K; zero otherwise). */
AVX512 INLINE __m512 sb_scales(int T, const uint8_t *x, __m512 *mins) {
    *mins = _mm512_setzero_ps();
    const __m512 half = _mm512_set1_ps(0.5f);
    switch (T) {
    case SLM_Q2_K: {
        const slm_block_q2_K *b = (const slm_block_q2_K *)x;
        const __m512i sc = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)b->scales));
        *mins = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_srli_epi32(sc, 4)), _mm512_set1_ps(-_cvtsh_ss(b->dmin)));
        return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_and_si512(sc, _mm512_set1_epi32(0xF))), _mm512_set1_ps(_cvtsh_ss(b->d)));
    }
    case SLM_Q3_K: {
        const slm_block_q3_K *b = (const slm_block_q3_K *)x;
        return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q3k_scales_epi8(b->scales))), _mm512_set1_ps(_cvtsh_ss(b->d)));
    }
    case SLM_IQ4_XS: {
        const slm_block_iq4_xs *b = (const slm_block_iq4_xs *)x;
        const __m512i lo = nib8x2_epi32(b->scales_l);
        const __m512i hi = _mm512_and_si512(
            _mm512_srlv_epi32(_mm512_set1_epi32(b->scales_h), _mm512_setr_epi32(0, 0, 2, 2, 4, 4, 6, 6, 8, 8, 10, 10, 12, 12, 14, 14)),
            _mm512_set1_epi32(3));
        const __m512i ls = _mm512_sub_epi32(_mm512_or_si512(lo, _mm512_slli_epi32(hi, 4)), _mm512_set1_epi32(32));
        return _mm512_mul_ps(_mm512_cvtepi32_ps(ls), _mm512_set1_ps(_cvtsh_ss(b->d)));
    }
    case SLM_IQ2_XXS: { /* the scale in the top 4 bits of each block's second word */
        const slm_block_iq2_xxs *b = (const slm_block_iq2_xxs *)x;
        const __m512i a = _mm512_permutexvar_epi32(_mm512_setr_epi32(1, 1, 3, 3, 5, 5, 7, 7, 9, 9, 11, 11, 13, 13, 15, 15),
                                                   _mm512_loadu_si512(b->qs));
        return _mm512_mul_ps(_mm512_add_ps(_mm512_cvtepi32_ps(_mm512_srli_epi32(a, 28)), half),
                             _mm512_set1_ps(_cvtsh_ss(b->d) * 0.25f));
    }
    case SLM_IQ2_XS:
    case SLM_IQ2_S: {
        const uint16_t d16 = T == SLM_IQ2_XS ? ((const slm_block_iq2_xs *)x)->d : ((const slm_block_iq2_s *)x)->d;
        const uint8_t *sc = T == SLM_IQ2_XS ? ((const slm_block_iq2_xs *)x)->scales : ((const slm_block_iq2_s *)x)->scales;
        return _mm512_mul_ps(_mm512_add_ps(_mm512_cvtepi32_ps(nib16_epi32(sc)), half), _mm512_set1_ps(_cvtsh_ss(d16) * 0.25f));
    }
    case SLM_IQ3_XXS: {
        const slm_block_iq3_xxs *b = (const slm_block_iq3_xxs *)x;
        const __m512i a = dup2_epi32(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(b->qs + 64))));
        return _mm512_mul_ps(_mm512_add_ps(_mm512_cvtepi32_ps(_mm512_srli_epi32(a, 28)), half),
                             _mm512_set1_ps(_cvtsh_ss(b->d) * 0.5f));
    }
    case SLM_IQ3_S: {
        const slm_block_iq3_s *b = (const slm_block_iq3_s *)x;
        const __m512i v = nib8x2_epi32(b->scales);
        const __m512i ls = _mm512_add_epi32(_mm512_slli_epi32(v, 1), _mm512_set1_epi32(1));
        return _mm512_mul_ps(_mm512_cvtepi32_ps(ls), _mm512_set1_ps(_cvtsh_ss(b->d)));
    }
    case SLM_IQ1_S: {
        const slm_block_iq1_s *b = (const slm_block_iq1_s *)x;
        const __m512i qh = dup2_epi32(_mm512_castsi256_si512(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)b->qh))));
        const __m512i u = _mm512_and_si512(_mm512_srli_epi32(qh, 12), _mm512_set1_epi32(7));
        const __m512i ls = _mm512_add_epi32(_mm512_slli_epi32(u, 1), _mm512_set1_epi32(1));
        return _mm512_mul_ps(_mm512_cvtepi32_ps(ls), _mm512_set1_ps(_cvtsh_ss(b->d) * 0.125f));
    }
    default: { /* SLM_IQ1_M: 3-bit fields of the four scale words, 12 bits per word */
        const slm_block_iq1_m *b = (const slm_block_iq1_m *)x;
        const __m512i w = dup4_epi32(_mm512_castsi128_si512(_mm_cvtepu16_epi32(_mm_loadl_epi64((const __m128i *)b->scales))));
        const __m512i u = _mm512_and_si512(
            _mm512_srlv_epi32(w, _mm512_setr_epi32(0, 3, 6, 9, 0, 3, 6, 9, 0, 3, 6, 9, 0, 3, 6, 9)), _mm512_set1_epi32(7));
        const __m512i ls = _mm512_add_epi32(_mm512_slli_epi32(u, 1), _mm512_set1_epi32(1));
        return _mm512_mul_ps(_mm512_cvtepi32_ps(ls), _mm512_set1_ps(_cvtsh_ss(slm_iq1_m_scale_bits(b)) * 0.125f));
    }
    }
}

/* Blocks 2p and 2p + 1 of super-block x (an i-quant) as 64 int8 codes: the
 * grid entries loaded by index (IQ3_S's indices from sb_index16), signs as
 * a byte mask register (IQ3_XXS's parity bits by signs7x8_bits; a scalar
 * mask measured slower for IQ2_XXS, whose blocks do less other work). */
AVX512 INLINE __m512i qpair_iq(const slm_iq_grids *g, const uint8_t *x, const uint16_t *idx, int T, int p) {
    switch (T) {
    case SLM_IQ3_S: { /* grid dwords by the indices of sb_index16 (a 16-dword gather measured slower) */
        const slm_block_iq3_s *b = (const slm_block_iq3_s *)x;
        __m256i v[2];
        for (int i = 0; i < 2; i++) {
            const int t = (2 * p + i) % 4;
            const uint16_t *ix = idx + 32 * (p / 2) + 8 * ((t & 1) * 2 + (t & 2) / 2);
            v[i] = _mm256_set_epi32((int)g->iq3s[ix[7]], (int)g->iq3s[ix[6]], (int)g->iq3s[ix[5]], (int)g->iq3s[ix[4]],
                                    (int)g->iq3s[ix[3]], (int)g->iq3s[ix[2]], (int)g->iq3s[ix[1]], (int)g->iq3s[ix[0]]);
        }
        const __m512i w = _mm512_inserti64x4(_mm512_castsi256_si512(v[0]), v[1], 1);
        uint64_t sg;
        memcpy(&sg, b->signs + 8 * p, 8);
        return _mm512_mask_sub_epi8(w, (__mmask64)sg, _mm512_setzero_si512(), w);
    }
    case SLM_IQ2_S: { /* grid entries as qblock_iq, the 64 sign bits as a mask */
        const slm_block_iq2_s *b = (const slm_block_iq2_s *)x;
        __m256i v[2];
        for (int i = 0; i < 2; i++) {
            const uint8_t *qs = b->qs + 8 * p + 4 * i;
            const int qh = b->qh[2 * p + i];
            v[i] = _mm256_set_epi64x(
                (long long)g->iq2s[qs[3] | ((qh << 2) & 0x300)], (long long)g->iq2s[qs[2] | ((qh << 4) & 0x300)],
                (long long)g->iq2s[qs[1] | ((qh << 6) & 0x300)], (long long)g->iq2s[qs[0] | ((qh << 8) & 0x300)]);
        }
        const __m512i w = _mm512_inserti64x4(_mm512_castsi256_si512(v[0]), v[1], 1);
        uint64_t sg;
        memcpy(&sg, b->qs + 32 + 8 * p, 8);
        return _mm512_mask_sub_epi8(w, (__mmask64)sg, _mm512_setzero_si512(), w);
    }
    case SLM_IQ3_XXS: { /* the signs as a mask register */
        const slm_block_iq3_xxs *b = (const slm_block_iq3_xxs *)x;
        __m256i v[2];
        for (int i = 0; i < 2; i++) {
            const uint8_t *qs = b->qs + 16 * p + 8 * i;
            v[i] = _mm256_set_epi32((int)g->iq3xxs[qs[7]], (int)g->iq3xxs[qs[6]], (int)g->iq3xxs[qs[5]], (int)g->iq3xxs[qs[4]],
                                    (int)g->iq3xxs[qs[3]], (int)g->iq3xxs[qs[2]], (int)g->iq3xxs[qs[1]], (int)g->iq3xxs[qs[0]]);
        }
        const __m512i w = _mm512_inserti64x4(_mm512_castsi256_si512(v[0]), v[1], 1);
        uint64_t a;
        memcpy(&a, b->qs + 64 + 8 * p, 8);
        return _mm512_mask_sub_epi8(w, (__mmask64)signs7x8_bits(a), _mm512_setzero_si512(), w);
    }
    default: {
        float d[2], m[2];
        const __m256i q0 = qblock2(g, x, T, 2 * p, d, m), q1 = qblock2(g, x, T, 2 * p + 1, d, m);
        return _mm512_inserti64x4(_mm512_castsi256_si512(q0), q1, 1);
    }
    }
}

/* Rows [i0, i0 + nr) (nr <= 4), column j, a super-block per step: the same
 * integer dots as col_avx512, scaled from the super-block's scale vector. */
AVX512 INLINE void col_sb_avx512(const slm_mm *mm, const slm_iq_grids *g, int T, int j, int i0, int nr,
                                 const uint8_t *xq, const float *xd, const int32_t *hs) {
    const int nb = mm->k / 32, nsb = nb / 8, sbb = (int)(mm->wrow / (uint64_t)nsb);
    const uint8_t *row = (const uint8_t *)mm->w + (size_t)j * mm->wrow;
    const __m512i c80 = _mm512_set1_epi8((char)0x80);
    const __m512i dup2 = _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
    const __m512i quad = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    __m512 acc[QROWS], macc[QROWS];
    for (int r = 0; r < QROWS; r++) acc[r] = macc[r] = _mm512_setzero_ps();
    for (int sb = 0; sb < nsb; sb++) {
        const uint8_t *x = row + (size_t)sb * sbb;
        stream_prefetch(x, sbb, mm->pf);
        __m512 mins;
        const __m512 ds = sb_scales(T, x, &mins);
        _Alignas(32) uint16_t idx[64];
        sb_index16(T, x, idx);
        __m512 sc[QROWS];
        for (int r = 0; r < nr; r++) {
            const size_t ir = (size_t)(i0 + r);
            const __m512 dx = _mm512_permutexvar_ps(dup2, _mm512_castps256_ps512(_mm256_loadu_ps(xd + ir * nb + 8 * sb)));
            sc[r] = _mm512_mul_ps(ds, dx);
            if (has_min(T))
                macc[r] = _mm512_fmadd_ps(_mm512_mul_ps(mins, _mm512_cvtepi32_ps(_mm512_loadu_si512(hs + ir * 2 * nb + 16 * sb))), dx,
                                          macc[r]);
        }
        for (int p = 0; p < 4; p++) { /* blocks 2p, 2p + 1 */
            const int b = 8 * sb + 2 * p;
            const __m512i q = qpair_iq(g, x, idx, T, p);
            const __m512i corr = _mm512_dpbusd_epi32(_mm512_setzero_si512(), c80, q);
            const __m512i lanes = _mm512_add_epi32(quad, _mm512_set1_epi32(4 * p));
            for (int r = 0; r < nr; r++) {
                const size_t ir = (size_t)(i0 + r);
                const __m512i xv = _mm512_loadu_si512(xq + ir * (size_t)mm->k + 32 * (size_t)b);
                const __m512i id = _mm512_sub_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), xv, q), corr);
                acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(id), _mm512_permutexvar_ps(lanes, sc[r]), acc[r]);
            }
        }
    }
    for (int r = 0; r < nr; r++)
        mm->y[(size_t)(i0 + r) * mm->ldy + j] = _mm512_reduce_add_ps(acc[r]) + (has_min(T) ? _mm512_reduce_add_ps(macc[r]) : 0.0f);
}

/* As above on AVX2 with signed activation codes: maddubs(|q|, x * sign(q)). */
AVX2 INLINE void col_avx2(const slm_mm *mm, const slm_iq_grids *g, int T, int j, int i0, int nr, const uint8_t *xq, const float *xd,
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
        const __m256i q = qblock2(g, row, T, b, d, m);
        const __m256i aq = _mm256_abs_epi8(q);
        for (int r = 0; r < nr; r++) {
            const size_t ir = (size_t)(i0 + r);
            const __m256i xv = _mm256_loadu_si256((const __m256i *)(xq + ir * (size_t)mm->k + 32 * (size_t)b));
            const __m256i id = _mm256_madd_epi16(_mm256_maddubs_epi16(aq, _mm256_sign_epi8(xv, q)), ones);
            col_block(T, id, d, m, xd, hs, nb, b, ir, &acc[r], &macc[r]);
        }
    }
    for (int r = 0; r < nr; r++) mm->y[(size_t)(i0 + r) * mm->ldy + j] = hsum256(acc[r]) + macc[r];
}

/* ---- AVX2: a super-block per step ----
 * The 16 half-block scales as integers (int16 lane h = half block h), a
 * power of two and the f16 d folded into one float per super-block: Q2_K,
 * Q3_K, IQ4_XS their 4- or 6-bit scales; IQ2_XXS/XS/S and IQ3_XXS 2 ls + 1
 * (the (0.5 + ls) of the format, halved into d); IQ3_S, IQ1_S, IQ1_M 2 ls + 1.
 * Each block's integer dot takes its two scales in the madd (in place of
 * ones; a lane is at most 2 x 32258 x 32 < 2^21, exact in 32 bits and as a
 * float), so a block's float work per row is one convert and one FMA by the
 * activation block's scale. *d the factor, *mins the Q2_K mins (int16 lane
 * h), *dmin their factor. */
/* Each 32-bit lane's low 16 bits to both its halves (a block's scale to its two half blocks). */
AVX2 INLINE __m256i dup16_epi32(__m256i v) {
    return _mm256_or_si256(_mm256_and_si256(v, _mm256_set1_epi32(0xFFFF)), _mm256_slli_epi32(v, 16));
}

/* 2 v + 1 */
AVX2 INLINE __m256i odd_epi32(__m256i v) { return _mm256_add_epi32(_mm256_add_epi32(v, v), _mm256_set1_epi32(1)); }

/* Lane s: the 4-bit field s of the 32 bits at p (block s's nibble: IQ4_XS's low scale bits, IQ3_S's scales). */
AVX2 INLINE __m256i nib8_epi32(const uint8_t *p) {
    return _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(ld32(p)), _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28)),
                            _mm256_set1_epi32(0xF));
}

AVX2 INLINE __m256i sb_scales16(int T, const uint8_t *x, float *d, __m256i *mins, float *dmin) {
    *mins = _mm256_setzero_si256(), *dmin = 0.0f;
    const __m128i f = _mm_set1_epi8(0x0F);
    switch (T) {
    case SLM_Q2_K: {
        const slm_block_q2_K *b = (const slm_block_q2_K *)x;
        const __m128i v = _mm_loadu_si128((const __m128i *)b->scales);
        *mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(v, 4), f));
        *d = _cvtsh_ss(b->d), *dmin = _cvtsh_ss(b->dmin);
        return _mm256_cvtepu8_epi16(_mm_and_si128(v, f));
    }
    case SLM_Q3_K: {
        const slm_block_q3_K *b = (const slm_block_q3_K *)x;
        *d = _cvtsh_ss(b->d);
        return _mm256_cvtepi8_epi16(q3k_scales_epi8(b->scales));
    }
    case SLM_IQ4_XS: {
        const slm_block_iq4_xs *b = (const slm_block_iq4_xs *)x;
        const __m256i hi = _mm256_and_si256(
            _mm256_srlv_epi32(_mm256_set1_epi32(b->scales_h), _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14)), _mm256_set1_epi32(3));
        *d = _cvtsh_ss(b->d);
        return dup16_epi32(_mm256_sub_epi32(_mm256_or_si256(nib8_epi32(b->scales_l), _mm256_slli_epi32(hi, 4)), _mm256_set1_epi32(32)));
    }
    case SLM_IQ2_XXS: { /* the scale in the top 4 bits of each block's second word (odd dwords) */
        const slm_block_iq2_xxs *b = (const slm_block_iq2_xxs *)x;
        const __m256 lo = _mm256_loadu_ps((const float *)b->qs), hi = _mm256_loadu_ps((const float *)(b->qs + 16));
        const __m256i a = _mm256_permute4x64_epi64(_mm256_castps_si256(_mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1))), 0xD8);
        *d = _cvtsh_ss(b->d) * 0.125f;
        return dup16_epi32(odd_epi32(_mm256_srli_epi32(a, 28)));
    }
    case SLM_IQ2_XS:
    case SLM_IQ2_S: { /* a nibble per half block */
        const uint16_t d16 = T == SLM_IQ2_XS ? ((const slm_block_iq2_xs *)x)->d : ((const slm_block_iq2_s *)x)->d;
        const uint8_t *sc = T == SLM_IQ2_XS ? ((const slm_block_iq2_xs *)x)->scales : ((const slm_block_iq2_s *)x)->scales;
        const __m128i v = _mm_loadl_epi64((const __m128i *)sc);
        const __m128i n = _mm_unpacklo_epi8(_mm_and_si128(v, f), _mm_and_si128(_mm_srli_epi16(v, 4), f));
        *d = _cvtsh_ss(d16) * 0.125f;
        return _mm256_cvtepu8_epi16(_mm_add_epi8(_mm_add_epi8(n, n), _mm_set1_epi8(1)));
    }
    case SLM_IQ3_XXS: {
        const slm_block_iq3_xxs *b = (const slm_block_iq3_xxs *)x;
        *d = _cvtsh_ss(b->d) * 0.25f;
        return dup16_epi32(odd_epi32(_mm256_srli_epi32(_mm256_loadu_si256((const __m256i *)(b->qs + 64)), 28)));
    }
    case SLM_IQ3_S: {
        const slm_block_iq3_s *b = (const slm_block_iq3_s *)x;
        *d = _cvtsh_ss(b->d);
        return dup16_epi32(odd_epi32(nib8_epi32(b->scales)));
    }
    case SLM_IQ1_S: {
        const slm_block_iq1_s *b = (const slm_block_iq1_s *)x;
        const __m256i qh = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)b->qh));
        *d = _cvtsh_ss(b->d) * 0.125f;
        return dup16_epi32(odd_epi32(_mm256_and_si256(_mm256_srli_epi32(qh, 12), _mm256_set1_epi32(7))));
    }
    default: { /* SLM_IQ1_M: lane h = bits 3 (h % 4) of word h / 4, shifted to the top by a multiply */
        const slm_block_iq1_m *b = (const slm_block_iq1_m *)x;
        uint64_t w;
        memcpy(&w, b->scales, 8);
        const __m256i wv = _mm256_shuffle_epi8(_mm256_set1_epi64x((long long)w),
                                               _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3, 2, 3, /* word h / 4 */
                                                                4, 5, 4, 5, 4, 5, 4, 5, 6, 7, 6, 7, 6, 7, 6, 7));
        const __m256i top = _mm256_setr_epi16(4096, 512, 64, 8, 4096, 512, 64, 8, 4096, 512, 64, 8, 4096, 512, 64, 8);
        const __m256i u = _mm256_and_si256(_mm256_srli_epi16(_mm256_mullo_epi16(wv, top), 12), _mm256_set1_epi16(7));
        *d = _cvtsh_ss(slm_iq1_m_scale_bits(b)) * 0.125f;
        return _mm256_add_epi16(_mm256_add_epi16(u, u), _mm256_set1_epi16(1));
    }
    }
}

/* Block s of super-block x as magnitudes *u (unsigned bytes) and *sg, whose
 * byte signs are the codes' (sign_epi8(x, sg): the activations signed as
 * the codes); Q2_K's codes are unsigned, *sg unset. The i-quant grids are
 * positive: u the grid, sg +-1 from the sign bits. */
AVX2 INLINE void qsb_avx2(const slm_iq_grids *g, const uint8_t *x, const uint16_t *idx, int T, int s, __m256i *u, __m256i *sg) {
    const __m256i one = _mm256_set1_epi8(1);
    switch (T) {
    case SLM_Q2_K: {
        const slm_block_q2_K *b = (const slm_block_q2_K *)x;
        *u = _mm256_and_si256(_mm256_srli_epi16(_mm256_loadu_si256((const __m256i *)(b->qs + 32 * (s / 4))), 2 * (s % 4)),
                              _mm256_set1_epi8(3));
        return;
    }
    case SLM_IQ2_XXS: {
        const slm_block_iq2_xxs *b = (const slm_block_iq2_xxs *)x;
        uint32_t a[2];
        memcpy(a, b->qs + 4 * s, 8);
        *u = _mm256_set_epi64x((long long)g->iq2xxs[a[0] >> 24], (long long)g->iq2xxs[(a[0] >> 16) & 255],
                               (long long)g->iq2xxs[(a[0] >> 8) & 255], (long long)g->iq2xxs[a[0] & 255]);
        *sg = _mm256_or_si256(signs7x4(g, a[1]), one); /* signs7x8_bits measured slower here */
        return;
    }
    case SLM_IQ2_XS: {
        const slm_block_iq2_xs *b = (const slm_block_iq2_xs *)x;
        const uint16_t *qs = b->qs + 4 * s;
        *u = _mm256_set_epi64x((long long)g->iq2xs[qs[3] & 511], (long long)g->iq2xs[qs[2] & 511],
                               (long long)g->iq2xs[qs[1] & 511], (long long)g->iq2xs[qs[0] & 511]);
        *sg = _mm256_or_si256(_mm256_set_epi64x((long long)g->sign7[qs[3] >> 9], (long long)g->sign7[qs[2] >> 9],
                                                (long long)g->sign7[qs[1] >> 9], (long long)g->sign7[qs[0] >> 9]),
                              one);
        return;
    }
    case SLM_IQ2_S: {
        const slm_block_iq2_s *b = (const slm_block_iq2_s *)x;
        const uint8_t *qs = b->qs + 4 * s;
        const int qh = b->qh[s];
        *u = _mm256_set_epi64x(
            (long long)g->iq2s[qs[3] | ((qh << 2) & 0x300)], (long long)g->iq2s[qs[2] | ((qh << 4) & 0x300)],
            (long long)g->iq2s[qs[1] | ((qh << 6) & 0x300)], (long long)g->iq2s[qs[0] | ((qh << 8) & 0x300)]);
        *sg = _mm256_or_si256(bits32(b->qs + 32 + 4 * s), one);
        return;
    }
    case SLM_IQ3_XXS: {
        const slm_block_iq3_xxs *b = (const slm_block_iq3_xxs *)x;
        const uint8_t *qs = b->qs + 8 * s;
        *u = _mm256_set_epi32((int)g->iq3xxs[qs[7]], (int)g->iq3xxs[qs[6]], (int)g->iq3xxs[qs[5]], (int)g->iq3xxs[qs[4]],
                              (int)g->iq3xxs[qs[3]], (int)g->iq3xxs[qs[2]], (int)g->iq3xxs[qs[1]], (int)g->iq3xxs[qs[0]]);
        uint64_t a;
        memcpy(&a, b->qs + 64 + 8 * (s / 2), 8); /* both blocks of the pair: computed once when unrolled */
        const uint32_t sb8 = (uint32_t)(signs7x8_bits(a) >> 32 * (s % 2));
        *sg = _mm256_or_si256(bits32((const uint8_t *)&sb8), one);
        return;
    }
    case SLM_IQ3_S: { /* the indices from sb_index16 */
        const slm_block_iq3_s *b = (const slm_block_iq3_s *)x;
        const uint16_t *ix = idx + 32 * (s / 4) + 8 * ((s & 1) * 2 + (s & 2) / 2);
        *u = _mm256_set_epi32((int)g->iq3s[ix[7]], (int)g->iq3s[ix[6]], (int)g->iq3s[ix[5]], (int)g->iq3s[ix[4]],
                              (int)g->iq3s[ix[3]], (int)g->iq3s[ix[2]], (int)g->iq3s[ix[1]], (int)g->iq3s[ix[0]]);
        *sg = _mm256_or_si256(bits32(b->signs + 4 * s), one);
        return;
    }
    default: { /* Q3_K, IQ4_XS, IQ1_S, IQ1_M: signed codes */
        float d[2], m[2];
        const __m256i q = qblock2(g, x, T, s, d, m);
        *u = _mm256_abs_epi8(q), *sg = q;
        return;
    }
    }
}

/* Rows [i0, i0 + nr) (nr <= 4), column j, a super-block per step on AVX2:
 * per row and block madd(maddubs(u, x signed as q), the block's two
 * scales) in 32 bits, times the activation block's scale into the
 * super-block's sum, which takes the factor d once; Q2_K's mins against
 * the half blocks' code sums, a vector per super-block. */
AVX2 INLINE void col_sb_avx2(const slm_mm *mm, const slm_iq_grids *g, int T, int j, int i0, int nr, const uint8_t *xq,
                             const float *xd, const int32_t *hs) {
    const int nb = mm->k / 32, nsb = nb / 8, sbb = (int)(mm->wrow / (uint64_t)nsb);
    const uint8_t *row = (const uint8_t *)mm->w + (size_t)j * mm->wrow;
    __m256 acc[QROWS];
    for (int r = 0; r < QROWS; r++) acc[r] = _mm256_setzero_ps();
    for (int sb = 0; sb < nsb; sb++) {
        const uint8_t *x = row + (size_t)sb * sbb;
        stream_prefetch(x, sbb, mm->pf);
        float d, dmin;
        __m256i mins;
        const __m256i sc = sb_scales16(T, x, &d, &mins, &dmin);
        _Alignas(32) uint16_t idx[64];
        sb_index16(T, x, idx);
        /* dword 2t + i of ta (blocks 0-3) and tb (4-7): half block 2t + i's scale in both 16-bit halves */
        const __m256i sp = _mm256_permute4x64_epi64(sc, 0xD8);
        const __m256i ta = _mm256_unpacklo_epi16(sp, sp), tb = _mm256_unpackhi_epi16(sp, sp);
        if (has_min(T)) { /* lane t of the 16-bit sums (packs then restore the order): block t's m0 hs0 + m1 hs1 */
            for (int r = 0; r < nr; r++) {
                const size_t ir = (size_t)(i0 + r);
                const int32_t *h = hs + ir * 2 * nb + 16 * sb;
                const __m256i h16 = _mm256_permute4x64_epi64(
                    _mm256_packs_epi32(_mm256_loadu_si256((const __m256i *)h), _mm256_loadu_si256((const __m256i *)(h + 8))), 0xD8);
                const __m256 dx = _mm256_mul_ps(_mm256_loadu_ps(xd + ir * nb + 8 * sb), _mm256_set1_ps(-dmin));
                acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(h16, mins)), dx, acc[r]);
            }
        }
        __m256 asb[QROWS];
#pragma GCC unroll 8
        for (int s = 0; s < 8; s++) {
            const int b = 8 * sb + s;
            __m256i u, sg = _mm256_setzero_si256();
            qsb_avx2(g, x, idx, T, s, &u, &sg);
            const int t = 2 * (s % 4);
            const __m256i scb = _mm256_permutevar8x32_epi32(s < 4 ? ta : tb, _mm256_setr_epi32(t, t, t, t, t + 1, t + 1, t + 1, t + 1));
            for (int r = 0; r < nr; r++) {
                const size_t ir = (size_t)(i0 + r);
                const __m256i xv = _mm256_loadu_si256((const __m256i *)(xq + ir * (size_t)mm->k + 32 * (size_t)b));
                const __m256i p = T == SLM_Q2_K ? _mm256_maddubs_epi16(u, xv) : _mm256_maddubs_epi16(u, _mm256_sign_epi8(xv, sg));
                const __m256 f = _mm256_cvtepi32_ps(_mm256_madd_epi16(p, scb));
                const __m256 dx = _mm256_broadcast_ss(xd + ir * nb + b);
                asb[r] = s == 0 ? _mm256_mul_ps(f, dx) : _mm256_fmadd_ps(f, dx, asb[r]);
            }
        }
        for (int r = 0; r < nr; r++) acc[r] = _mm256_fmadd_ps(asb[r], _mm256_set1_ps(d), acc[r]);
    }
    for (int r = 0; r < nr; r++) mm->y[(size_t)(i0 + r) * mm->ldy + j] = hsum256(acc[r]);
}

/* The types of this file but Q2_K (whose two mins per block the packed
 * panel cannot hold): X(type, arg) for each, as the cases of the switches
 * that make the type a constant of a kernel (its own type switches fold
 * away): the matmul's (with Q2_K) and the panel writer's. */
#define QUANT2_PANEL_TYPES(X, A)                                                                          \
    X(SLM_Q5_0, A) X(SLM_Q5_1, A) X(SLM_IQ4_NL, A) X(SLM_IQ4_XS, A) X(SLM_Q3_K, A) X(SLM_IQ2_XXS, A) \
    X(SLM_IQ2_XS, A) X(SLM_IQ2_S, A) X(SLM_IQ3_XXS, A) X(SLM_IQ3_S, A) X(SLM_IQ1_S, A) X(SLM_IQ1_M, A)    \
    X(SLM_MXFP4, A)

/* The row count of a call is a constant of col_* (1-4, so its accumulators
 * stay in registers: a loop-carried chain through memory costs a store
 * forward per block). */
#define MATMUL_CASE(T, ISA) case T: matmul_##ISA##_t(mm, T, qs); break;
#define QUANT2_MATMUL(ISA, ATTR, SB, COLSB)                                                                      \
    ATTR INLINE void matmul_##ISA##_t(const slm_mm *mm, int T, const qscratch *qs) {                \
        const slm_iq_grids *g = slm_iq_is(T) ? slm_iq_grids_get() : NULL; /* once, not per block */ \
        for (int j = mm->n0; j < mm->n1; j++)                                                       \
            for (int i0 = 0; i0 < mm->rows; i0 += QROWS) {                                          \
                const int nr = mm->rows - i0 < QROWS ? mm->rows - i0 : QROWS;                       \
                if (SB(T)) {                                                                        \
                    if (nr == 1) COLSB(mm, g, T, j, i0, 1, qs->q, qs->d, qs->hs);                   \
                    else if (nr == 2) COLSB(mm, g, T, j, i0, 2, qs->q, qs->d, qs->hs);              \
                    else if (nr == 3) COLSB(mm, g, T, j, i0, 3, qs->q, qs->d, qs->hs);              \
                    else COLSB(mm, g, T, j, i0, 4, qs->q, qs->d, qs->hs);                           \
                } else if (nr == 1) col_##ISA(mm, g, T, j, i0, 1, qs->q, qs->d, qs->hs);            \
                else if (nr == 2) col_##ISA(mm, g, T, j, i0, 2, qs->q, qs->d, qs->hs);              \
                else if (nr == 3) col_##ISA(mm, g, T, j, i0, 3, qs->q, qs->d, qs->hs);              \
                else col_##ISA(mm, g, T, j, i0, 4, qs->q, qs->d, qs->hs);                           \
            }                                                                                       \
    }                                                                                               \
    ATTR void slm_x86_quant2_matmul_##ISA(const slm_mm *mm, const qscratch *qs) {                   \
        switch (mm->wtype) {                                                                        \
            QUANT2_PANEL_TYPES(MATMUL_CASE, ISA)                                                    \
            MATMUL_CASE(SLM_Q2_K, ISA)                                                              \
        default: break;                                                                             \
        }                                                                                           \
    }
QUANT2_MATMUL(avx512, AVX512, sb_type, col_sb_avx512)
QUANT2_MATMUL(avx2, AVX2, sb_type, col_sb_avx2)
#undef MATMUL_CASE
/* ---- the prefill panel (kernels_x86_dot.c's micro-kernels) ----
 * slm_pack_panel's bytes (kernels.h: SLM_PANEL_BLOCK_BYTES) for the types of
 * quant2 kinds 0-2, each block unpacked with qblock2 instead of the scalar
 * reference's per-element loops (with 128 prompt rows the scalar unpack took
 * more than half of an IQ2_XXS file's prefill): per block, 8 columns' codes
 * as 8 vectors, transposed in registers to the panel's 4-byte groups; the
 * half-block code sums (corr) from the transposed groups. */
AVX2 INLINE void transpose8x8_epi32(__m256i v[8]) {
    __m256i a[8], b[8];
    for (int i = 0; i < 8; i += 2) {
        a[i] = _mm256_unpacklo_epi32(v[i], v[i + 1]);
        a[i + 1] = _mm256_unpackhi_epi32(v[i], v[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {
        b[i] = _mm256_unpacklo_epi64(a[i], a[i + 2]);
        b[i + 1] = _mm256_unpackhi_epi64(a[i], a[i + 2]);
        b[i + 2] = _mm256_unpacklo_epi64(a[i + 1], a[i + 3]);
        b[i + 3] = _mm256_unpackhi_epi64(a[i + 1], a[i + 3]);
    }
    for (int i = 0; i < 4; i++) {
        v[i] = _mm256_permute2x128_si256(b[i], b[i + 4], 0x20);
        v[i + 4] = _mm256_permute2x128_si256(b[i], b[i + 4], 0x31);
    }
}

AVX2 INLINE void pack_panel_t(const slm_iq_grids *g, int T, const uint8_t *w, uint64_t wrow, int c0, int valid, int nc, int nb,
                              uint8_t *panel) {
    const size_t pb = SLM_PANEL_BLOCK_BYTES(nc);
    const __m256i one8 = _mm256_set1_epi8(1), one16 = _mm256_set1_epi16(1);
    for (int b = 0; b < nb; b++) {
        uint8_t *p = panel + (size_t)b * pb;
        int32_t *corr = (int32_t *)(p + (size_t)nc * 32);
        float *fd = (float *)(p + (size_t)nc * 40), *fm = (float *)(p + (size_t)nc * 48);
        for (int h = 0; h < nc; h += 8) {
            __m256i v[8];
            for (int c = 0; c < 8; c++) {
                const int col = h + c;
                float d[2] = {0.0f, 0.0f}, m[2] = {0.0f, 0.0f};
                v[c] = col < valid ? qblock2(g, w + (size_t)(c0 + col) * wrow, T, b, d, m) : _mm256_setzero_si256();
                fd[col] = d[0], fd[nc + col] = d[1], fm[col] = m[0];
            }
            transpose8x8_epi32(v);
            __m256i s0 = _mm256_setzero_si256(), s1 = s0;
            for (int q = 0; q < 8; q++) {
                _mm256_storeu_si256((__m256i *)(p + (size_t)q * nc * 4 + 4 * h), v[q]);
                const __m256i s = _mm256_madd_epi16(_mm256_maddubs_epi16(one8, v[q]), one16); /* lane c: its 4 codes' sum */
                if (q < 4) s0 = _mm256_add_epi32(s0, s);
                else s1 = _mm256_add_epi32(s1, s);
            }
            _mm256_storeu_si256((__m256i *)(corr + h), _mm256_mullo_epi32(s0, _mm256_set1_epi32(-128)));
            _mm256_storeu_si256((__m256i *)(corr + nc + h), _mm256_mullo_epi32(s1, _mm256_set1_epi32(-128)));
        }
    }
}

AVX2 void slm_x86_quant2_pack_panel(uint32_t t, const uint8_t *w, uint64_t wrow, int c0, int valid, int nc, int nb, uint8_t *panel) {
    const slm_iq_grids *g = slm_iq_is(t) ? slm_iq_grids_get() : NULL;
#define PACK_CASE(T, A) case T: pack_panel_t(g, T, w, wrow, c0, valid, nc, nb, panel); break;
    switch (t) {
        QUANT2_PANEL_TYPES(PACK_CASE, 0)
    default: slm_pack_panel(t, w, wrow, c0, valid, nc, nb, panel); break; /* Q2_K and the rest: the scalar writer */
    }
#undef PACK_CASE
}
#endif
